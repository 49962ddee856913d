"""Associative recall (MQAR), the project's own test: the paper makes no
MQAR claim (its claim 3 is about retrieval and in-context-learning
benchmarks, which this suite does not run). It is reported beside the
claims because recall is where Zoology (Arora, Eyuboglu et al. 2023) found
gated convolutions such as Hyena weakest.

Run as Zoology runs it: keys from the lower half of the vocabulary and
values from the upper half, no random fillers (zeros between the pairs and
the queries), each key queried once at a later position, accuracy on the
value positions only (:mod:`tmm.tasks.mqar` with ``random_non_queries``
false), each evaluation over ``mqar_eval_batches`` x ``mqar_batch_size``
held-out sequences (1,024 at ``default``); every architecture at d =
``mqar_d`` with ``mqar_layers`` layers, seed 0. A learning-rate sweep per
architecture: on the first setting (key-value pairs, sequence) every model
trains at every lr of ``mqar_lrs`` and its accuracy is its best over them,
as Zoology reports. Where a model's best lies at an edge of its grid, its
grid grows past that edge (:mod:`.lr_grid`), unless its best is already
1 - ``MARGIN`` or more (no rate could then gain it more than the margin).
The harder settings train each model at its best lr from the first
(Zoology sweeps every setting; on this CPU that would triple the claim's
cost), on as many tokens per model as the first (``mqar_steps`` x 64 /
sequence steps): each harder size costs about one run of the first.
Hyena runs twice: as the authors' HyenaModel (the zoo's default) and with
safari's associative-recall filter settings (``hyena-ar``).

Zoology's blocks are two sequence mixers with no MLP between them; the
zoo's TMM, Hyena and Transformer blocks always have one (their C++ configs
require ``ffn_mult`` >= 1, resp. an FFN width >= 1, and the suite's jobs
need the C++ models' checkpoints to resume), so here they keep the
smallest the zoo allows, ``ffn_mult`` 1 (d hidden units; the Transformer's
SwiGLU 2/3 of that, rounded up to a multiple of 8), which also cuts their
step time by a third; the zoo's Mamba2 (``d_intermediate`` 0) has none, as
in Zoology.

Verdict, on the first setting: TMM's best accuracy more than 0.05 above
Hyena's (the better of the two Hyenas; 0.05 or less is a tie: not
consistent); not tested when the Transformer's best stays below 0.9 (the
setting does not separate at this scale), or when TMM, the Transformer or
a Hyena did not run (unless TMM already fails against the other).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tmm.tables import markdown_table

from ..formatting import fmt_num
from . import lr_grid
from .models import ModelSpec, copy_models
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict, plot_curves
from .results import Pooled

NAME = "mqar"
TITLE = "Associative recall (MQAR): the project's own test, no claim of the paper"
STATEMENT = ("none on MQAR. The nearest claim, TMM better than Hyena on retrieval benchmarks (claim 3: SQuAD, "
             "LongBench), is not what this measures; the verdict below is on this project's question: does TMM "
             "recall better than Hyena?")
SEPARATES = 0.9  # the Transformer's best accuracy at which the setting separates
MARGIN = 0.05  # "better": by more than this
HYENAS = ("hyena", "hyena-ar")  # the authors' Hyena and safari's associative-recall settings
BRACKETING = (f"each model's grid grown past an edge where its best lay, at most {lr_grid.MAX_EXTENSIONS} times per "
              f"side, while its best was below {1 - MARGIN:g}")


SMALLEST_MLP = (("ffn_mult", 1),)  # the nearest the zoo's blocks come to Zoology's MLP-free ones


def models(s) -> list:
    base = copy_models(s.mqar_d, s.mqar_layers, names=("tmm", "transformer", "hyena", "mamba2"))
    ar = ModelSpec("hyena-ar", "hyena-assoc-recall", (("d_model", s.mqar_d), ("n_layers", s.mqar_layers)))
    return [dataclasses.replace(m, overrides=tuple(sorted(dict(m.overrides + SMALLEST_MLP).items())))
            if "ffn_mult" in m.config() else m for m in base + [ar]]


def task_options(s, setting) -> dict:
    k, seq_len = setting
    return {"num_kv_pairs": k, "seq_len": seq_len, "vocab": s.mqar_vocab, "random_non_queries": False}


def best_run(runs: dict) -> Optional[tuple]:
    """(best final accuracy, its lr) over one model's ``runs`` (lr -> ModelResult,
    or None where it did not run); None without one. A diverged run, or one
    without a final accuracy, never wins; of equal accuracies the lowest lr."""
    best = None
    for lr in sorted(runs):
        r = runs[lr]
        if r is None or r.status == "diverged" or r.final_acc is None:
            continue
        if best is None or r.final_acc > best[0]:
            best = (r.final_acc, lr)
    return best


def lr_to_grow_from(runs: dict) -> Optional[float]:
    """The lr of the best of ``runs``, for :func:`lr_grid.grow`; None (grow no
    further) where there is none, or where it is 1 - ``MARGIN`` or more."""
    best = best_run(runs)
    return None if best is None or best[0] >= 1 - MARGIN else best[1]


def steps_at(s, setting) -> int:
    """Steps at ``setting``: ``mqar_steps`` at the first, and the same tokens per model at the others
    (fewer steps of longer sequences), so that each size costs about one run of the first."""
    return max(1, s.mqar_steps * s.mqar_settings[0][1] // setting[1])


def _job(suite, name, setting, lr, specs):
    s = suite.scale
    return suite.compare(f"mqar/kv{setting[0]}-len{setting[1]}/{name}", specs, task="mqar",
                         task_options=task_options(s, setting), steps=steps_at(s, setting), seed=0, lr=lr,
                         batch_size=s.mqar_batch_size, eval_batches=s.mqar_eval_batches)


def _run(suite, setting, lr, spec):
    """One model alone at one lr (a grown sweep's point, a harder setting): its result, None where it did not run."""
    return (_job(suite, f"{spec.label}/lr{lr:g}", setting, lr, [spec]) or {}).get(spec.label)


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = models(s)
    first = s.mqar_settings[0]
    # the sweep: every model at every lr of the scale on the first setting (one job per lr) ...
    jobs = {lr: _job(suite, f"lr{lr:g}", first, lr, specs) for lr in s.mqar_lrs}
    grids = {first: {m.label: {lr: (jobs[lr] or {}).get(m.label) for lr in s.mqar_lrs} for m in specs}}
    for m in specs:  # ... grown past an edge where a model's best lies
        lr_grid.grow(grids[first][m.label], lr_to_grow_from, lambda lr, m=m: _run(suite, first, lr, m))
    middle = s.mqar_lrs[len(s.mqar_lrs) // 2]
    chosen = {m.label: (best_run(grids[first][m.label]) or (None, middle))[1] for m in specs}
    # ... then the harder settings, each model alone at its chosen lr
    for setting in s.mqar_settings[1:]:
        grids[setting] = {m.label: {chosen[m.label]: _run(suite, setting, chosen[m.label], m)} for m in specs}
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"The project's own associative-recall test (Zoology's MQAR; the paper makes no MQAR claim): vocabulary "
        f"{s.mqar_vocab} (keys from its lower half, values from its upper half), no random fillers, accuracy on "
        f"the value positions of {s.mqar_eval_batches * s.mqar_batch_size:,} held-out sequences; settings "
        "(key-value pairs, sequence) " + ", ".join(f"({k}, {n})" for k, n in s.mqar_settings)
        + f"; models d = {s.mqar_d}, {s.mqar_layers} layers (the zoo's smallest MLP, ffn_mult 1, after each mixer: "
        "its blocks have no MLP-free form; Mamba2 has none); "
        f"{s.mqar_steps:,} steps of batch {s.mqar_batch_size} on the first setting and the same tokens per model "
        f"on the others ({', '.join(f'{steps_at(s, x):,}' for x in s.mqar_settings[1:]) or '-'} steps), "
        f"seed 0; the first setting at every lr of "
        f"{', '.join(f'{x:g}' for x in s.mqar_lrs)} for every model (each model's best counts; {BRACKETING}), "
        "the others at each model's best lr there. "
        f"Chance {1 / (s.mqar_vocab - s.mqar_vocab // 2):.4f}."))
    if suite.dry_run:
        return c
    best = {setting: {label: b for label, runs in by_model.items() if (b := best_run(runs)) is not None}
            for setting, by_model in grids.items()}
    for setting, by_model in grids.items():
        c.tables.append((f"MQAR, {setting[0]} pairs, sequence {setting[1]}: final accuracy by lr ('-': not in "
                         f"that model's grid), and the best{f' ({BRACKETING})' if setting == first else ''}:",
                         sweep_table(specs, by_model, best[setting], bracketed=setting == first)))
    c.verdicts.append(verdict({k: v[0] for k, v in best[first].items()}, first))
    path = "mqar/mqar_accuracy.png"
    groups = {f"{k} pairs, sequence {n} (each model at its best lr)": at_best_lr(grids[(k, n)], best[(k, n)])
              for k, n in s.mqar_settings}
    if plot_curves(suite.root / path, groups, "eval_acc", "eval accuracy (value positions)",
                   chance=1 / (s.mqar_vocab - s.mqar_vocab // 2), x_keys=(("step", "training steps"),)):
        c.plots.append(path)
    return c


def sweep_table(specs, by_model, best, bracketed=False) -> str:
    """One row per model of ``by_model`` (label -> lr -> ModelResult or None); ``best``: label -> (acc, lr)."""
    lrs = sorted({lr for runs in by_model.values() for lr in runs})
    head = ["model", "params", *(f"lr {lr:g}" for lr in lrs), "best", "best lr"] + (["bracketed"] if bracketed else [])
    rows = []
    for spec in specs:
        runs, cells, params = by_model.get(spec.label, {}), [], "-"
        for lr in lrs:
            r = runs.get(lr)
            if r is not None:
                params = f"{r.params:,}"
            cells.append("-" if r is None else "diverged" if r.status == "diverged" else fmt_num(r.final_acc))
        acc, lr = best.get(spec.label, (None, None))
        row = [spec.label, params, *cells, fmt_num(acc), "-" if lr is None else f"{lr:g}"]
        if bracketed:
            row.append("-" if lr is None else "yes" if min(runs) < lr < max(runs)
                       else f"no (best {fmt_num(acc)} >= {1 - MARGIN:g})" if acc >= 1 - MARGIN else "no (at an edge)")
        rows.append(row)
    return markdown_table(head, rows, left=len(head))


def at_best_lr(by_model, best) -> dict:
    """label -> a Pooled of the one run at the label's best lr (for the plot)."""
    return {label: Pooled(label, by_model[label][lr].params, [by_model[label][lr]]) for label, (_, lr) in best.items()}


def verdict(best: dict, setting) -> Verdict:
    """The rule of the module docstring on ``best`` (label -> best accuracy over the sweep) at ``setting``."""
    claim = f"MQAR {setting[0]} pairs, sequence {setting[1]}: TMM recalls better than Hyena"
    acc = {k: best[k] for k in ("tmm", "transformer", *HYENAS, "mamba2") if best.get(k) is not None}
    ev = ", ".join(f"{k} {v:.3f}" for k, v in acc.items()) + " (each at its best lr)"
    missing = [k for k in ("tmm", "transformer") if k not in acc]
    if missing:
        return Verdict(claim, UNTESTED, ev + f" (not run: {', '.join(missing)})")
    if acc["transformer"] < SEPARATES:
        return Verdict(claim, UNTESTED,
                       ev + f" (the Transformer stays below {SEPARATES}: the setting does not separate)")
    hyenas = {k: acc.get(k) for k in HYENAS}
    if any(v is not None and acc["tmm"] <= v + MARGIN for v in hyenas.values()):
        return Verdict(claim, NOT_CONSISTENT, ev + f" (margin {MARGIN})")
    not_run = [k for k, v in hyenas.items() if v is None]
    if not_run:
        return Verdict(claim, UNTESTED, ev + f" (not run: {', '.join(not_run)})")
    return Verdict(claim, CONSISTENT, ev + f" (margin {MARGIN})")
