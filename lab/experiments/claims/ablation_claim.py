"""Claim 4, ablations: TMM variants that differ only in the mixer, on copy
and on language modelling, with the same seeds and batches (every variant
without dropout; the expanded mixer also with the authors' mixer dropout
0.1, reported without a verdict, since a dropout the others lack is a
second difference).

Verdict rules, on the language model's final eval bits per byte, each a
margin per paired seed that must clear its seed spread (the settle rule of
:mod:`.margins`); "better" / "worse" = by more than 0.01 bpb, so the
margins hold 0.01 (a tie is not consistent); not tested when a variant the
rule names did not run:

- More heads improve asymptotic convergence: strictly ordered, margin
  min(heads 4 - 0.01 - heads 16, heads 1 - 0.01 - heads 4).
- Kernel width beyond a point lowers efficiency: margin flat kernel 8 -
  0.01 - the better of flat kernels 1 and 4 (of that seed).
- Two Toeplitz layers with a nonlinearity between them (expanded) are less
  efficient than one: margin expanded - 0.01 - heads 4 (both without
  dropout).

"Asymptotic" also needs the answer to have stopped changing: the mean
margin over seeds, read at every evaluation of the last quarter of the runs
(the variants share the schedule), must keep one sign there, and its
least-squares trend over that quarter, continued for as many steps again as
the run had, must keep it too; otherwise the rule is unsettled whatever the
spread. (The loss itself never levels off here: a learning rate that decays
to a tenth buys a few percent in a run's last quarter at every horizon this
machine trains, so a rule on the loss levelling off could never be met.)

The masked mixer (the predecessor) is reported, without a claim.
"""
from __future__ import annotations

from . import lm_claim
from .margins import Margin, judged
from .models import ablation_models
from .report import UNSETTLED, UNTESTED, ClaimResult, Verdict, mean_range, plot_curves, pooled_table, steps_cell
from .results import over_seeds

NAME = "ablation"
TITLE = "Claim 4: ablations"
STATEMENT = ("more heads improve asymptotic convergence; kernel width beyond a point lowers efficiency; two "
             "Toeplitz layers with a nonlinearity between them are less efficient than one.")
WORSE = 0.01  # bits per byte: a difference of this or less is a tie


def run(suite) -> ClaimResult:
    s = suite.scale
    specs = ablation_models(s.copy_d, s.copy_layers)
    n = s.ablation_copy_n
    copy = over_seeds([suite.compare(f"ablation/copy-n{n}/seed{seed}", specs, task="copy",
                                     task_options={"n": n, "vocab": s.copy_vocab}, steps=s.ablation_steps, seed=seed,
                                     lr=s.copy_lr) for seed in s.seeds])
    lm = over_seeds([suite.compare(f"ablation/lm/seed{seed}", specs, task="lm", task_options=lm_claim.task_options(s),
                                   steps=s.ablation_lm_steps, seed=seed, lr=s.copy_lr, batch_size=s.lm_batch_size)
                     for seed in s.seeds])
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"TMM variants at d = {s.copy_d}, {s.copy_layers} layers (the zoo's defaults otherwise; no dropout in any "
        f"variant but `expanded-dropout0.1`, the authors' expanded mixer, reported without a verdict): copy n = {n} "
        f"({s.ablation_steps} steps) and the LM task of claim 1 ({s.ablation_lm_steps} steps of batch "
        f"{s.lm_batch_size}), lr {s.copy_lr:g}, seeds {', '.join(map(str, s.seeds))}."))
    if suite.dry_run:
        return c
    c.tables.append((f"Copy n = {n}:", pooled_table(copy, [
        ("final acc", lambda p: mean_range(p, "final_acc")), ("steps to 0.9", steps_cell),
        ("final eval loss", lambda p: mean_range(p, "final_eval_loss"))])))
    c.tables.append(("Language modelling:", pooled_table(lm, [
        ("final eval bpb", lambda p: mean_range(p, "final_bpb")),
        ("final eval loss", lambda p: mean_range(p, "final_eval_loss"))])))
    c.verdicts += verdicts(lm)
    path = "ablation/ablation.png"
    if plot_curves(suite.root / path, {f"copy n = {n}: accuracy": copy}, "eval_acc", "eval accuracy",
                   x_keys=(("step", "training steps"),)):
        c.plots.append(path)
    path = "ablation/ablation_lm.png"
    if plot_curves(suite.root / path, {"language modelling": lm}, "eval_bpb", "eval bits per byte",
                   x_keys=(("step", "training steps"),), focus=True):
        c.plots.append(path)
    return c


