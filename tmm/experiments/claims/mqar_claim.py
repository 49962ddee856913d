"""Associative recall (Zoology's MQAR), a proxy for the retrieval side of
claim 3 (the paper: TMM beats Hyena on retrieval and in-context benchmarks).

The first setting of the scale is sized for the Transformer: a learning-rate
sweep of the Transformer alone picks the rate of its best final accuracy;
the setting separates the architectures only if that reaches 0.9. Then all
architectures train at that rate on that setting and on the harder ones
(seed 0). Hyena runs twice: as the authors' HyenaModel (the zoo's default)
and with safari's associative-recall filter settings (``hyena-ar``).

Verdict: TMM's final accuracy more than 0.05 above Hyena's (the better of
the two Hyenas) at the sized setting (0.05 or less is a tie: not
consistent); not tested when the Transformer does not reach 0.9 there (the
task does not separate at this scale), or when TMM, the Transformer or
a Hyena did not run (unless TMM already fails against the other).
"""
from __future__ import annotations

from .models import ModelSpec, copy_models
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict, mean_range, pooled_table, \
    plot_curves
from .results import over_seeds

NAME = "mqar"
TITLE = "Associative recall (MQAR): retrieval, claim 3's proxy"
STATEMENT = "TMM is better than Hyena on retrieval and in-context learning benchmarks (SQuAD, LongBench, IFEval)."
SEPARATES = 0.9  # the Transformer's accuracy at which the setting separates
MARGIN = 0.05  # "better": by more than this
HYENAS = ("hyena", "hyena-ar")  # the authors' Hyena and safari's associative-recall settings


def _models(s):
    base = copy_models(s.mqar_d, s.mqar_layers, names=("tmm", "transformer", "hyena", "mamba2"))
    ar = ModelSpec("hyena-ar", "hyena-assoc-recall", (("d_model", s.mqar_d), ("n_layers", s.mqar_layers)))
    return base + [ar]


def _opts(s, setting):
    k, seq_len = setting
    return {"num_kv_pairs": k, "seq_len": seq_len, "vocab": s.mqar_vocab}


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = _models(s)
    transformer = [m for m in specs if m.label == "transformer"]
    first = s.mqar_settings[0]
    sizing = {lr: suite.compare(f"mqar/sizing/lr{lr:g}", transformer, task="mqar", task_options=_opts(s, first),
                                steps=s.mqar_steps, seed=0, lr=lr) for lr in s.mqar_lrs}
    scored = [(job["transformer"].final_acc or 0, lr) for lr, job in sizing.items() if job]
    lr = max(scored)[1] if scored else s.mqar_lrs[len(s.mqar_lrs) // 2]
    runs = {setting: over_seeds([suite.compare(f"mqar/kv{setting[0]}-len{setting[1]}", specs, task="mqar",
                                               task_options=_opts(s, setting), steps=s.mqar_steps, seed=0, lr=lr)])
            for setting in s.mqar_settings}
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"MQAR, vocabulary {s.mqar_vocab}, settings (key-value pairs, sequence) "
        + ", ".join(f"({k}, {n})" for k, n in s.mqar_settings)
        + f"; models d = {s.mqar_d}, {s.mqar_layers} layers; {s.mqar_steps} steps of batch {s.batch_size}, seed 0; "
        f"lr sized on the Transformer from {', '.join(f'{x:g}' for x in s.mqar_lrs)}."))
    if suite.dry_run:
        return c
    c.tables.append(("Sizing (Transformer, first setting): final accuracy by lr: "
                     + ", ".join(f"{x:g}: {acc:.3f}" for acc, x in sorted(scored, key=lambda t: t[1])),
                     f"chosen lr {lr:g}"))
    cols = [("final acc", lambda p: mean_range(p, "final_acc")),
            ("final eval loss", lambda p: mean_range(p, "final_eval_loss"))]
    for (k, n), pooled in runs.items():
        c.tables.append((f"MQAR, {k} pairs, sequence {n}:", pooled_table(pooled, cols)))
    c.verdicts.append(verdict(runs[first], first))
    path = "mqar/mqar_accuracy.png"
    if plot_curves(suite.root / path, {f"{k} pairs, sequence {n}": p for (k, n), p in runs.items()}, "eval_acc",
                   "eval accuracy", x_keys=(("step", "training steps"),)):
        c.plots.append(path)
    return c


def verdict(pooled, setting) -> Verdict:
    claim = f"MQAR {setting[0]} pairs, sequence {setting[1]}: TMM recalls better than Hyena"
    acc = {k: pooled[k].mean("final_acc") for k in ("tmm", "transformer", *HYENAS, "mamba2") if k in pooled}
    acc = {k: v for k, v in acc.items() if v is not None}
    ev = ", ".join(f"{k} {v:.3f}" for k, v in acc.items())
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
