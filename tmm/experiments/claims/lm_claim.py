"""Claim 1, training efficiency: language modelling on the default corpus,
models matched by parameter count, each at its own best learning rate.

A short sweep (seed 0, every learning rate of the scale) picks each
model's learning rate (lowest final eval loss; a diverged run never wins);
the longer run then trains each model at that rate for every seed of the
scale. Eval loss is also reported in bits per byte, so that models compare
whatever the tokenizer.

Verdict rules:

- At matched compute TMM reaches equal or lower eval loss: at the smallest
  total estimated FLOPs any model reached, TMM's bits per byte (interpolated
  between evaluations, mean over seeds) are at most 0.02 above the best
  baseline's.
- TMM converges faster than the linear-complexity baselines (Hyena, Mamba2):
  at half of the token budget TMM's bits per byte are at most 0.02 above
  the better of the two.

``tmm+final-norm`` (TMM with the opt-in final LayerNorm, a tmm extension,
not the authors' model) is reported beside them and takes no part in the
verdicts.
"""
from __future__ import annotations

from tmm import train_checkpoints

from .models import lm_models
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict, mean_range, pooled_table, \
    plot_curves
from .results import over_seeds, value_at

NAME = "lm"
TITLE = "Claim 1: training efficiency (language modelling)"
STATEMENT = ("at matched compute and memory, TMM reaches equal or lower eval loss than Hyena, Mamba 2 and "
             "windowed-attention transformers, and converges faster than the linear-complexity baselines.")
TOLERANCE_BPB = 0.02  # "equal": within this many bits per byte
BASELINES = ("transformer", "hyena", "mamba2")
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
    matched = min((max(r["flops_est"] for r in run.rows) for p in pooled.values() for run in p.runs if run.rows),
                  default=None)
    half = tokens / 2

    def at(p, key, x):
        vals = [v for v in (value_at(run.rows, key, "eval_bpb", x) for run in p.runs) if v is not None]
        return sum(vals) / len(vals) if vals else None

    cols = [("lr", lambda p: f"{chosen.get(p.label, middle):g}"),
            ("final eval bpb", lambda p: mean_range(p, "final_bpb")),
            ("final eval loss", lambda p: mean_range(p, "final_eval_loss")),
            (f"bpb at {matched:.3g} FLOPs" if matched else "bpb at matched FLOPs",
             lambda p: _fmt(at(p, "flops_est", matched) if matched else None)),
            (f"bpb at {half:,.0f} tokens", lambda p: _fmt(at(p, "tokens", half)))]
    c.tables.append((f"Long runs (mean [range] over {len(s.lm_seeds)} seeds):", pooled_table(pooled, cols)))
    c.verdicts += verdicts(pooled, at, matched, half)
    path = "lm/lm_bpb.png"
    if plot_curves(suite.root / path, {"language modelling": pooled}, "eval_bpb", "eval bits per byte"):
        c.plots.append(path)
    return c


def _fmt(x):
    return "-" if x is None else f"{x:.3f}"


def verdicts(pooled, at, matched, half) -> list:
    tmm = pooled.get("tmm")
    out = []
    if tmm is None or matched is None:
        return [Verdict("TMM reaches equal or lower eval loss at matched compute", UNTESTED, "no long runs")]
    base = {label: at(pooled[label], "flops_est", matched) for label in BASELINES if label in pooled}
    base = {k: v for k, v in base.items() if v is not None}
    mine = at(tmm, "flops_est", matched)
    ev = f"bpb at {matched:.3g} FLOPs: tmm {_fmt(mine)}, " + ", ".join(f"{k} {_fmt(v)}" for k, v in base.items())
    if mine is None or not base:
        out.append(Verdict("TMM reaches equal or lower eval loss at matched compute", UNTESTED, ev))
    else:
        ok = mine <= min(base.values()) + TOLERANCE_BPB
        out.append(Verdict("TMM reaches equal or lower eval loss at matched compute",
                           CONSISTENT if ok else NOT_CONSISTENT, ev + f" (tolerance {TOLERANCE_BPB} bpb)"))
    linear = {label: at(pooled[label], "tokens", half) for label in ("hyena", "mamba2") if label in pooled}
    linear = {k: v for k, v in linear.items() if v is not None}
    mine = at(tmm, "tokens", half)
    ev = f"bpb at {half:,.0f} tokens: tmm {_fmt(mine)}, " + ", ".join(f"{k} {_fmt(v)}" for k, v in linear.items())
    if mine is None or not linear:
        out.append(Verdict("TMM converges faster than Hyena and Mamba2", UNTESTED, ev))
    else:
        ok = mine <= min(linear.values()) + TOLERANCE_BPB
        out.append(Verdict("TMM converges faster than Hyena and Mamba2", CONSISTENT if ok else NOT_CONSISTENT, ev))
    return out
