"""Claim 1, training efficiency: language modelling on the default corpus,
models matched by parameter count, each at its own best learning rate and
each read at the end of its own schedule.

A sweep (seed 0, every learning rate of the scale, ``lm_sweep_steps``
steps) picks each model's learning rate (lowest final eval loss; a diverged
run never wins). Where a model's best is at an edge of its grid, the grid
grows past that edge (:mod:`.lr_grid`) until the best is inside it, so the
optimum is bracketed (or the table says it is not). Then, at its rate:

- **matched compute**: every model trains a full schedule of its own (10%
  warm-up, linear decay to a tenth of the rate at its last step) whose
  estimated training FLOPs (tmm.train.flops_per_token) end at the budget
  TMM spends in ``lm_steps`` steps: a model that costs more per token
  trains fewer steps. Seeds ``lm_seeds`` (the extension below: the first).
- **half that budget**: the same for TMM, Hyena and Mamba2 (the
  "converges faster" rule). Seeds ``lm_seeds``.
- **equal tokens**: every model ``lm_steps`` steps (TMM's run is its
  matched run), seeds ``lm_equal_seeds``; a second table, no verdict, with
  each model's bits per byte at the matched FLOPs read mid-run beside its
  final ones.

Verdict rules, on the final eval bits per byte of runs of the same seed
(paired; the settle rule of :mod:`.margins`):

- At matched compute TMM reaches equal or lower eval loss than each
  baseline (Transformer, the windowed Transformer, Hyena, Mamba2): margin
  baseline + 0.02 - TMM per seed (a tie within 0.02 passes).
- TMM converges faster than the linear-complexity baselines (Hyena,
  Mamba2): at half the budget, margin baseline - 0.02 - TMM per seed (a
  tie is not faster).

A baseline that did not run leaves a rule not tested, unless one that ran
already contradicts it. ``tmm+final-norm`` (the opt-in final LayerNorm, a
tmm extension, not the authors' model) is reported beside them and takes no
part in the verdicts.
"""
from __future__ import annotations

from typing import Optional

from tmm import train_checkpoints
from tmm.tables import markdown_table

from ..formatting import fmt_num
from . import lr_grid
from .margins import combine, judged, listing, paired
from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict, mean_range, plot_curves, pooled_table, seeds_ran
from .results import over_seeds, value_at

NAME = "lm"
TITLE = "Claim 1: training efficiency (language modelling)"
STATEMENT = ("at matched compute and memory, TMM reaches equal or lower eval loss than Hyena, Mamba 2 and "
             "windowed-attention transformers, and converges faster than the linear-complexity baselines.")
TOLERANCE_BPB = 0.02  # "equal": within this many bits per byte (a tie)
BASELINES = ("transformer", "transformer-window", "hyena", "mamba2")
LINEAR = ("hyena", "mamba2")  # the linear-complexity baselines
EXTENSION = "tmm+final-norm"


def task_options(s) -> dict:
    opts = {"tokenizer": s.lm_tokenizer, "seq_len": s.lm_seq_len, "max_bytes": s.lm_max_bytes}
    if s.lm_tokenizer == "bpe":
        opts["vocab"] = s.lm_vocab
    return opts


def models(s) -> list:
    return lm_models(s.lm_d, s.lm_seq_len)


def best_lr(runs: dict) -> Optional[float]:
    """The learning rate of the lowest final eval loss among ``runs`` (lr -> ModelResult or None); None when
    every run diverged or none finished an evaluation."""
    ok = {lr: r.final_eval_loss for lr, r in runs.items()
          if r is not None and r.status != "diverged" and r.final_eval_loss is not None}
    return min(ok, key=ok.get) if ok else None


def budget(suite) -> float:
    """The matched budget: TMM's estimated training FLOPs in ``lm_steps`` steps."""
    s = suite.scale
    tmm = next(m for m in models(s) if m.label == "tmm")
    return suite.flops_per_token(tmm, "lm", task_options(s)) * s.lm_steps * s.lm_batch_size * s.lm_seq_len


def steps_for(suite, spec, flops: float) -> int:
    """The steps of a full schedule of ``spec`` whose estimated FLOPs end at ``flops``."""
    s = suite.scale
    per_step = suite.flops_per_token(spec, "lm", task_options(s)) * s.lm_batch_size * s.lm_seq_len
    return max(1, round(flops / per_step))


