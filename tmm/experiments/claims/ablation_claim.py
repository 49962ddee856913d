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

"Asymptotic" is judged only where it has been reached: a rule is not
tested while any variant it names has an LM run whose held-out loss has
not levelled off by its last evaluation (:class:`tmm.experiments.levelling.LevelOff`
over its evaluations, as the retention decoders use it: an EMA of the
loss improving by less than 0.5% over 5 evaluations, no decision in the
first 20% of the run, which holds its learning-rate warm-up).

The masked mixer (the predecessor) is reported, without a claim.
"""
from __future__ import annotations

from ..levelling import LevelOff
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


WARMUP_SHARE = 0.2  # no level-off decision in this first share of a run's steps


def levelled(run) -> bool:
    """Has the held-out loss of ``run`` (a ModelResult) levelled off by its last evaluation?"""
    rows = run.rows
    if not rows:
        return False
    detector = LevelOff(min_step=int(WARMUP_SHARE * rows[-1]["step"]))
    return any(detector.update(r["eval_loss"], r["step"]) for r in rows)


def verdicts(lm: dict) -> list:
    bpb = {k: p.mean("final_bpb") for k, p in lm.items()}

    def ev(*labels):
        return ", ".join(f"{k} {bpb[k]:.3f}" for k in labels if bpb.get(k) is not None) + f" (ties within {WORSE})"

    def judge(claim, labels, holds):
        if not all(bpb.get(k) is not None for k in labels):
            return Verdict(claim, UNTESTED, "not run: " + ", ".join(k for k in labels if bpb.get(k) is None))
        still = [k for k in labels if not all(levelled(r) for r in lm[k].runs)]
        if still:
            return Verdict(claim, UNTESTED, ev(*labels) + "; loss not levelled off by the end of the run: "
                           + ", ".join(still))
        return Verdict(claim, CONSISTENT if holds() else NOT_CONSISTENT, ev(*labels))

    return [
        judge("more heads improve asymptotic convergence (LM)", ("heads1", "heads4", "heads16"),
              lambda: bpb["heads16"] < bpb["heads4"] - WORSE and bpb["heads4"] < bpb["heads1"] - WORSE),
        judge("kernel width beyond a point lowers efficiency (LM, flat)", ("flat-kernel1", "flat-kernel4",
                                                                           "flat-kernel8"),
              lambda: bpb["flat-kernel8"] > min(bpb["flat-kernel1"], bpb["flat-kernel4"]) + WORSE),
        judge("two Toeplitz layers with a nonlinearity between (expanded) are less efficient than one (LM)",
              ("heads4", "expanded"), lambda: bpb["expanded"] > bpb["heads4"] + WORSE),
    ]
