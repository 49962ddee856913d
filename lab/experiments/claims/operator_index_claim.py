"""The operator-index analysis (docs/experiments.md): the winding number of
every Toeplitz vector of trained TMMs, causal against autoencoders, with
kernels of the same length and the same training on both sides.

The autoencoders are the retention claim's capacity encoders: the zoo's
TMM at d = ``lm_d`` over windows of ``retention_n`` tokens (so
``retention_n`` taps per vector), trained end to end ``retention_steps``
steps of batch ``batch_size`` at lr 1e-3, in both harnesses, seeds
``retention_seeds``. The causal models are trained here on the same
length, steps, batch, learning rate and seeds: the same TMM as a language
model on claim 1's corpus at context ``retention_n``, and the zoo's TMM and
flat TMM on copy at n = ``retention_n`` / 2 (sequence ``retention_n``,
random tokens out of ``retention_random_vocab``). The language model's
matched-compute TMMs (``lm_seq_len`` taps) are analysed too, for the table
only: their length differs.

Verdict: the paper finds trained causal TMM layers shift-like (index -1) or
near-invertible (index 0) more often than models trained to be invertible
(autoencoders). Tested here per seed: the share of such vectors among the
causal models' (of that seed, same length) minus the share among the
autoencoders', the margin of the settle rule of :mod:`.margins` (a tie is
not consistent), counting only the models whose vectors training moved
measurably: the median over their vectors of the sine of the angle between
the trained and the initial vector (:func:`..operator_index.movement`; the
index ignores scale) above :data:`MOVED` = 0.1. Below that a vector is its
random start plus a perturbation of a tenth of its size, and its index is
still the random start's (about -n/2), so it says nothing about training.
Not tested where no causal model or no autoencoder of a seed moved.

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
from . import lm_claim, retention_claim
from .margins import Margin, judged
from .models import copy_models, lm_models
from .report import UNTESTED, ClaimResult, Verdict

NAME = "operator-index"
ONE_MACHINE = True  # reads the other claims' checkpoints: not run with --any-machine
TITLE = "Operator index of trained Toeplitz layers"
STATEMENT = ("trained causal TMM layers often look like a shift (index -1) or are near-invertible (index 0), more "
             "often than layers of models trained to be invertible (autoencoders).")
MOVED = 0.1  # "moved measurably": median sine of the angle to the initial vectors (module docstring)
LR = 1e-3  # the retention harness's learning rate, which the causal models share
SOURCES = "operator-index/sources"  # the derived jobs: one per analysed model


def causal_models(s) -> dict:
    """task -> the causal TMMs trained on it at the autoencoders' length: the zoo's TMM on the language model
    (claim 1's), the zoo's TMM and flat TMM on copy."""
    lm = lm_models(s.lm_d, s.lm_seq_len, names=("tmm",))
    return {"lm": lm, "copy": copy_models(s.lm_d, lm[0].config()["n_layers"], names=("tmm", "tmm-flat"))}


def _causal_jobs(suite) -> dict:
    """name -> (job path, label) of the causal models trained here (jobs train unless finished)."""
    s = suite.scale
    n = s.retention_n
    tasks = {"lm": ("lm", {**lm_claim.task_options(s), "seq_len": n}),
             "copy": ("copy", {"n": n // 2, "vocab": s.retention_random_vocab})}
    found = {}
    for key, specs in causal_models(s).items():
        task, opts = tasks[key]
        for seed in s.retention_seeds:
            path = f"operator-index/causal/{key}{n}/seed{seed}"
            suite.compare(path, specs, task=task, task_options=opts, steps=s.retention_steps, seed=seed, lr=LR,
                          batch_size=s.batch_size, read_later=True)
            for m in specs:
                found[f"{key}{n}-{m.label}-seed{seed}"] = (path, m.label, seed)
    return found


def _sources(suite) -> dict:
    """name -> (kind, taps, seed, the job that trained it, checkpoint or None, folder of its initial vectors or
    None): each trained TMM whose job finished (the checkpoint where it is on this machine)."""
    s = suite.scale
    found = {}

    def add(name, kind, taps, seed, job, folder):
        path = None
        if folder is not None and folder.is_dir():
            path = folder if (folder / "config.json").is_file() and kind == "autoencoder" else \
                train_checkpoints.latest(folder)
        found[name] = (kind, taps, seed, job, path, folder)

    for name, (job, label, seed) in _causal_jobs(suite).items():
        add(name, "causal", s.retention_n, seed, job, suite.root / job / "checkpoints" / label)
    for harness in retention_claim.HARNESSES:
        for seed in s.retention_seeds:
            job = retention_claim.job_path(harness, "capacity", seed)
            add(f"autoencoder-{harness}-tmm-seed{seed}", "autoencoder", s.retention_n, seed, job,
                suite.root / job / "capacity-encoders" / "tmm")
    for seed in s.lm_seeds:
        job = lm_claim.matched_path(suite, "tmm", seed)
        add(f"lm{s.lm_seq_len}-tmm-seed{seed}", "causal", s.lm_seq_len, seed, job,
            suite.root / job / "checkpoints" / "tmm")
    return found


def _counts(rep, moved) -> dict:
    """The table's and the verdict's numbers of one operator_index report."""
    counts = {int(i): n for i, n in rep.summary["index_counts"].items()}
    per_layer = {}
    for r in rep.results:
        if "skipped" not in r and not r["near_zero"]:
            per_layer.setdefault(r["layer"], []).append(str(r["index"]))
    total = sum(counts.values())
    return {"vectors": rep.summary["vectors"], "index_minus_1": counts.get(-1, 0), "index_0": counts.get(0, 0),
            "good": counts.get(-1, 0) + counts.get(0, 0), "total": total, "near_zero": rep.summary["near_zero"],
            "moved": moved, "layers": "; ".join(f"{layer}: {','.join(v)}" for layer, v in sorted(per_layer.items()))}


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


@dataclasses.dataclass
class Source:
    """One analysed model: its vectors of index -1 or 0 (``good``) among those
    with a reliable index (``total``), and how far training moved them."""
    name: str
    kind: str  # causal, autoencoder or untrained
    good: int
    total: int
    moved: Optional[float] = None  # operator_index.movement; None: initial vectors not saved (or untrained)
    taps: int = 0  # the vectors' length
    seed: int = 0


def run(suite) -> ClaimResult:
    s = suite.scale
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"Winding numbers of every layer's and head's Toeplitz vector (lab.experiments.operator_index; convention: "
        f"{operator_index.CONVENTION}). Autoencoders: the retention claim's capacity encoders ({s.retention_n} "
        f"taps, {s.retention_steps} steps of batch {s.batch_size}, lr {LR:g}, both harnesses); causal: the zoo's "
        f"TMM as a language model at context {s.retention_n} and the zoo's TMM and flat TMM on copy at n = "
        f"{s.retention_n // 2}, the same length, steps, batch, lr and seeds "
        f"({', '.join(map(str, s.retention_seeds))}); "
        f"claim 1's matched-compute TMMs ({s.lm_seq_len} taps) in the table only."))
    sources = _sources(suite)
    if suite.dry_run:
        return c
    head = ["model", "kind", "taps", "vectors", "index -1", "index 0", "other", "near 0", "moved", "indices per layer"]
    rows, analysed = [], []
    for name, (kind, taps, seed, job, path, start) in sources.items():
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
            analysed.append(Source(label, k, n["good"], n["total"], n["moved"], taps, seed))
            shown = "-" if k == "untrained" else ("not saved" if n["moved"] is None else f"{n['moved']:.3f}")
            rows.append([label, k, taps, n["vectors"], n["index_minus_1"], n["index_0"],
                         n["total"] - n["index_minus_1"] - n["index_0"], n["near_zero"], shown, n["layers"]])
    if rows:
        c.tables.append(("Fredholm indices (near-zero symbols excluded from the counts; moved: median sine of the "
                         "angle between each trained vector and its initial one):",
                         markdown_table(head, rows, left=len(head))))
    c.verdicts.append(verdict(analysed, s.retention_n))
    return c


def verdict(sources: list, taps: int) -> Verdict:
    """The verdict on :class:`Source` s (the module docstring's rule), counting the vectors of ``taps`` taps."""
    claim = f"shift-like or invertible more often than autoencoders ({taps} taps)"
    if not sources:
        return Verdict(claim, UNTESTED, "no trained TMM checkpoints (run --only retention first)")
    shares = {}  # (kind, seed) -> [good, total]
    still = []
    for src in sources:
        if src.taps != taps:
            continue
        if src.kind != "untrained" and (src.moved is None or src.moved <= MOVED):
            still.append(f"{src.name} ({'initial vectors not saved' if src.moved is None else f'{src.moved:.3f}'})")
            continue
        cell = shares.setdefault((src.kind, src.seed), [0, 0])
        cell[0] += src.good
        cell[1] += src.total

    def share(kind, seed=None):
        cells = [v for (k, s), v in shares.items() if k == kind and (seed is None or s == seed)]
        good, total = sum(v[0] for v in cells), sum(v[1] for v in cells)
        return None if not total else good / total

    kinds = ("causal", "autoencoder", "untrained")
    ev = "share of index -1 or 0: " + (", ".join(
        f"{k} {share(k):.0%} of {sum(v[1] for (kk, _), v in shares.items() if kk == k)}" for k in kinds
        if share(k) is not None) or "no vectors")
    if still:
        ev += f"; not counted, not moved by more than {MOVED}: " + ", ".join(still)
    seeds = sorted({s for (k, s) in shares if k == "causal"} & {s for (k, s) in shares if k == "autoencoder"})
    missing = [k for k in ("causal", "autoencoder") if share(k) is None]
    if missing or not seeds:
        return Verdict(claim, UNTESTED, ev + f" (no trained {' or '.join(missing) or 'paired'} model to count)")
    m = Margin({seed: share("causal", seed) - share("autoencoder", seed) for seed in seeds}, unit="share", digits=3)
    return judged(claim, m.verdict, m, ev + " (margin: causal share - autoencoder share, per seed)")