def run_path(label: str, steps: int, seed: int) -> str:
    """The job of ``label``'s run of ``steps`` steps at ``seed``, under the suite's root."""
    return f"lm/steps{steps}/{label}/seed{seed}"


def matched_path(suite, label: str, seed: int = 0) -> str:
    """The job of ``label``'s matched-compute run at ``seed`` (what retention, in-context and operator-index read)."""
    spec = next(m for m in models(suite.scale) if m.label == label)
    return run_path(label, steps_for(suite, spec, budget(suite)), seed)


def matched_checkpoint(suite, label: str, seed: int = 0):
    """The newest checkpoint of ``label``'s matched-compute run at ``seed``, or None."""
    folder = suite.root / matched_path(suite, label, seed) / "checkpoints"
    runs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    return train_checkpoints.latest(runs[0]) if len(runs) == 1 else None


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = models(s)
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
    full = budget(suite)

    def runs(spec, steps, seeds, read_later=False):
        return over_seeds([suite.compare(run_path(spec.label, steps, seed), [spec], steps=steps, seed=seed,
                                         lr=chosen.get(spec.label, middle), read_later=read_later, **common)
                           for seed in seeds])

    matched, half, equal, steps = {}, {}, {}, {}
    for spec in specs:  # retention, in-context and operator-index read the matched runs' checkpoints
        steps[spec.label] = (steps_for(suite, spec, full), steps_for(suite, spec, full / 2))
        seeds = s.lm_seeds[:1] if spec.label == EXTENSION else s.lm_seeds  # the extension: no verdict, one seed
        matched.update(runs(spec, steps[spec.label][0], seeds, read_later=True))
    for spec in specs:
        if spec.label in ("tmm",) + LINEAR:
            half.update(runs(spec, steps[spec.label][1], s.lm_seeds))
    for spec in specs:
        equal.update(runs(spec, s.lm_steps, s.lm_equal_seeds, read_later=steps[spec.label][0] == s.lm_steps))
    tokens = s.lm_steps * s.lm_batch_size * s.lm_seq_len
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"LM on the default corpus (the KJV Bible), {s.lm_tokenizer} tokenizer"
        + (f" (vocabulary {s.lm_vocab})" if s.lm_tokenizer == "bpe" else "")
        + f", context {s.lm_seq_len}; models: the zoo's `*-cpu-small` configs at d = {s.lm_d} (faithful defaults, "
        f"docs/models.md), the Transformer also with a sliding window of {max(1, s.lm_seq_len // 2)} (the zoo's "
        f"softmax attention: the nearest stand-in for the authors' windowed linear attention), plus `{EXTENSION}` "
        f"(extension). Sweep: lr {', '.join(f'{x:g}' for x in s.lm_lrs)}, {s.lm_sweep_steps} steps, seed 0. At "
        f"each model's best lr, batch {s.lm_batch_size}: matched compute, a full schedule per model (10% warm-up, "
        f"linear decay to its last step) ending at TMM's estimated FLOPs in {s.lm_steps} steps ({full:.3g}), "
        f"seeds {', '.join(map(str, s.lm_seeds))}; half that budget for TMM, Hyena and Mamba2, the same seeds; "
        f"equal tokens, {s.lm_steps} steps ({tokens:,} tokens) per model, seeds "
        f"{', '.join(map(str, s.lm_equal_seeds))}. Each evaluation over {s.lm_eval_batches} held-out batches "
        f"({s.lm_eval_batches * s.lm_batch_size * s.lm_seq_len:,} tokens). Peak train memory: the resident-set "
        f"(CPU) or allocator (CUDA) peak above the memory in use before the run (lab.bench.memory)."))
    if suite.dry_run:
        return c
    all_lrs = sorted({lr for runs_ in grids.values() for lr in runs_})
    sweep_head = ["model", *(f"lr {lr:g}" for lr in all_lrs), "chosen", "bracketed"]
    sweep_rows = []
    for spec in specs:
        grid, cells = grids[spec.label], []
        for lr in all_lrs:
            r = grid.get(lr)
            cells.append("-" if r is None else ("diverged" if r.status == "diverged" else f"{r.final_bpb:.3f}"))
        best = chosen.get(spec.label)
        inside = "-" if best is None else ("yes" if min(grid) < best < max(grid) else "no (at an edge)")
        sweep_rows.append([spec.label, *cells, best if best is not None else "-", inside])
    c.tables.append((f"Sweep: final eval bits per byte after {s.lm_sweep_steps} steps (seed 0; each model's grid "
                     f"grown past an edge where its best lay, at most {lr_grid.MAX_EXTENSIONS} times per side; "
                     f"'-': not "
                     f"in that model's grid):", markdown_table(sweep_head, sweep_rows, left=len(sweep_head))))
    lr_col = ("lr", lambda p: f"{chosen.get(p.label, middle):g}")
    bpb_col = ("final eval bpb", lambda p: mean_range(p, "final_bpb"))
    mem_col = ("peak train memory MiB", lambda p: mean_range(p, "peak_mem_mib", nd=0))
    c.tables.append((f"Matched compute: each model's own schedule ending at {full:.3g} estimated FLOPs (mean "
                     f"[range] over {seeds_ran(matched, len(s.lm_seeds))}):", pooled_table(matched, [
                         lr_col, ("steps", lambda p: f"{steps[p.label][0]:,}"), bpb_col, mem_col])))
    c.tables.append((f"Half the budget ({full / 2:.3g} FLOPs), each model's own schedule (mean [range] over "
                     f"{seeds_ran(half, len(s.lm_seeds))}):", pooled_table(half, [
                         lr_col, ("steps", lambda p: f"{steps[p.label][1]:,}"), bpb_col])))
    c.tables.append((f"Equal tokens, {s.lm_steps} steps per model (mean [range] over "
                     f"{seeds_ran(equal, len(s.lm_equal_seeds))}; no verdict); the last column reads each run at "
                     f"the matched FLOPs mid-run, where its learning rate has not decayed:", pooled_table(equal, [
                         lr_col, bpb_col, mem_col,
                         (f"bpb at {full:.3g} FLOPs (mid-run)", lambda p: fmt_num(bpb_at(p, full)))])))
    c.verdicts += verdicts(matched, half)
    path = "lm/lm_bpb.png"
    groups = {"matched compute (own schedules)": matched, "half the budget": half, "equal tokens": equal}
    if plot_curves(suite.root / path, groups, "eval_bpb", "eval bits per byte", focus=True):
        c.plots.append(path)
    return c


