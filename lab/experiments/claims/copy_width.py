"""The copy claim's width pair, as the authors ran it: a flat TMM of 1/32 of
Hyena's width and 8 layers (their narrow TMM has d = 4) against Hyena at
the copy claim's depth, at the first copy length, each at its own best
learning rate; and the efficiency margin the copy rules share.

A sweep (seed 0, ``Scale.width_lrs``, each model's grid grown past an edge
where its best lies: :func:`.lr_grid.sweep`) picks each model's rate: the
fewest steps to 0.9 accuracy, else to 0.5, else the highest final accuracy
(a diverged run never wins). The other seeds then train each model at its
rate; seed 0's run is the sweep's.

Verdict ("copies about as efficiently"), at the highest of the common
accuracies 0.9 and 0.5 that either model reaches in some seed: the narrow
TMM's share of the pair's speed to it (:func:`.results.speed_share`: speed
1 / steps, 0 for a run that never got there) less 0.4, the share at 1.5x
Hyena's steps, per paired seed, by the settle rule of :mod:`.margins`
(within 1.5x holds); not tested when neither reaches 0.5.
"""
from __future__ import annotations

from typing import Optional

from tmm.tables import markdown_table

from . import lr_grid
from .margins import judged, paired
from .models import width_models
from .report import UNTESTED, Verdict, mean_range
from .results import speed_share, steps_to

THRESHOLDS = (0.9, 0.5)  # the common accuracies, highest first
RATIO = 1.5  # "about as efficiently": steps within this factor


def reached(p, threshold) -> list:
    """Steps to ``threshold`` of each seed of Pooled ``p`` that got there."""
    return [s for s in (steps_to(r, threshold) for r in p.runs) if s is not None]


def _rank(run) -> tuple:
    """Sort key of one run: lower is better (the module docstring's order)."""
    return tuple(steps_to(run, t) or float("inf") for t in THRESHOLDS) + (-(run.final_acc or 0.0),)


def best_lr(runs: dict) -> Optional[float]:
    """The learning rate of the best run of ``runs`` (lr -> ModelResult, or None where it did not run)."""
    ok = {lr: _rank(r) for lr, r in runs.items() if r is not None and r.status != "diverged"}
    return min(ok, key=ok.get) if ok else None


def run(suite):
    """Trains the pair; (label -> Pooled at each one's best lr, the sweep's markdown table, the Verdict)."""
    s = suite.scale
    n = s.copy_ns[0]
    specs = width_models(s.width_ratio, s.width_hyena_d, s.width_narrow_layers, s.copy_layers)
    grids, chosen, pooled = lr_grid.sweep(suite, f"copy/width/n{n}", specs, s.width_lrs, s.seeds, choose=best_lr,
                                          task="copy", task_options={"n": n, "vocab": s.copy_vocab},
                                          steps=s.copy_steps)
    lrs = sorted({lr for g in grids.values() for lr in g})
    rows = []
    for spec in specs:
        cells = []
        for lr in lrs:
            r = grids[spec.label].get(lr)
            cells.append("-" if r is None else f"{r.final_acc:.3f} / {_steps(steps_to(r, 0.9))} / "
                                                f"{_steps(steps_to(r, 0.5))}")
        rows.append([spec.label, *cells, f"{chosen[spec.label]:g}"])
    narrow, wide = (spec.label for spec in specs)
    v = verdict(pooled.get(narrow), pooled.get(wide), s.width_ratio, narrow, wide)
    table = markdown_table(["model", *(f"lr {lr:g}" for lr in lrs), "chosen"], rows, left=len(lrs) + 2)
    return pooled, table, Verdict(f"n={n}: {v.claim}", v.verdict, v.evidence, v.margin, v.spread, v.seeds, v.unit)


def _steps(s):
    return "-" if s is None else str(s)


def steps_cell(p, threshold) -> str:
    """Mean [range] steps to ``threshold`` over the seeds that reached it, and how many did."""
    vals = reached(p, threshold)
    if not vals:
        return f"not reached (0/{len(p.runs)})"
    return f"{sum(vals) / len(vals):.0f}" + (f" [{min(vals)}-{max(vals)}]" if len(vals) > 1 else "") + \
        f" ({len(vals)}/{len(p.runs)})"


COLUMNS = [("final acc", lambda p: mean_range(p, "final_acc")),
           ("steps to 0.9", lambda p: steps_cell(p, 0.9)), ("steps to 0.5", lambda p: steps_cell(p, 0.5))]


def efficiency(a, b, a_name, b_name, threshold, ratio=RATIO) -> tuple:
    """Is ``a`` (Pooled) about as efficient as ``b`` at reaching ``threshold``? (verdict, Margin or None,
    evidence): margin a's share of the pair's speed to it less the share at ``ratio`` times b's steps,
    1 / (1 + ratio), per paired seed (within the ratio holds); not tested when neither ran or neither got
    there."""
    if a is None or b is None:
        return UNTESTED, None, "not run: " + ", ".join(n for n, p in ((a_name, a), (b_name, b)) if p is None)
    ev = f"steps to {threshold}: {a_name} {steps_cell(a, threshold)}, {b_name} {steps_cell(b, threshold)}"
    if not reached(a, threshold) and not reached(b, threshold):
        return UNTESTED, None, ev + " (neither reached it)"
    m = paired(a, b, lambda x, y: _less(speed_share(x, y, threshold), 1 / (1 + ratio)), unit="", digits=3,
               strict=False)
    return m.verdict, m, ev + f" (margin: {a_name}'s share of the pair's speed - {1 / (1 + ratio):.3g}, the share at " \
                              f"{ratio:g}x the steps)"


def _less(x, y):
    return None if x is None else x - y


def verdict(narrow, wide, ratio: int, narrow_label: str, wide_label: str) -> Verdict:
    """The module docstring's rule on two Pooled (None: did not run)."""
    claim = f"a TMM with 1/{ratio} of Hyena's width copies about as efficiently"
    if narrow is None or wide is None:
        missing = ", ".join(label for label, p in ((narrow_label, narrow), (wide_label, wide)) if p is None)
        return Verdict(claim, UNTESTED, f"not run: {missing}")
    for t in THRESHOLDS:
        if reached(narrow, t) or reached(wide, t):
            v, m, ev = efficiency(narrow, wide, narrow_label, wide_label, t)
            return judged(claim, v, m, ev)
    ev = "; ".join(f"steps to {t}: {narrow_label} {steps_cell(narrow, t)}, {wide_label} {steps_cell(wide, t)}"
                   for t in THRESHOLDS)
    return Verdict(claim, UNTESTED, ev + " (neither reached 0.5)")
