"""Claim 4, ablations: TMM variants that differ only in the mixer, on copy
and on language modelling, with the same seeds and batches.

Verdict rules (on the language model's final eval bits per byte, mean over
seeds; "better" / "worse" = more than 0.01 bpb lower / higher, so a
difference of 0.01 or less is a tie, and a tie is not consistent; not tested
when a variant the rule names did not run):

- More heads improve asymptotic convergence: strictly ordered, heads 16
  better than heads 4 and heads 4 better than heads 1.
- Kernel width beyond a point lowers efficiency: flat kernel 8 is worse
  than the better of flat kernels 1 and 4.
- Two Toeplitz layers with a nonlinearity between them (expanded) are less
  efficient than one: expanded is worse than heads 4 (its one-layer twin).

"Asymptotic" is judged by whether the comparison has settled, not the
loss: a rule is given only once its answer no longer changes with training.
Each rule has a margin (positive where it holds, e.g. heads 4 - 0.01 -
heads 16), read at every evaluation of the last quarter of the runs (the
same steps for every variant: they share the schedule, mean over seeds).
The rule has settled when the margin has one sign at all of them, and its
least-squares trend over that quarter, continued for as many steps again
as the run had, keeps that sign; otherwise it is not tested, with the
margins. (The loss itself never levels off here: measured at `default`, a
learning rate that decays to zero buys 2-6% in a run's last quarter at
every horizon from 300 to 1,500 steps, so a level-off rule on the loss
could never be met; see docs/experiments.md.)

The masked mixer (the predecessor) is reported, without a claim.
"""
from __future__ import annotations

from . import lm_claim
from .models import ablation_models
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict, mean_range, pooled_table, \
    plot_curves, steps_cell
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
        f"TMM variants at d = {s.copy_d}, {s.copy_layers} layers (the zoo's defaults otherwise; expanded with its "
        f"inner dropout 0.1): copy n = {n} ({s.ablation_steps} steps) and the LM task of claim 1 "
        f"({s.ablation_lm_steps} steps of batch {s.lm_batch_size}), lr {s.copy_lr:g}, seeds "
        f"{', '.join(map(str, s.seeds))}."))
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
    """(holds, detail): whether ``margin`` (label -> bpb dict -> float, > 0 where the rule holds) has settled
    over the last SETTLE_SHARE of the runs of ``labels`` in ``lm``; holds is None where it has not."""
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
    detail = (f"margin {m[0]:+.4f} at step {window[0]}, {m[-1]:+.4f} at step {window[-1]}; its trend, continued "
              f"{steps[-1]} steps, {ahead:+.4f}")
    holds = m[-1] > 0
    if any((v > 0) != holds for v in m) or (ahead > 0) != holds:
        return None, detail + ": not settled"
    return holds, detail


def verdicts(lm: dict) -> list:
    bpb = {k: p.mean("final_bpb") for k, p in lm.items()}

    def ev(*labels):
        return ", ".join(f"{k} {bpb[k]:.3f}" for k in labels if bpb.get(k) is not None) + f" (ties within {WORSE})"

    def judge(claim, labels, margin):
        if not all(bpb.get(k) is not None for k in labels):
            return Verdict(claim, UNTESTED, "not run: " + ", ".join(k for k in labels if bpb.get(k) is None))
        holds, detail = settled(lm, labels, margin)
        if holds is None:
            return Verdict(claim, UNTESTED, f"{ev(*labels)}; {detail}")
        return Verdict(claim, CONSISTENT if holds else NOT_CONSISTENT, f"{ev(*labels)}; {detail}")

    return [
        judge("more heads improve asymptotic convergence (LM)", ("heads1", "heads4", "heads16"),
              lambda b: min(b["heads4"] - WORSE - b["heads16"], b["heads1"] - WORSE - b["heads4"])),
        judge("kernel width beyond a point lowers efficiency (LM, flat)", ("flat-kernel1", "flat-kernel4",
                                                                           "flat-kernel8"),
              lambda b: b["flat-kernel8"] - min(b["flat-kernel1"], b["flat-kernel4"]) - WORSE),
        judge("two Toeplitz layers with a nonlinearity between (expanded) are less efficient than one (LM)",
              ("heads4", "expanded"), lambda b: b["expanded"] - b["heads4"] - WORSE),
    ]