def bpb_at(p, flops) -> Optional[float]:
    """``p``'s eval bits per byte at ``flops`` estimated FLOPs, mean over the seeds whose rows reach it."""
    vals = [v for v in (value_at(run.rows, "flops_est", "eval_bpb", flops) for run in p.runs) if v is not None]
    return sum(vals) / len(vals) if vals else None


def _rule(claim, pooled, rivals, margin, strict) -> Verdict:
    """One rule against several rivals: each rival's paired margin (``margin(tmm_run, rival_run)``), combined."""
    tmm = pooled.get("tmm")
    if tmm is None:
        return Verdict(claim, UNTESTED, "no runs of TMM")
    margins = {k: paired(tmm, pooled[k], margin, strict=strict) if k in pooled else None for k in rivals}
    verdict, decides = combine(margins)
    ev = "final eval bpb: " + ", ".join(f"{k} {mean_range(pooled[k], 'final_bpb')}" for k in ("tmm",) + rivals
                                        if k in pooled)
    ev += f"; margins {listing(margins)}" + (f"; deciding: {decides}" if decides else "")
    return judged(claim, verdict, margins.get(decides), ev)


def _gap(t, b, offset) -> Optional[float]:
    """b's final bits per byte + ``offset`` - t's (None where either has none)."""
    return None if t.final_bpb is None or b.final_bpb is None else b.final_bpb + offset - t.final_bpb


def verdicts(matched: dict, half: dict) -> list:
    """The two rules of the module docstring on the matched and half-budget runs (label -> Pooled)."""
    return [
        _rule("TMM reaches equal or lower eval loss at matched compute", matched, BASELINES,
              lambda t, b: _gap(t, b, TOLERANCE_BPB), strict=False),
        _rule("TMM converges faster than Hyena and Mamba2 (half the budget)", half, LINEAR,
              lambda t, b: _gap(t, b, -TOLERANCE_BPB), strict=True),
    ]
