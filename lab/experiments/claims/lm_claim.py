"""Claim 1, training efficiency: language modelling on the default corpus,
models matched by parameter count, each at its own best learning rate.

A sweep (seed 0, every learning rate of the scale) picks each model's
learning rate (lowest final eval loss; a diverged run never wins). Where a
model's best is at an edge of its grid, the grid grows past that edge
(:mod:`.lr_grid`) until the best is inside it, so the optimum is bracketed
(or the table says it is not). The longer run then trains each model at
its rate for every seed of the scale. Eval loss is also reported in bits
per byte, so that models compare whatever the tokenizer.

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
from tmm.tables import markdown_table

from ..formatting import fmt_num
from . import lr_grid
from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict, all_of, mean_range, pooled_table, plot_curves, seeds_ran
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


def best_lr(runs: dict) -> Optional[float]:
    """The learning rate of the lowest final eval loss among ``runs`` (lr -> ModelResult or None); None when
    every run diverged or none finished an evaluation."""
    ok = {lr: r.final_eval_loss for lr, r in runs.items()
          if r is not None and r.status != "diverged" and r.final_eval_loss is not None}
    return min(ok, key=ok.get) if ok else None


def long_run_path(label: str, seed: int = 0) -> str:
    """The job of ``label``'s long run at ``seed``, under the suite's root."""
    return f"lm/long/{label}/seed{seed}"


def long_run_checkpoint(suite, label: str, seed: int = 0):
    """The newest checkpoint of ``label``'s long run (for the retention and operator-index claims), or None."""
    folder = suite.root / long_run_path(label, seed) / "checkpoints"
    runs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    return train_checkpoints.latest(runs[0]) if len(runs) == 1 else None


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = lm_models(s.lm_d)
    opts = task_options(s)
    common = dict(task="lm", task_options=opts, batch_size=s.lm_batch_size, eval_batches=s.lm_eval_batches)
    sweep = {lr: suite.compare(f"lm/sweep/lr{lr:g}", specs, steps=s.lm_sweep_steps, seed=0, lr=lr, **common)
             for lr in s.lm_lrs}
    grids = {spec.label: {lr: (sweep[lr] or {}).get(spec.label) for lr in s.lm_lrs} for spec in specs}
    for spec in specs:  # grow each model's grid past an edge where its best lies
        lr_grid.grow(grids[spec.label], best_lr, lambda lr, spec=spec: (suite.compare(
            f"lm/sweep/{spec.label}/lr{lr:g}", [spec], steps=s.lm_sweep_steps, seed=0, lr=lr, **common) or {}
        ).get(spec.label))
    chosen = {label: lr for label, lr in ((label, best_lr(runs)) for label, runs in grids.items())
              if lr is not None}
    middle = s.lm_lrs[len(s.lm_lrs) // 2]
    long_jobs = {spec.label: [suite.compare(long_run_path(spec.label, seed), [spec], steps=s.lm_steps, seed=seed,
                                            lr=chosen.get(spec.label, middle), read_later=(seed == 0), **common)
                              for seed in s.lm_seeds]  # seed 0: retention, in-context and operator-index read it
                 for spec in specs}
    tokens = s.lm_steps * s.lm_batch_size * s.lm_seq_len
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"LM on the default corpus (the KJV Bible), {s.lm_tokenizer} tokenizer"
        + (f" (vocabulary {s.lm_vocab})" if s.lm_tokenizer == "bpe" else "")
        + f", context {s.lm_seq_len}; models: the zoo's `*-cpu-small` configs at d = {s.lm_d} (faithful defaults, "
        f"docs/models.md), plus `{EXTENSION}` (extension). Sweep: lr {', '.join(f'{x:g}' for x in s.lm_lrs)}, "
        f"{s.lm_sweep_steps} steps, seed 0; long run: {s.lm_steps} steps of batch {s.lm_batch_size} "
        f"({tokens:,} tokens per model) at each model's best lr, seeds {', '.join(map(str, s.lm_seeds))}; each "
        f"evaluation over {s.lm_eval_batches} held-out batches "
        f"({s.lm_eval_batches * s.lm_batch_size * s.lm_seq_len:,} tokens). Peak train memory: the resident-set (CPU) or allocator (CUDA) peak above the memory in use "
        f"before the run (lab.bench.memory)."))
    if suite.dry_run:
        return c
    all_lrs = sorted({lr for runs in grids.values() for lr in runs})
    sweep_head = ["model", *(f"lr {lr:g}" for lr in all_lrs), "chosen", "bracketed"]
    sweep_rows = []
    for spec in specs:
        runs, cells = grids[spec.label], []
        for lr in all_lrs:
            r = runs.get(lr)
            cells.append("-" if r is None else ("diverged" if r.status == "diverged" else f"{r.final_bpb:.3f}"))
        best = chosen.get(spec.label)
        inside = "-" if best is None else ("yes" if min(runs) < best < max(runs) else "no (at an edge)")
        sweep_rows.append([spec.label, *cells, best if best is not None else "-", inside])
    c.tables.append((f"Sweep: final eval bits per byte after {s.lm_sweep_steps} steps (seed 0; each model's grid "
                     f"grown past an edge where its best lay, at most {lr_grid.MAX_EXTENSIONS} times per side; '-': not "
                     f"in that model's grid):", markdown_table(sweep_head, sweep_rows, left=len(sweep_head))))
    pooled = {}
    for label, jobs in long_jobs.items():
        pooled.update(over_seeds(jobs))
    matched = matched_flops(pooled)
    cols = [("lr", lambda p: f"{chosen.get(p.label, middle):g}"),
            ("final eval bpb", lambda p: mean_range(p, "final_bpb")),
            ("final eval loss", lambda p: mean_range(p, "final_eval_loss")),
            ("peak train memory MiB", lambda p: mean_range(p, "peak_mem_mib", nd=0))]
    if matched:
        cols += [(f"bpb at {matched:.3g} FLOPs (matched)", lambda p: fmt_num(bpb_at(p, matched))),
                 (f"bpb at {matched / 2:.3g} FLOPs (half)", lambda p: fmt_num(bpb_at(p, matched / 2)))]
    c.tables.append((f"Long runs (mean [range] over {seeds_ran(pooled, len(s.lm_seeds))}):", pooled_table(pooled, cols)))
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
        ev = (f"bpb at {flops:.3g} FLOPs: tmm {fmt_num(mine)}, "
              + ", ".join(f"{k} {fmt_num(v)}" for k, v in others.items()) + f" (tolerance {TOLERANCE_BPB} bpb)")
        if mine is None:
            out.append(Verdict(claim, UNTESTED, ev))
            continue
        out.append(Verdict(claim, all_of({k: None if v is None else beats(mine, v) for k, v in others.items()}), ev))
    return out
