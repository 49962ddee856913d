"""The operator-index analysis (docs/experiments.md): the winding number of
every Toeplitz vector of the TMMs the other claims trained (copy at the
first length, seed 0; the language model's long run, seed 0; the
retention autoencoders' TMM encoders where saved), against the same
configs untrained.

Verdict: the paper finds trained causal TMM layers shift-like (index -1) or
near-invertible (index 0) more often than models trained to be invertible
(autoencoders). Tested here: the share of such vectors in the trained
(causal) models exceeds the share in the autoencoders' encoders (and the
untrained share is reported); not tested where no autoencoder was saved.
"""
from __future__ import annotations

import json

from tmm import train_checkpoints

from .. import operator_index
from . import lm_claim
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict

NAME = "operator-index"
TITLE = "Operator index of trained Toeplitz layers"
STATEMENT = ("trained causal TMM layers often look like a shift (index -1) or are near-invertible (index 0), more "
             "often than layers of models trained to be invertible (autoencoders).")
MODELS = ("tmm", "tmm-flat")  # the copy claim's trained TMMs analysed


def _sources(suite) -> dict:
    """name -> checkpoint folder of each trained TMM that exists (kind: causal or autoencoder)."""
    s = suite.scale
    found = {}
    for label in MODELS:
        folder = suite.root / "copy" / f"n{s.copy_ns[0]}" / "seed0" / "checkpoints" / label
        path = train_checkpoints.latest(folder) if folder.is_dir() else None
        if path is not None:
            found[f"copy-{label}"] = ("causal", path)
    path = lm_claim.long_run_checkpoint(suite, "tmm")
    if path is not None:
        found["lm-tmm"] = ("causal", path)
    for folder in sorted((suite.root / "retention").glob("*/capacity-encoders/*")):
        if (folder / "config.json").is_file() and json.loads((folder / "config.json").read_text()).get("arch") == "tmm":
            found[f"autoencoder-{folder.parent.parent.name}-{folder.name}"] = ("autoencoder", folder)
    return found


def _share(summary) -> tuple:
    counts = {int(k): v for k, v in summary["index_counts"].items()}
    total = sum(counts.values())
    good = counts.get(-1, 0) + counts.get(0, 0)
    return good, total


def run(suite) -> ClaimResult:
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        "Winding numbers of every layer's and head's Toeplitz vector (tmm.experiments.operator_index; convention: "
        + operator_index.CONVENTION + ")."))
    if suite.dry_run:
        return c
    rows = ["| model | kind | vectors | index -1 | index 0 | other | near 0 | indices per layer |",
            "|---|---|---|---|---|---|---|---|"]
    shares = {"causal": [0, 0], "untrained": [0, 0], "autoencoder": [0, 0]}
    for name, (kind, path) in _sources(suite).items():
        trained = operator_index.analyse(checkpoint=str(path))
        untrained = operator_index.analyse(config=json.dumps(trained.config), seed=0)
        for label, rep, k in ((name, trained, kind), (f"{name} (untrained)", untrained, "untrained")):
            rep.write(suite.root / "operator_index" / label.replace(" ", "_").strip("()"), plot=False)
            good, total = _share(rep.summary)
            shares[k][0] += good
            shares[k][1] += total
            counts = {int(i): n for i, n in rep.summary["index_counts"].items()}
            per_layer = {}
            for r in rep.results:
                if "skipped" not in r and not r["near_zero"]:
                    per_layer.setdefault(r["layer"], []).append(str(r["index"]))
            layers = "; ".join(f"{layer}: {','.join(v)}" for layer, v in sorted(per_layer.items()))
            rows.append(f"| {label} | {k} | {rep.summary['vectors']} | {counts.get(-1, 0)} | {counts.get(0, 0)} | "
                        f"{total - counts.get(-1, 0) - counts.get(0, 0)} | {rep.summary['near_zero']} | {layers} |")
    if len(rows) == 2:
        c.verdicts.append(Verdict("shift-like or invertible more often than autoencoders", UNTESTED,
                                  "no trained TMM checkpoints (run --only copy or lm first)"))
        return c
    c.tables.append(("Fredholm indices (near-zero symbols excluded from the counts):", "\n".join(rows)))

    def pct(k):
        good, total = shares[k]
        return None if not total else good / total

    ev = ", ".join(f"{k} {pct(k):.0%} of {shares[k][1]}" for k in shares if pct(k) is not None)
    ev = "share of index -1 or 0: " + ev
    if pct("autoencoder") is None:
        c.verdicts.append(Verdict("shift-like or invertible more often than autoencoders", UNTESTED,
                                  ev + " (no autoencoder TMM encoder saved)"))
    else:
        ok = pct("causal") > pct("autoencoder")
        c.verdicts.append(Verdict("shift-like or invertible more often than autoencoders",
                                  CONSISTENT if ok else NOT_CONSISTENT, ev))
    return c
