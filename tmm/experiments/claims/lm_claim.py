"""Claim 1, training efficiency: language modelling on the default corpus,
models matched by parameter count, each at its own best learning rate.

A short sweep (seed 0, every learning rate of the scale) picks each
model's learning rate (lowest final eval loss; a diverged run never wins);
the longer run then trains each model at that rate for every seed of the
scale. Eval loss is also reported in bits per byte, so that models compare
whatever the tokenizer.

Verdict rules, both at matched compute: the eval bits per byte of each
model (interpolated between evaluations, mean over seeds) at a number of
estimated training FLOPs (tmm.train.flops_per_token, recomputed from each
evaluation's tokens); "matched" is the smallest total any model reached.

- At matched compute TMM reaches equal or lower eval loss: TMM's bits per
  byte at the matched FLOPs at most 0.02 above each baseline's
  (Transformer, Hyena, Mamba2): "equal" is within 0.02, 0.02 included.
- TMM converges faster than the linear-complexity baselines (Hyena, Mamba2):
  at half of the matched FLOPs TMM's bits per byte more than 0.02 below
  each of the two (a tie, within 0.02, is not faster).

A baseline that did not run (or whose evaluations do not reach the point)
leaves a rule not tested, unless a baseline that did already contradicts it.

``tmm+final-norm`` (TMM with the opt-in final LayerNorm, a tmm extension,
not the authors' model) is reported beside them and takes no part in the
verdicts.
"""
from __future__ import annotations

from typing import Optional

from tmm import train_checkpoints

from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict, all_of, mean_range, pooled_table, plot_curves
from .results import over_seeds, value_at

NAME = "lm"
TITLE = "Claim 1: training efficiency (language modelling)"
STATEMENT = ("at matched compute and memory, TMM reaches equal or lower eval loss than Hyena, Mamba 2 and "
             "windowed-attention transformers, and converges faster than the linear-complexity baselines.")
TOLERANCE_BPB = 0.02  # "equal": within this many bits per byte (a tie)
BASELINES = ("transformer", "hyena", "mamba2")
LINEAR = ("hyena", "mamba2")  # the linear-complexity baselines
EXTENSION = "tmm+final-norm"


def task_options(s) -> dict:
    opts = {"tokenizer": s.lm_tokenizer, "seq_len": s.lm_seq_len, "max_bytes": s.lm_max_bytes}
    if s.lm_tokenizer == "bpe":
        opts["vocab"] = s.lm_vocab
    return opts


def best_lrs(sweep: dict, lrs) -> dict:
    """label -> the learning rate of its lowest final eval loss (lr -> JobResult); the middle lr without results."""
    best = {}
    for lr, job in sweep.items():
        for label, r in (job or {}).items():
            if r.status == "diverged" or r.final_eval_loss is None:
                continue
            if label not in best or r.final_eval_loss < best[label][1]:
                best[label] = (lr, r.final_eval_loss)
    return {label: lr for label, (lr, _) in best.items()}