SETTLE_SHARE = 0.25  # the last share of a run's evaluations over which a rule must have settled
MIN_SETTLE_EVALS = 3  # fewer evaluations than this in that share: too few to tell


def curve(pooled) -> dict:
    """step -> mean eval bits per byte over the seeds of ``pooled`` (a Pooled) that evaluated at that step."""
    at = {}
    for run in pooled.runs:
        for row in run.rows:
            if row.get("eval_bpb") is not None:
                at.setdefault(row["step"], []).append(row["eval_bpb"])
    return {step: sum(v) / len(v) for step, v in at.items()}


def settled(lm: dict, labels, margin):
    """(holds, detail): whether ``margin`` (label -> bpb dict -> float, > 0 where the rule holds) of the mean
    curves has settled over the last SETTLE_SHARE of the runs of ``labels`` in ``lm``; holds is None where it
    has not."""
    curves = [curve(lm[k]) for k in labels]
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    if not steps:
        return None, "no common evaluations"
    window = [st for st in steps if st >= (1 - SETTLE_SHARE) * steps[-1]]
    if len(window) < MIN_SETTLE_EVALS:
        return None, f"{len(window)} evaluations in the last quarter of the run, fewer than {MIN_SETTLE_EVALS}"
    m = [margin({k: c[st] for k, c in zip(labels, curves)}) for st in window]
    mx = sum(window) / len(window)
    my = sum(m) / len(m)
    slope = sum((x - mx) * (y - my) for x, y in zip(window, m)) / sum((x - mx) ** 2 for x in window)
    ahead = m[-1] + slope * steps[-1]
    detail = (f"mean margin {m[0]:+.4f} at step {window[0]}, {m[-1]:+.4f} at step {window[-1]}; its trend, "
              f"continued {steps[-1]} steps, {ahead:+.4f}")
    holds = m[-1] > 0
    if any((v > 0) != holds for v in m) or (ahead > 0) != holds:
        return None, detail + ": not settled"
    return holds, detail


RULES = (
    ("more heads improve asymptotic convergence (LM)", ("heads1", "heads4", "heads16"),
     lambda b: min(b["heads4"] - WORSE - b["heads16"], b["heads1"] - WORSE - b["heads4"])),
    ("kernel width beyond a point lowers efficiency (LM, flat)", ("flat-kernel1", "flat-kernel4", "flat-kernel8"),
     lambda b: b["flat-kernel8"] - WORSE - min(b["flat-kernel1"], b["flat-kernel4"])),
    ("two Toeplitz layers with a nonlinearity between (expanded) are less efficient than one (LM; no dropout in "
     "either)", ("heads4", "expanded"), lambda b: b["expanded"] - WORSE - b["heads4"]),
)


def verdicts(lm: dict) -> list:
    out = []
    for claim, labels, margin in RULES:
        if not all(k in lm for k in labels):
            out.append(Verdict(claim, UNTESTED, "not run: " + ", ".join(k for k in labels if k not in lm)))
            continue
        ev = ", ".join(f"{k} {mean_range(lm[k], 'final_bpb')}" for k in labels) + f" (ties within {WORSE})"
        runs = [lm[k].by_seed() for k in labels]
        seeds = [seed for seed in runs[0] if all(seed in r and r[seed].final_bpb is not None for r in runs)]
        m = Margin({seed: margin({k: r[seed].final_bpb for k, r in zip(labels, runs)}) for seed in seeds})
        holds, detail = settled(lm, labels, margin)
        verdict = m.verdict if holds is not None else UNSETTLED
        out.append(judged(claim, verdict, m, f"{ev}; {detail}"))
    return out
