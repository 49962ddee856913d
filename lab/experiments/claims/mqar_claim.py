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

TMM runs in three shapes, since a claim about what its structure cannot do
needs the shapes that could refute it: the zoo's (FFN first, so nothing
nonlinear acts after the second mixer), ``block_order: mixer_first`` (a
mixer, an MLP, a mixer, an MLP: a nonlinear read-out after the mixing), and
4 layers at d 48 (about the same parameters). Each shape and both Hyenas
(the models of the verdicts' margins) train the other ``mqar_seeds`` at their
chosen rate on the first setting.

Every table gives the floor 1/pairs beside chance: a model that knows which
values occur in the sequence and guesses among them scores 1/pairs.

Verdict, per TMM shape, on the first setting: TMM recalls better than Hyena,
margin TMM's accuracy - the better Hyena's (of the same seed) - 0.05 per
paired seed, by the settle rule of :mod:`.margins`; not tested when the
Transformer's mean accuracy at its rate stays below 0.9 (the setting does not
separate at this scale), or when that TMM or a Hyena did not run.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tmm.tables import markdown_table

from ..formatting import fmt_num
from . import lr_grid
from .margins import Margin, judged
from .models import ModelSpec, copy_models
from .report import UNTESTED, ClaimResult, Verdict, mean_range, plot_curves, pooled_table, seeds_ran
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
              f"side, while its best was below {1 - MARGIN:g} and more than {MARGIN:g} above its worst")


SMALLEST_MLP = (("ffn_mult", 1),)  # the nearest the zoo's blocks come to Zoology's MLP-free ones
# TMM's shapes: label -> overrides of the zoo's TMM at (mqar_d, mqar_layers) (d and layers: factors of them)
TMM_SHAPES = {"tmm": {}, "tmm-mixer-first": {"block_order": "mixer_first"},
              "tmm-4-layers": {"layers_x": 2, "d_x": 0.75}}
SEEDED = (*TMM_SHAPES, *HYENAS)  # the models of the verdicts' margins: every seed of mqar_seeds


def models(s) -> list:
    base = copy_models(s.mqar_d, s.mqar_layers, names=("tmm", "transformer", "hyena", "mamba2"))
    ar = ModelSpec("hyena-ar", "hyena-assoc-recall", (("d_model", s.mqar_d), ("n_layers", s.mqar_layers)))
    tmm = base[0]
    shapes = []
    for label, shape in TMM_SHAPES.items():
        if label == "tmm":
            continue
        extra = {k: v for k, v in shape.items() if k not in ("layers_x", "d_x")}
        d = int(s.mqar_d * shape.get("d_x", 1))
        extra.update(d_model=d - d % 4, n_layers=s.mqar_layers * shape.get("layers_x", 1))
        shapes.append(ModelSpec(label, tmm.base, tuple(sorted({**dict(tmm.overrides), **extra}.items()))))
    return [dataclasses.replace(m, overrides=tuple(sorted(dict(m.overrides + SMALLEST_MLP).items())))
            if "ffn_mult" in m.config() else m for m in [tmm, *shapes, *base[1:], ar]]


