"""The copy claim's width pair, as the authors ran it: a flat TMM of 1/32 of
Hyena's width and 8 layers (their narrow TMM has d = 4) against Hyena at
the copy claim's depth, at the first copy length, each at its own best
learning rate.

A sweep (seed 0, every learning rate of ``Scale.width_lrs``) picks each
model's rate: the fewest steps to 0.9 accuracy, else to 0.5, else the
highest final accuracy. The other seeds then train each model at its rate;
seed 0's run is the sweep's at that rate (the same settings).

Verdict ("copies about as efficiently"), at the highest of the common
accuracies 0.9 and 0.5 that either model reaches: consistent when the
narrow TMM reaches it in more seeds than Hyena, not consistent when in
fewer, and with as many, when its mean steps to it are at most 1.5x
Hyena's (1.5x exactly matches); not tested when neither reaches 0.5.
"""
from __future__ import annotations

from typing import Optional

from tmm.tables import markdown_table

from .models import width_models
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, Verdict, mean_range
from .results import over_seeds

THRESHOLDS = (0.9, 0.5)  # the common accuracies, highest first
RATIO = 1.5  # "about as efficiently": mean steps within this factor


def steps_to(run, threshold: float) -> Optional[int]:
    """The first evaluation step of ``run`` (a ModelResult) at >= ``threshold`` accuracy; None if never."""
    return next((r["step"] for r in run.rows if (r.get("eval_acc") or 0.0) >= threshold), None)


def _reached(p, threshold):
    return [s for s in (steps_to(r, threshold) for r in p.runs) if s is not None]


def _rank(p):
    """Sort key of one sweep run (a Pooled of one seed): lower is better."""
    return tuple(min(_reached(p, t), default=float("inf")) for t in THRESHOLDS) + (-(p.mean("final_acc") or 0.0),)


def best_lrs(sweep: dict) -> dict:
    """label -> the learning rate of its best sweep run (lr -> JobResult; the module docstring's order)."""
    best = {}
    for lr, job in sweep.items():
        for label, p in over_seeds([job]).items():
            if p.statuses[0] != "diverged" and (label not in best or _rank(p) < best[label][1]):
                best[label] = (lr, _rank(p))
    return {label: lr for label, (lr, _) in best.items()}


def run(suite):
    """Trains the pair; (label -> Pooled at each one's best lr, the sweep's markdown table, the Verdict)."""
    s = suite.scale
    n = s.copy_ns[0]
    specs = width_models(s.width_ratio, s.width_hyena_d, s.width_narrow_layers, s.copy_layers)
    common = dict(task="copy", task_options={"n": n, "vocab": s.copy_vocab}, steps=s.copy_steps)
    sweep = {lr: suite.compare(f"copy/width/n{n}/lr{lr:g}", specs, seed=0, lr=lr, **common) for lr in s.width_lrs}
    chosen = best_lrs({lr: job for lr, job in sweep.items() if job})
    first = s.width_lrs[0]
    pooled = {}
    for spec in specs:
        lr = chosen.get(spec.label, first)
        jobs = [(sweep[lr] or {}).get(spec.label)] + [
            (suite.compare(f"copy/width/n{n}/{spec.label}/seed{seed}", [spec], seed=seed, lr=lr, **common) or {})
            .get(spec.label) for seed in s.seeds if seed != 0]
        pooled.update(over_seeds([{spec.label: r} for r in jobs if r is not None]))
    head = ["model", *(f"lr {lr:g}" for lr in s.width_lrs), "chosen"]
    rows = []
    for spec in specs:
        cells = []
        for lr in s.width_lrs:
            r = (sweep[lr] or {}).get(spec.label)
            cells.append("-" if r is None else f"{r.final_acc:.3f} / {_steps(steps_to(r, 0.9))} / "
                                                f"{_steps(steps_to(r, 0.5))}")
        rows.append([spec.label, *cells, chosen.get(spec.label, "-")])
    narrow, wide = (spec.label for spec in specs)
    v = verdict(pooled.get(narrow), pooled.get(wide), s.width_ratio, narrow, wide)
    return pooled, markdown_table(head, rows, left=len(head)), Verdict(f"n={n}: {v.claim}", v.verdict, v.evidence)


def _steps(s):
    return "-" if s is None else str(s)


def steps_cell(p, threshold) -> str:
    """Mean [range] steps to ``threshold`` over the seeds that reached it, and how many did."""
    vals = _reached(p, threshold)
    if not vals:
        return f"not reached (0/{len(p.runs)})"
    return f"{sum(vals) / len(vals):.0f}" + (f" [{min(vals)}-{max(vals)}]" if len(vals) > 1 else "") + \
        f" ({len(vals)}/{len(p.runs)})"


COLUMNS = [("final acc", lambda p: mean_range(p, "final_acc")),
           ("steps to 0.9", lambda p: steps_cell(p, 0.9)), ("steps to 0.5", lambda p: steps_cell(p, 0.5))]


def verdict(narrow, wide, ratio: int, narrow_label: str, wide_label: str) -> Verdict:
    """The module docstring's rule on two Pooled (None: did not run)."""
    claim = f"a TMM with 1/{ratio} of Hyena's width copies about as efficiently"
    if narrow is None or wide is None:
        missing = ", ".join(label for label, p in ((narrow_label, narrow), (wide_label, wide)) if p is None)
        return Verdict(claim, UNTESTED, f"not run: {missing}")
    ev = "; ".join(f"steps to {t}: {narrow_label} {steps_cell(narrow, t)}, {wide_label} {steps_cell(wide, t)}"
                   for t in THRESHOLDS)
    for t in THRESHOLDS:
        a, b = _reached(narrow, t), _reached(wide, t)
        if not a and not b:
            continue
        if len(a) != len(b):
            return Verdict(claim, CONSISTENT if len(a) > len(b) else NOT_CONSISTENT,
                           ev + f" (at {t}: reached in {len(a)} vs {len(b)} seeds)")
        r = (sum(a) / len(a)) / (sum(b) / len(b))
        return Verdict(claim, CONSISTENT if r <= RATIO else NOT_CONSISTENT,
                       ev + f" (at {t}: ratio {r:.2f}, threshold {RATIO:g})")
    return Verdict(claim, UNTESTED, ev + " (neither reached 0.5)")