def long_run_checkpoint(suite, label: str, seed: int = 0):
    """The newest checkpoint of ``label``'s long run (for the retention and operator-index claims), or None."""
    folder = suite.root / "lm" / "long" / label / f"seed{seed}" / "checkpoints"
    runs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    return train_checkpoints.latest(runs[0]) if len(runs) == 1 else None


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = lm_models(s.lm_d)
    opts = task_options(s)
    common = dict(task="lm", task_options=opts, batch_size=s.lm_batch_size)
    sweep = {lr: suite.compare(f"lm/sweep/lr{lr:g}", specs, steps=s.lm_sweep_steps, seed=0, lr=lr, **common)
             for lr in s.lm_lrs}
    chosen = best_lrs(sweep, s.lm_lrs)
    middle = s.lm_lrs[len(s.lm_lrs) // 2]
    long_jobs = {spec.label: [suite.compare(f"lm/long/{spec.label}/seed{seed}", [spec], steps=s.lm_steps, seed=seed,
                                            lr=chosen.get(spec.label, middle), **common) for seed in s.lm_seeds]
                 for spec in specs}
    tokens = s.lm_steps * s.lm_batch_size * s.lm_seq_len
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"LM on the default corpus (the KJV Bible), {s.lm_tokenizer} tokenizer"
        + (f" (vocabulary {s.lm_vocab})" if s.lm_tokenizer == "bpe" else "")
        + f", context {s.lm_seq_len}; models: the zoo's `*-cpu-small` configs at d = {s.lm_d} (faithful defaults, "
        f"docs/models.md), plus `{EXTENSION}` (extension). Sweep: lr {', '.join(f'{x:g}' for x in s.lm_lrs)}, "
        f"{s.lm_sweep_steps} steps, seed 0; long run: {s.lm_steps} steps of batch {s.lm_batch_size} "
        f"({tokens:,} tokens per model) at each model's best lr, seeds {', '.join(map(str, s.lm_seeds))}."))
    if suite.dry_run:
        return c
    sweep_rows = ["| model | " + " | ".join(f"lr {lr:g}" for lr in s.lm_lrs) + " | chosen |",
                  "|---" * (len(s.lm_lrs) + 2) + "|"]
    for spec in specs:
        cells = []
        for lr in s.lm_lrs:
            r = (sweep[lr] or {}).get(spec.label)
            cells.append("-" if r is None else ("diverged" if r.status == "diverged" else f"{r.final_bpb:.3f}"))
        sweep_rows.append(f"| {spec.label} | " + " | ".join(cells) + f" | {chosen.get(spec.label, '-')} |")
    c.tables.append((f"Sweep: final eval bits per byte after {s.lm_sweep_steps} steps (seed 0):",
                     "\n".join(sweep_rows)))
    pooled = {}
    for label, jobs in long_jobs.items():
        pooled.update(over_seeds(jobs))
    matched = matched_flops(pooled)
    cols = [("lr", lambda p: f"{chosen.get(p.label, middle):g}"),
            ("final eval bpb", lambda p: mean_range(p, "final_bpb")),
            ("final eval loss", lambda p: mean_range(p, "final_eval_loss"))]
    if matched:
        cols += [(f"bpb at {matched:.3g} FLOPs (matched)", lambda p: _fmt(bpb_at(p, matched))),
                 (f"bpb at {matched / 2:.3g} FLOPs (half)", lambda p: _fmt(bpb_at(p, matched / 2)))]
    c.tables.append((f"Long runs (mean [range] over {len(s.lm_seeds)} seeds):", pooled_table(pooled, cols)))
    c.verdicts += verdicts(pooled)
    path = "lm/lm_bpb.png"
    if plot_curves(suite.root / path, {"language modelling": pooled}, "eval_bpb", "eval bits per byte", focus=True):
        c.plots.append(path)
    return c


def matched_flops(pooled: dict) -> Optional[float]:
    """The smallest total estimated FLOPs any run of ``pooled`` (label -> Pooled) reached; None without rows."""
    return min((max(r["flops_est"] for r in run.rows) for p in pooled.values() for run in p.runs if run.rows),
               default=None)


def bpb_at(p, flops) -> Optional[float]:
    """``p``'s eval bits per byte at ``flops`` estimated FLOPs, mean over the seeds whose rows reach it."""
    vals = [v for v in (value_at(run.rows, "flops_est", "eval_bpb", flops) for run in p.runs) if v is not None]
    return sum(vals) / len(vals) if vals else None


def _fmt(x):
    return "-" if x is None else f"{x:.3f}"


def verdicts(pooled: dict) -> list:
    """The two rules of the module docstring on the long runs (label -> Pooled)."""
    equal = "TMM reaches equal or lower eval loss at matched compute"
    faster = "TMM converges faster than Hyena and Mamba2"
    tmm, matched = pooled.get("tmm"), matched_flops(pooled)
    if tmm is None or matched is None:
        return [Verdict(equal, UNTESTED, "no long runs of TMM"), Verdict(faster, UNTESTED, "no long runs of TMM")]
    out = []
    for claim, flops, rivals, beats in (
            (equal, matched, BASELINES, lambda mine, v: mine <= v + TOLERANCE_BPB),
            (faster, matched / 2, LINEAR, lambda mine, v: mine < v - TOLERANCE_BPB)):
        mine = bpb_at(tmm, flops)
        others = {label: bpb_at(pooled[label], flops) if label in pooled else None for label in rivals}
        ev = f"bpb at {flops:.3g} FLOPs: tmm {_fmt(mine)}, " + ", ".join(f"{k} {_fmt(v)}" for k, v in others.items()) \
            + f" (tolerance {TOLERANCE_BPB} bpb)"
        if mine is None:
            out.append(Verdict(claim, UNTESTED, ev))
            continue
        out.append(Verdict(claim, all_of({k: None if v is None else beats(mine, v) for k, v in others.items()}), ev))
    return out
