"""The operator-index analysis (docs/experiments.md): the winding number of
every Toeplitz vector of the TMMs the other claims trained (copy at the
first length, seed 0; the language model's long run, seed 0; the
retention autoencoders' TMM encoders where saved), against the same
configs untrained.

Verdict: the paper finds trained causal TMM layers shift-like (index -1) or
near-invertible (index 0) more often than models trained to be invertible
(autoencoders). Tested here: the share of such vectors in the trained
(causal) models strictly exceeds the share in the autoencoders' encoders (a
tie is not consistent; the untrained share is reported), counting only the
models whose vectors training moved measurably: the median over their
vectors of the sine of the angle between the trained and the initial vector
(:func:`..operator_index.movement`; the index ignores scale) above
:data:`MOVED` = 0.1. Below that a vector is its random start plus a
perturbation of a tenth of its size, and its index is still the random
start's (about -n/2: perturbations of that size move the index of a random
256-tap vector by a median of 2), so it says nothing about training; one copy
run (d 32, n = 16) that reached 0.9 accuracy turned its vectors by 0.2-0.4.
Not tested where no causal model or no autoencoder moved, or where their
initial vectors were not saved (runs before they were: the untrained row is
then rebuilt from the config and seed 0, for the table only).

Each model's analysis is a derived job (``operator-index/sources/<model>``,
archived), so the table and verdict are rebuilt where the checkpoints are
not.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Optional

from tmm import train_checkpoints
from tmm.tables import markdown_table

from .. import operator_index
from . import lm_claim
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict

NAME = "operator-index"
ONE_MACHINE = True  # reads the other claims' checkpoints: not run with --any-machine
TITLE = "Operator index of trained Toeplitz layers"
STATEMENT = ("trained causal TMM layers often look like a shift (index -1) or are near-invertible (index 0), more "
             "often than layers of models trained to be invertible (autoencoders).")
MODELS = ("tmm", "tmm-flat")  # the copy claim's trained TMMs analysed
MOVED = 0.1  # "moved measurably": median sine of the angle to the initial vectors (module docstring)


SOURCES = "operator-index/sources"  # the derived jobs: one per analysed model


def _sources(suite) -> dict:
    """name -> (kind, the job that trained it, checkpoint, folder of its initial vectors) of each trained TMM
    (kind: causal or autoencoder) whose checkpoints are on this machine, then (kind, job, None, None) of each
    whose analysis the archive holds."""
    s = suite.scale
    found = {}
    copy_job = f"copy/n{s.copy_ns[0]}/seed0"
    for label in MODELS:
        folder = suite.root / copy_job / "checkpoints" / label
        path = train_checkpoints.latest(folder) if folder.is_dir() else None
        if path is not None:
            found[f"copy-{label}"] = ("causal", copy_job, path, folder)
    path = lm_claim.long_run_checkpoint(suite, "tmm")
    if path is not None:
        found["lm-tmm"] = ("causal", lm_claim.long_run_path("tmm"), path, path.parent)
    for folder in sorted((suite.root / "retention").glob("*/*/capacity-encoders/*")):  # <harness>/<job>/...
        if (folder / "config.json").is_file() and json.loads((folder / "config.json").read_text()).get("arch") == "tmm":
            job = folder.parent.parent
            found[f"autoencoder-{job.parent.name}-{job.name}-{folder.name}"] = (
                "autoencoder", f"retention/{job.parent.name}/{job.name}", folder, folder)
    for name in suite.archived_jobs(SOURCES):
        if name not in found:
            record = suite.finished_record(f"{SOURCES}/{name}")
            found[name] = (record["model_kind"], record["source"], None, None)
    return found


def _counts(rep, moved) -> dict:
    """The table's and the verdict's numbers of one operator_index report."""
    counts = {int(i): n for i, n in rep.summary["index_counts"].items()}
    per_layer = {}
    for r in rep.results:
        if "skipped" not in r and not r["near_zero"]:
            per_layer.setdefault(r["layer"], []).append(str(r["index"]))
    good, total = _share(rep.summary)
    return {"vectors": rep.summary["vectors"], "index_minus_1": counts.get(-1, 0), "index_0": counts.get(0, 0),
            "good": good, "total": total, "near_zero": rep.summary["near_zero"], "moved": moved,
            "layers": "; ".join(f"{layer}: {','.join(v)}" for layer, v in sorted(per_layer.items()))}


def _analyse(suite, name: str, path, start) -> dict:
    """The trained model at checkpoint ``path`` and its initial vectors (in ``start``, else rebuilt from its
    config at seed 0); the full reports go to ``operator_index/`` under the suite's root."""
    trained = operator_index.analyse(checkpoint=str(path))
    saved = (start / operator_index.INITIAL_VECTORS).is_file()
    untrained = operator_index.analyse(initial=start) if saved else \
        operator_index.analyse(config=json.dumps(trained.config), seed=0)
    moved = operator_index.movement(trained, untrained) if saved else None
    for label, rep in ((name, trained), (f"{name} (untrained)", untrained)):
        rep.write(suite.root / "operator_index" / label.replace(" ", "_").strip("()"), plot=False)
    return {"trained": _counts(trained, moved), "untrained": _counts(untrained, None)}