def floor(setting) -> float:
    """1/pairs: the accuracy of guessing among the values that occur in the sequence."""
    return 1 / setting[0]


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
    further) where there is none, where it is 1 - ``MARGIN`` or more, or where
    the grid is flat: every accuracy within ``MARGIN`` of the best (no rate
    of it learns more than another, so there is no optimum to bracket)."""
    best = best_run(runs)
    if best is None or best[0] >= 1 - MARGIN:
        return None
    accs = [r.final_acc for r in runs.values() if r is not None and r.status != "diverged" and r.final_acc is not None]
    return None if best[0] - min(accs) <= MARGIN else best[1]


def steps_at(s, setting) -> int:
    """Steps at ``setting``: ``mqar_steps`` at the first, and the same tokens per model at the others
    (fewer steps of longer sequences), so that each size costs about one run of the first."""
    return max(1, s.mqar_steps * s.mqar_settings[0][1] // setting[1])


def _job_options(s, setting) -> dict:
    return dict(task="mqar", task_options=task_options(s, setting), steps=steps_at(s, setting),
                batch_size=s.mqar_batch_size, eval_batches=s.mqar_eval_batches)


def prefix(setting) -> str:
    return f"mqar/kv{setting[0]}-len{setting[1]}"


def _chosen_lr(runs: dict) -> Optional[float]:
    best = best_run(runs)
    return None if best is None else best[1]


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = models(s)
    first = s.mqar_settings[0]
    # the sweep on the first setting, each model's grid grown past an edge, the verdicts' models on more seeds
    grids, chosen, seeded = lr_grid.sweep(suite, prefix(first), specs, s.mqar_lrs, s.mqar_seeds, choose=_chosen_lr,
                                          grow_from=lr_to_grow_from, seeded=SEEDED, **_job_options(s, first))
    grids = {first: grids}
    # ... then the harder settings, each model alone at its chosen lr, seed 0
    for setting in s.mqar_settings[1:]:
        grids[setting] = {m.label: {chosen[m.label]: (suite.compare(
            f"{prefix(setting)}/{m.label}/lr{chosen[m.label]:g}", [m], seed=0, lr=chosen[m.label],
            **_job_options(s, setting)) or {}).get(m.label)} for m in specs}
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"The project's own associative-recall test (Zoology's MQAR; the paper makes no MQAR claim): vocabulary "
        f"{s.mqar_vocab} (keys from its lower half, values from its upper half), no random fillers, accuracy on "
        f"the value positions of {s.mqar_eval_batches * s.mqar_batch_size:,} held-out sequences; settings "
        "(key-value pairs, sequence) " + ", ".join(f"({k}, {n})" for k, n in s.mqar_settings)
        + f"; models d = {s.mqar_d}, {s.mqar_layers} layers (the zoo's smallest MLP, ffn_mult 1, in every block: "
        "its blocks have no MLP-free form; Mamba2 has none), TMM also with its mixer first and with "
        f"{2 * s.mqar_layers} layers at d = {int(0.75 * s.mqar_d) - int(0.75 * s.mqar_d) % 4} (about its "
        f"parameters); {s.mqar_steps:,} steps of batch {s.mqar_batch_size} on the first setting"
        + (f" and the same tokens per model on the others "
           f"({', '.join(f'{steps_at(s, x):,}' for x in s.mqar_settings[1:])}"
           " steps, seed 0, each model at its rate on the first)" if s.mqar_settings[1:] else "")
        + f"; the first setting at every lr of {', '.join(f'{x:g}' for x in s.mqar_lrs)} for every model on "
        f"seed 0 (each model's best counts; {BRACKETING}), then the TMMs and both Hyenas at "
        f"their best on seeds {', '.join(map(str, s.mqar_seeds))}. "
        f"Chance {1 / (s.mqar_vocab - s.mqar_vocab // 2):.4f}; the floor 1/pairs "
        + ", ".join(f"{floor(x):.4g}" for x in s.mqar_settings) + "."))
    if suite.dry_run:
        return c
    best = {setting: {label: b for label, runs in by_model.items() if (b := best_run(runs)) is not None}
            for setting, by_model in grids.items()}
    for setting, by_model in grids.items():
        c.tables.append((f"MQAR, {setting[0]} pairs, sequence {setting[1]} (floor 1/pairs {floor(setting):.4g}): "
                         f"final accuracy by lr ('-': not in that model's grid), and the best"
                         f"{f' ({BRACKETING})' if setting == first else ' (seed 0)'}:",
                         sweep_table(specs, by_model, best[setting], bracketed=setting == first)))
    c.tables.append((f"MQAR, {first[0]} pairs, sequence {first[1]}, at each model's best lr (mean [range] over "
                     f"{seeds_ran(seeded, len(s.mqar_seeds))}; floor {floor(first):.4g}):", pooled_table(
                         {k: p for k, p in seeded.items() if k in SEEDED},
                         [("lr", lambda p: f"{chosen[p.label]:g}"), ("final acc", lambda p: mean_range(p, "final_acc")),
                          ("seeds", lambda p: str(len(p.runs)))])))
    c.verdicts += verdicts(seeded, first)
    path = "mqar/mqar_accuracy.png"
    groups = {f"{k} pairs, sequence {n} (each model at its best lr{', seed 0' if (k, n) != first else ''})":
              (seeded if (k, n) == first else at_best_lr(grids[(k, n)], best[(k, n)])) for k, n in s.mqar_settings}
    floors = {title: floor(x) for title, x in zip(groups, s.mqar_settings)}
    if plot_curves(suite.root / path, groups, "eval_acc", "eval accuracy (value positions)",
                   chance=1 / (s.mqar_vocab - s.mqar_vocab // 2), floors=floors, x_keys=(("step", "training steps"),)):
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


def verdicts(pooled: dict, setting) -> list:
    """The rule of the module docstring, per TMM shape, on ``pooled`` (label -> Pooled at its best lr)."""
    acc = {k: p.mean("final_acc") for k, p in pooled.items() if p.mean("final_acc") is not None}
    ev = ", ".join(f"{k} {mean_range(pooled[k], 'final_acc')}" for k in pooled if k in acc) + \
        f" (each at its best lr; floor 1/pairs {floor(setting):.4g})"
    out = []
    for shape in TMM_SHAPES:
        claim = f"MQAR {setting[0]} pairs, sequence {setting[1]}: TMM ({shape}) recalls better than Hyena"
        missing = [k for k in (shape, "transformer", *HYENAS) if k not in acc]
        if missing:
            out.append(Verdict(claim, UNTESTED, ev + f" (not run: {', '.join(missing)})"))
        elif acc["transformer"] < SEPARATES:
            out.append(Verdict(claim, UNTESTED,
                               ev + f" (the Transformer stays below {SEPARATES}: the setting does not separate)"))
        else:
            mine, hyenas = pooled[shape].by_seed(), [pooled[k].by_seed() for k in HYENAS]
            m = Margin({seed: r.final_acc - max(h[seed].final_acc for h in hyenas) - MARGIN
                        for seed, r in mine.items() if r.final_acc is not None
                        and all(seed in h and h[seed].final_acc is not None for h in hyenas)}, unit="acc", digits=3)
            out.append(judged(claim, m.verdict, m, ev + f" (margin: TMM - the better Hyena - {MARGIN})"))
    return out