def _share(summary) -> tuple:
    counts = {int(k): v for k, v in summary["index_counts"].items()}
    total = sum(counts.values())
    good = counts.get(-1, 0) + counts.get(0, 0)
    return good, total


@dataclasses.dataclass
class Source:
    """One analysed model: its vectors of index -1 or 0 (``good``) among those
    with a reliable index (``total``), and how far training moved them."""
    name: str
    kind: str  # causal, autoencoder or untrained
    good: int
    total: int
    moved: Optional[float] = None  # operator_index.movement; None: initial vectors not saved (or untrained)


def run(suite) -> ClaimResult:
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        "Winding numbers of every layer's and head's Toeplitz vector (lab.experiments.operator_index; convention: "
        + operator_index.CONVENTION + ")."))
    if suite.dry_run:
        return c
    head = ["model", "kind", "vectors", "index -1", "index 0", "other", "near 0", "moved", "indices per layer"]
    rows = []
    sources = []
    for name, (kind, job, path, start) in _sources(suite).items():
        job_record = suite.finished_record(job)
        if job_record is None:  # checkpoints of a run that has not finished
            continue
        record = {"kind": "operator-index", "model_kind": kind, "source": job, "source_record": job_record}
        r = suite.derived(f"{SOURCES}/{name}", record,
                          lambda name=name, path=path, start=start:
                          None if path is None else _analyse(suite, name, path, start))
        if r is None:
            continue
        for label, n, k in ((name, r["trained"], kind), (f"{name} (untrained)", r["untrained"], "untrained")):
            sources.append(Source(label, k, n["good"], n["total"], n["moved"]))
            shown = "-" if k == "untrained" else ("not saved" if n["moved"] is None else f"{n['moved']:.3f}")
            rows.append([label, k, n["vectors"], n["index_minus_1"], n["index_0"],
                         n["total"] - n["index_minus_1"] - n["index_0"], n["near_zero"], shown, n["layers"]])
    if sources:
        c.tables.append(("Fredholm indices (near-zero symbols excluded from the counts; moved: median sine of the "
                         "angle between each trained vector and its initial one):",
                         markdown_table(head, rows, left=len(head))))
    c.verdicts.append(verdict(sources))
    return c


def verdict(sources: list) -> Verdict:
    """The verdict on :class:`Source` s (the module docstring's rule)."""
    claim = "shift-like or invertible more often than autoencoders"
    if not sources:
        return Verdict(claim, UNTESTED, "no trained TMM checkpoints (run --only copy or lm first)")
    shares = {"causal": [0, 0], "autoencoder": [0, 0], "untrained": [0, 0]}
    still = []
    for src in sources:
        if src.kind != "untrained" and (src.moved is None or src.moved <= MOVED):
            still.append(f"{src.name} ({'initial vectors not saved' if src.moved is None else f'{src.moved:.3f}'})")
            continue
        shares[src.kind][0] += src.good
        shares[src.kind][1] += src.total

    def pct(k):
        good, total = shares[k]
        return None if not total else good / total

    ev = "share of index -1 or 0: " + (", ".join(f"{k} {pct(k):.0%} of {shares[k][1]}" for k in shares
                                                 if pct(k) is not None) or "no vectors")
    if still:
        ev += f"; not counted, not moved by more than {MOVED}: " + ", ".join(still)
    missing = [k for k in ("causal", "autoencoder") if pct(k) is None]
    if missing:
        return Verdict(claim, UNTESTED, ev + f" (no trained {' or '.join(missing)} model to count)")
    return Verdict(claim, CONSISTENT if pct("causal") > pct("autoencoder") else NOT_CONSISTENT, ev)
