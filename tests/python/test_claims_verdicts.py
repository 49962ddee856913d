"""Every verdict rule of the claims suite (lab.experiments.claims) on results
made up for the test: the settle rule (a margin per paired seed against
twice its standard error) from both sides of its threshold, each rule's
margin and tolerance, ties, and rivals that did not run. The rules
themselves are in each claim module's docstring."""
import json
import math

import pytest

import tmm.models
from lab.experiments.claims import (ablation_claim, copy_claim, copy_width, lm_claim, lr_grid, mqar_claim,
                                    retention_claim)
from lab.experiments.claims import operator_index_claim as oi_claim
from lab.experiments.claims.margins import SPREAD, Margin, combine, paired
from lab.experiments.claims.operator_index_claim import Source
from lab.experiments.claims.report import CONSISTENT, NOT_CONSISTENT, UNSETTLED, UNTESTED, seeds_ran
from lab.experiments.claims.results import ModelResult, Pooled, read_compare_job, speed_share, value_at
from tmm.train import flops_per_token

C, N, S, U = CONSISTENT, NOT_CONSISTENT, UNSETTLED, UNTESTED
EPS = 1e-6
SE3 = SPREAD / math.sqrt(3)  # twice the standard error of three values x - a, x, x + a, per unit of a


def around(x, a=0.01):
    """Three per-seed values with mean x and 2 SE = SE3 * a."""
    return [x - a, x, x + a]


def pooled(label, finals, steps=None, bpb=None, seeds=None):
    """A Pooled of one run per seed: final accuracies, steps to 0.9 (None: not reached), final bits per byte.
    Each run evaluates at steps 10, 20, ..., 300 (accuracy 0.9 from its steps to 0.9 on, else its final)."""
    steps = steps or [None] * len(finals)
    runs = []
    for i, (acc, st) in enumerate(zip(finals, steps)):
        rows = [{"step": k, "tokens": 100 * k, "flops_est": 1e6 * k,
                 "eval_acc": (max(acc, 0.9) if st is not None and k >= st else min(acc, 0.1)) if k < 300 else acc,
                 "eval_loss": 1.0, **({"eval_bpb": bpb[i]} if bpb else {})} for k in range(10, 301, 10)]
        runs.append(ModelResult(label, 100, "done", acc, 1.0, st, rows, seed=(seeds or range(len(finals)))[i]))
    return Pooled(label, 100, runs)


# -- the settle rule ---------------------------------------------------------------------------------------

def test_a_margin_settles_only_clear_of_twice_its_standard_error():
    assert SPREAD == 2.0
    a = 0.01
    assert Margin(dict(enumerate(around(SE3 * a + EPS, a)))).verdict == C
    assert Margin(dict(enumerate(around(SE3 * a - EPS, a)))).verdict == S
    assert Margin(dict(enumerate(around(-SE3 * a + EPS, a)))).verdict == S
    assert Margin(dict(enumerate(around(-SE3 * a - EPS, a)))).verdict == N
    assert Margin({0: 0.5}).verdict == S  # one seed: no spread to compare with
    assert Margin({}).verdict == U
    assert Margin({0: 0.1, 1: 0.1}).verdict == C  # no spread: any positive margin is clear of it
    # exactly on the boundary with no spread: a strict rule ("more often") fails, an inclusive one holds
    assert Margin({0: 0.0, 1: 0.0}).verdict == N
    assert Margin({0: 0.0, 1: 0.0}, strict=False).verdict == C


def test_the_margin_text_gives_mean_and_spread_and_what_would_settle_it():
    m = Margin(dict(enumerate(around(0.005, 0.01))))
    text = m.text()
    assert "margin +0.0050 bpb" in text and f"2 SE {SE3 * 0.01:.4f} over 3 paired seeds" in text
    need = m.seeds_to_settle()  # sd 0.01: 2 * 0.01 / sqrt(n) < 0.005 from n = 17 on
    assert need == 16 and "about 16 seeds" in text
    assert Margin(dict(enumerate(around(0.005, 0.01 * math.sqrt(16 / 3) * 0.999)))).verdict == S
    assert "one seed" in Margin({0: 0.1}).text()


def test_margins_pair_runs_by_seed_not_by_position():
    a = pooled("tmm", [1.0, 0.5], seeds=[0, 1])
    b = pooled("transformer", [0.6, 1.0, 0.2], seeds=[1, 2, 0])
    m = paired(a, b, lambda x, y: x.final_acc - y.final_acc)
    assert m.values == {0: pytest.approx(0.8), 1: pytest.approx(-0.1)}  # seed 2 ran on one side only


def test_combine_rivals():
    good, bad, open_ = Margin({0: 0.1, 1: 0.1}), Margin({0: -0.1, 1: -0.2}), Margin({0: 0.1, 1: -0.1})
    assert combine({"a": good, "b": good}) == (C, "a")
    assert combine({"a": good, "b": bad, "c": open_}) == (N, "b")  # one contradicting rival is enough
    assert combine({"a": good, "b": open_}) == (S, "b")
    assert combine({"a": good, "b": None}) == (U, None)  # a rival did not run
    assert combine({"a": bad, "b": None}) == (N, "a")  # ... unless one that ran contradicts it
    assert combine({}) == (U, None)


# -- copy --------------------------------------------------------------------------------------------------

def efficiency(a, b):
    return copy_width.efficiency(a, b, "tmm", "transformer", 0.9)[0]


def test_copy_efficiency_ratio_threshold():
    ref = pooled("transformer", [1.0] * 3, [100, 100, 100])
    assert copy_claim.RATIO == 1.5
    assert efficiency(pooled("tmm", [1.0] * 3, [150, 150, 150]), ref) == C  # 1.5x exactly: within 1.5x
    assert efficiency(pooled("tmm", [1.0] * 3, [140, 150, 160]), ref) == S  # around 1.5x: on the threshold
    assert efficiency(pooled("tmm", [1.0] * 3, [100, 100, 100]), ref) == C  # a tie matches
    assert efficiency(pooled("tmm", [1.0] * 3, [160, 170, 180]), ref) == N
    assert efficiency(pooled("tmm", [1.0] * 3, [120, 130, 140]), ref) == C  # margin 0.035 against 2 SE 0.022
    assert efficiency(pooled("tmm", [1.0] * 3, [100, 130, 160]), ref) == S  # margin 0.040 against 2 SE 0.067


def test_copy_speeds_compare_through_a_share_in_which_a_run_that_never_learned_has_speed_0():
    never, fast, slow = (pooled("x", [a], [s]).runs[0] for a, s in ((0.1, None), (1.0, 40), (1.0, 60)))
    assert speed_share(fast, fast, 0.9) == 0.5 and speed_share(slow, fast, 0.9) == pytest.approx(0.4)
    assert speed_share(fast, never, 0.9) == 1.0 and speed_share(never, fast, 0.9) == 0.0
    assert speed_share(never, never, 0.9) is None
    both, none = ([1.0, 1.0], [100, 100]), ([0.1, 0.1], [None, None])
    assert efficiency(pooled("tmm", *both), pooled("transformer", *none)) == C  # learned where the other never did
    assert efficiency(pooled("tmm", *none), pooled("transformer", *both)) == N
    assert efficiency(pooled("tmm", *none), pooled("transformer", *none)) == U  # neither learned
    assert efficiency(None, pooled("transformer", *both)) == U


def copy_verdicts(models):
    out = copy_claim.verdicts(models, 256)
    return {v.claim.split(": ", 1)[1].split(" (")[0]: v.verdict for v in out}


STRUGGLE = "Mamba2 and Hyena struggle"
FROZEN = "frozen Toeplitz vectors make copying fail"
TMM = pooled("tmm", [1.0] * 3, [100] * 3)
AT_CHANCE = {k: pooled(k, [0.03, 0.031, 0.032]) for k in ("hyena", "hyena-ar", "mamba2")}


def test_copy_struggle_margin_is_the_accuracy_gap_less_0_1():
    assert copy_claim.STRUGGLE_ACC == 0.1 and copy_claim.STRUGGLE_STEPS == 2.0
    assert copy_verdicts({"tmm": TMM, **AT_CHANCE})[STRUGGLE] == C

    def with_mamba(accs, steps=None):
        return copy_verdicts({"tmm": TMM, **AT_CHANCE, "mamba2": pooled("mamba2", accs, steps)})[STRUGGLE]
    assert with_mamba(around(0.9 - SE3 * 0.01 - EPS)) == C
    assert with_mamba(around(0.9 - SE3 * 0.01 + EPS)) == S
    assert with_mamba(around(0.9 + SE3 * 0.01 + EPS)) == N
    # a rival that learns in every seed struggles when clearly slower than 2x TMM's steps
    assert with_mamba([1.0] * 3, [250, 250, 250]) == C
    assert with_mamba([1.0] * 3, [200, 200, 200]) == N  # 2x exactly: not slower, and no accuracy gap
    assert with_mamba([1.0] * 3, [120, 120, 120]) == N


def test_copy_struggle_needs_every_rival_and_a_learning_tmm():
    quick = pooled("mamba2", [1.0] * 3, [120] * 3)
    assert copy_verdicts({"tmm": TMM, "hyena": AT_CHANCE["hyena"], "mamba2": AT_CHANCE["mamba2"]})[STRUGGLE] == U
    assert copy_verdicts({"tmm": TMM, "mamba2": quick})[STRUGGLE] == N  # the one that ran does not struggle
    assert copy_verdicts({"tmm": pooled("tmm", [0.9 - EPS] * 3), **AT_CHANCE})[STRUGGLE] == U  # TMM did not learn
    assert STRUGGLE not in copy_verdicts({"tmm": TMM})  # no rival at all: no such statement


def test_copy_frozen_rule():
    def frozen(flat, heads, learner=TMM):
        models = {"tmm": learner} if learner else {}
        if flat is not None:
            models["tmm-frozen-flat"] = pooled("tmm-frozen-flat", flat)
        if heads is not None:
            models["tmm-frozen"] = pooled("tmm-frozen", heads)
        return copy_verdicts(models).get(FROZEN)
    assert copy_claim.FAIL_ACC == 0.5
    assert frozen(around(0.5 - SE3 * 0.01 - EPS), [0.2] * 3) == C
    assert frozen(around(0.5 - SE3 * 0.01 + EPS), [0.2] * 3) == S
    assert frozen([0.2] * 3, [0.6] * 3) == N
    assert frozen([0.2] * 3, None) == U  # the 4-head frozen TMM did not run
    assert frozen([0.1] * 3, [0.1] * 3, learner=pooled("tmm", [0.3] * 3)) == U  # the trained TMM did not learn
    assert frozen(None, None) is None


def curves(label, *runs):
    """A Pooled of one run per seed, each given as its evaluations' accuracies at steps 10, 20, ..."""
    out = []
    for seed, accs in enumerate(runs):
        rows = [{"step": 10 * (i + 1), "tokens": 100, "flops_est": 1e6, "eval_acc": a, "eval_loss": 1.0}
                for i, a in enumerate(accs)]
        out.append(ModelResult(label, 100, "done", accs[-1], 1.0, None, rows, seed=seed))
    return Pooled(label, 100, out)


def width(narrow, wide):
    return copy_width.verdict(narrow, wide, 32, "tmm-flat-d4", "hyena-d128").verdict


def test_copy_width_pair_steps_to_a_common_accuracy():
    assert copy_width.RATIO == 1.5 and copy_width.THRESHOLDS == (0.9, 0.5)
    wide = curves("hyena-d128", [0.3, 0.9], [0.3, 0.9])  # 0.5 and 0.9 at step 20
    assert width(curves("tmm-flat-d4", [0.9], [0.1, 0.9]), wide) == C  # 10 and 20 steps: ratios 0.5 and 1
    assert width(curves("tmm-flat-d4", *[[0.1, 0.2, 0.3, 0.9]] * 2), wide) == N  # 2x
    assert width(curves("tmm-flat-d4", *[[0.1, 0.2, 0.9]] * 2), wide) == C  # 1.5x exactly: within 1.5x
    # 0.9 reached by neither: 0.5 decides
    assert width(curves("tmm-flat-d4", *[[0.5, 0.6]] * 2), curves("hyena-d128", *[[0.2, 0.6]] * 2)) == C
    assert width(curves("tmm-flat-d4", *[[0.2, 0.2, 0.2, 0.5]] * 2), curves("hyena-d128", *[[0.2, 0.6]] * 2)) == N
    # the narrow TMM learns, Hyena never does: its steps count as one evaluation past its end
    assert width(curves("tmm-flat-d4", *[[0.1, 0.9]] * 2), curves("hyena-d128", *[[0.1] * 3] * 2)) == C
    assert width(curves("tmm-flat-d4", [0.5 - EPS]), curves("hyena-d128", [0.2])) == U  # neither reached 0.5
    assert width(curves("tmm-flat-d4", [0.9]), None) == U


def test_copy_best_lr_and_sweep_growth():
    slow, fast = curves("m", [0.1, 0.9]), curves("m", [0.9])
    half = curves("m", [0.6, 0.6])
    diverged = curves("m", [0.9])
    diverged.runs[0].status = "diverged"
    r = lambda p: p.runs[0]  # noqa: E731
    assert copy_width.best_lr({1e-3: r(slow), 3e-3: r(fast), 1e-2: r(half)}) == 3e-3
    assert copy_width.best_lr({1e-3: r(half), 1e-2: r(slow)}) == 1e-2  # 0.9 beats 0.5
    assert copy_width.best_lr({1e-3: r(half), 3e-3: r(diverged)}) == 1e-3
    assert copy_width.best_lr({1e-3: None}) is None
    # the fastest at the top edge: the grid grows
    assert lr_grid.past_edge([1e-3, 3e-3, 1e-2], copy_width.best_lr({1e-3: r(half), 3e-3: r(slow), 1e-2: r(fast)}),
                             {"low": 0, "high": 0}) == 3e-2


# -- language modelling ------------------------------------------------------------------------------------

def lm(label, finals):
    """A Pooled of one run per seed ending at the given final bits per byte."""
    runs = [ModelResult(label, 100, "done", 0.0, b, None, [{"step": 0, "tokens": 0, "flops_est": 0.0, "eval_bpb": 9.0},
                                                             {"step": 10, "tokens": 1, "flops_est": 1e12,
                                                              "eval_bpb": b}], seed=seed)
            for seed, b in enumerate(finals)]
    return Pooled(label, 100, runs)


RIVALS = {k: [1.5, 1.6, 1.7] for k in lm_claim.BASELINES}
T = lm_claim.TOLERANCE_BPB


def lm_verdicts(matched, half=None):
    out = lm_claim.verdicts({k: lm(k, v) for k, v in matched.items()}, {k: lm(k, v) for k, v in (half or {}).items()})
    return [v.verdict for v in out]


def test_lm_equal_or_lower_at_matched_compute_per_paired_seed():
    assert T == 0.02 and lm_claim.BASELINES == ("transformer", "transformer-window", "hyena", "mamba2")
    rival = [1.5, 1.6, 1.7]
    # margins rival + 0.02 - tmm: constant 0.02 - x with no spread decides on its sign
    assert lm_verdicts({"tmm": [b + T - EPS for b in rival], **RIVALS})[0] == C
    assert lm_verdicts({"tmm": [b + T + EPS for b in rival], **RIVALS})[0] == N
    # the seed spread: margins 0.02 - (x - a, x, x + a)
    a = 0.01
    assert lm_verdicts({"tmm": [b + T - SE3 * a - EPS + d for b, d in zip(rival, (-a, 0, a))], **RIVALS})[0] == C
    assert lm_verdicts({"tmm": [b + T - SE3 * a + EPS + d for b, d in zip(rival, (-a, 0, a))], **RIVALS})[0] == S
    # one baseline is enough to contradict it, the windowed Transformer included
    assert lm_verdicts({"tmm": [1.4] * 3, **RIVALS, "transformer-window": [1.3] * 3})[0] == N


def test_lm_converges_faster_is_strict_and_reads_the_half_budget_runs():
    rival = [1.8, 1.9, 2.0]
    half = {"hyena": rival, "mamba2": rival}
    assert lm_verdicts(RIVALS, {"tmm": rival, **half})[1] == N  # a tie is not faster
    assert lm_verdicts(RIVALS, {"tmm": [b - T + EPS for b in rival], **half})[1] == N
    assert lm_verdicts(RIVALS, {"tmm": [b - T - EPS for b in rival], **half})[1] == C
    # the matched runs take no part in it, nor does the Transformer
    assert lm_verdicts({**RIVALS, "tmm": [9.0] * 3}, {"tmm": [1.0] * 3, **half, "transformer": [0.5] * 3})[1] == C


def test_lm_missing_rivals_runs_and_the_extension():
    without = {k: v for k, v in RIVALS.items() if k != "mamba2"}
    assert lm_verdicts({"tmm": [1.0] * 3, **without}) == [U, U]  # wins against those that ran; no half runs
    assert lm_verdicts({"tmm": [2.0] * 3, **without})[0] == N  # loses to one that ran
    assert lm_verdicts(RIVALS) == [U, U]  # no TMM
    assert lm_verdicts({"tmm": [1.0] * 3, **RIVALS, lm_claim.EXTENSION: [0.5] * 3})[0] == C  # the extension: no part


def test_lm_budget_gives_each_model_a_full_schedule_ending_at_tmms_flops(tmp_path):
    from lab.experiments.claims.scales import scale
    from lab.experiments.claims.suite import Suite
    s = scale("small")
    suite = Suite(tmp_path, s, dry_run=True)
    full = lm_claim.budget(suite)
    for spec in lm_claim.models(s):
        steps = lm_claim.steps_for(suite, spec, full)
        per_step = suite.flops_per_token(spec, "lm", lm_claim.task_options(s)) * s.lm_batch_size * s.lm_seq_len
        assert abs(steps * per_step - full) <= per_step / 2, spec.label
        if spec.label == "tmm":
            assert steps == s.lm_steps
    assert lm_claim.matched_path(suite, "tmm") == f"lm/steps{s.lm_steps}/tmm/seed0"


def test_value_at_interpolates_between_evaluations():
    rows = [{"flops_est": 0.0, "eval_bpb": 8.0}, {"flops_est": 10.0, "eval_bpb": 4.0},
            {"flops_est": 20.0, "eval_bpb": 2.0}]
    assert value_at(rows, "flops_est", "eval_bpb", 5.0) == 6.0
    assert value_at(rows, "flops_est", "eval_bpb", 20.0) == 2.0
    assert value_at(rows, "flops_est", "eval_bpb", 25.0) is None


def test_a_table_caption_counts_the_seeds_that_ran():
    both = {"tmm": pooled("tmm", [1.0, 1.0]), "hyena": pooled("hyena", [0.1, 0.1])}
    assert seeds_ran(both, 2) == "2 seeds"
    one = {"tmm": pooled("tmm", [1.0]), "hyena": pooled("hyena", [0.1])}  # e.g. --any-machine left seed 0
    assert seeds_ran(one, 2) == "1 of 2 seeds"


def sweep_run(loss, status="done"):
    return ModelResult("tmm", 1, status, None, loss, None, [])


def test_lm_best_lr_skips_diverged_runs():
    assert lm_claim.best_lr({1e-3: sweep_run(2.0), 3e-3: sweep_run(1.5), 1e-2: sweep_run(0.1, "diverged")}) == 3e-3
    assert lm_claim.best_lr({1e-3: None, 3e-3: sweep_run(0.1, "diverged")}) is None


def test_a_sweep_grows_until_its_best_is_inside_or_it_has_grown_three_times():
    assert lr_grid.LR_STEP == 3.0 and lr_grid.MAX_EXTENSIONS == 3
    trained = []

    def train(loss_at):
        def run(lr):
            trained.append(lr)
            return sweep_run(loss_at(lr))
        return run

    runs = {1e-3: sweep_run(2.0), 3e-3: sweep_run(1.5)}  # best at the top: 9e-3, then 2.7e-2 brackets it
    lr_grid.grow(runs, lm_claim.best_lr, train(lambda lr: {9e-3: 1.2}.get(lr, 1.9)))
    assert trained == [9e-3, 2.7e-2] and lm_claim.best_lr(runs) == 9e-3
    trained.clear()
    runs = {1e-3: sweep_run(2.0), 3e-3: sweep_run(1.5)}  # better and better: stops after three
    lr_grid.grow(runs, lm_claim.best_lr, train(lambda lr: 1.0 - lr))
    assert trained == [9e-3, 2.7e-2, 8.1e-2]
    trained.clear()
    bottom = {1e-3: sweep_run(1.0), 3e-3: sweep_run(1.5)}
    assert lr_grid.past_edge(bottom, lm_claim.best_lr(bottom), {"low": 0, "high": 0}) == pytest.approx(3.33e-4)
    assert lr_grid.past_edge(bottom, lm_claim.best_lr(bottom), {"low": 3, "high": 0}) is None
    one = {3e-3: sweep_run(1.5)}  # one lr is no sweep: nothing grows
    lr_grid.grow(one, lm_claim.best_lr, train(lambda lr: 1.0))
    assert trained == [] and list(one) == [3e-3]


def test_a_job_is_read_with_the_current_flops_estimate_and_its_seed(tmp_path):
    # a job logged with another estimate (here 0): the verdicts see the current formula's FLOPs
    model = tmm.models.build("mamba2-tiny")
    cfg, params = model.config, model.num_parameters()
    (tmp_path / "config.json").write_text(json.dumps({"task": {"seq_len": 64}, "args": {"seed": 2}, "models": [
        {"label": "mamba2", "config_name": "mamba2", "params": params, "config": cfg}]}))
    (tmp_path / "summary.json").write_text(json.dumps({"runs": [
        {"config": "mamba2", "params": params, "status": "done", "final_acc": 0.5, "final_eval_loss": 1.0,
         "steps_to_learned": None}]}))
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"config": "mamba2", "step": s, "tokens": 512 * s, "flops_est": 0.0, "eval_loss": 1.0}) + "\n"
        for s in (0, 10)))
    run = read_compare_job(tmp_path)["mamba2"]
    assert [r["flops_est"] for r in run.rows] == [0.0, flops_per_token(cfg, params, 64) * 5120]
    assert run.seed == 2


# -- MQAR (the project's own test) --------------------------------------------------------------------------

def mqar(**acc):
    """{shape: verdict} for label -> per-seed accuracies (a number: every seed)."""
    models = {k.replace("_", "-"): pooled(k.replace("_", "-"), v if isinstance(v, list) else [v] * 3)
              for k, v in acc.items()}
    return {v.claim.split("(")[1].split(")")[0]: v.verdict for v in mqar_claim.verdicts(models, (4, 64))}


SHAPES = {"tmm": 0.25, "tmm_mixer_first": 0.25, "tmm_4_layers": 0.25}


def test_mqar_separates_only_when_the_transformer_learns():
    assert mqar_claim.SEPARATES == 0.9 and mqar_claim.MARGIN == 0.05
    assert mqar(**{**SHAPES, "tmm": 0.9}, transformer=0.9, hyena=0.1, hyena_ar=0.1)["tmm"] == C
    assert mqar(**{**SHAPES, "tmm": 0.9}, transformer=0.9 - EPS, hyena=0.1, hyena_ar=0.1)["tmm"] == U
    assert set(mqar(**SHAPES, transformer=0.5, hyena=0.9, hyena_ar=0.9).values()) == {U}


def test_mqar_margin_per_shape_against_the_better_hyena_of_each_seed():
    base = {"transformer": 1.0, "hyena": [0.25, 0.5, 0.25], "hyena_ar": [0.5, 0.25, 0.5]}  # the better: 0.5
    got = mqar(tmm=0.5, tmm_mixer_first=0.6, tmm_4_layers=0.4, **base)
    assert got == {"tmm": N, "tmm-mixer-first": C, "tmm-4-layers": N}  # margins -0.05, +0.05, -0.15 (no spread)
    assert mqar(**{**SHAPES, "tmm": around(0.55 + SE3 * 0.01 + EPS)}, **base)["tmm"] == C
    assert mqar(**{**SHAPES, "tmm": around(0.55 + SE3 * 0.01 - EPS)}, **base)["tmm"] == S
    assert mqar(**{**SHAPES, "tmm": 0.9}, **base, mamba2=1.0)["tmm"] == C  # Mamba2 takes no part


def test_mqar_missing_runs():
    assert set(mqar(transformer=1.0, hyena=0.1, hyena_ar=0.1).values()) == {U}  # no TMM
    assert set(mqar(**SHAPES, hyena=0.1, hyena_ar=0.1).values()) == {U}  # no Transformer
    assert mqar(**SHAPES, transformer=1.0, hyena=0.1)["tmm"] == U  # hyena-ar did not run


def test_mqar_floor_and_each_model_at_its_best_lr():
    assert mqar_claim.floor((4, 64)) == 0.25 and mqar_claim.floor((16, 256)) == 0.0625

    def acc(a, status="done"):
        return ModelResult("tmm", 1, status, a, 1.0, None, [])
    assert mqar_claim.best_run({1e-3: acc(0.3), 3e-3: acc(0.6), 1e-2: None}) == (0.6, 3e-3)
    assert mqar_claim.best_run({1e-3: acc(0.95), 3e-3: acc(0.99, "diverged")}) == (0.95, 1e-3)
    assert mqar_claim.best_run({3e-3: acc(0.5), 1e-3: acc(0.5)}) == (0.5, 1e-3)  # a tie: the lowest lr
    # the grid grows from the best unless it is within the margin of 1, or the grid is flat (within the margin)
    top = {3e-4: acc(0.2), 1e-3: acc(0.25), 3e-3: acc(0.45)}
    assert mqar_claim.lr_to_grow_from(top) == 3e-3
    assert mqar_claim.lr_to_grow_from({**top, 3e-3: acc(0.95)}) is None
    assert mqar_claim.lr_to_grow_from({3e-4: acc(0.24), 1e-3: acc(0.25), 3e-3: acc(0.29 - EPS)}) is None  # flat
    assert mqar_claim.lr_to_grow_from({3e-4: acc(0.24), 1e-3: acc(0.25), 3e-3: acc(0.29 + EPS)}) == 3e-3
    assert mqar_claim.lr_to_grow_from({1e-3: None}) is None


def test_mqar_shapes_are_the_zoos_tmm_with_its_mixer_first_and_with_4_layers_at_about_its_parameters():
    from lab.experiments.claims.scales import SCALES
    s = SCALES["default"]
    specs = {m.label: m.config() for m in mqar_claim.models(s)}
    assert specs["tmm-mixer-first"] == {**specs["tmm"], "block_order": "mixer_first"}
    four = specs["tmm-4-layers"]
    assert four["n_layers"] == 2 * specs["tmm"]["n_layers"] and four["block_order" if False else "ffn_mult"] == 1

    def params(cfg):
        return tmm.models.build({**cfg, "vocab_size": s.mqar_vocab, "max_len": 64}).num_parameters()
    assert abs(params(four) / params(specs["tmm"]) - 1) < 0.05


def test_mqar_task_is_zoologys():
    from lab.experiments.claims.scales import SCALES
    import torch
    import tmm.tasks
    s = SCALES["default"]
    assert s.mqar_vocab >= 256 and s.mqar_settings[0] == (4, 64)
    assert s.mqar_eval_batches * s.mqar_batch_size >= 1000 and len(s.mqar_lrs) >= 3
    task = tmm.tasks.make("mqar", **mqar_claim.task_options(s, (4, 64)))
    ids, labels = task.batch(64, torch.Generator().manual_seed(0))
    half = s.mqar_vocab // 2
    keys, values = ids[:, 0:8:2], ids[:, 1:8:2]
    assert ((keys >= 1) & (keys < half)).all() and ((values >= half) & (values < s.mqar_vocab)).all()
    scored = labels != -100
    assert (scored.sum(1) == 4).all() and not scored[:, :8].any()  # each key queried once, after the pairs
    assert ((labels[scored] >= half)).all()  # scored only on values
    queries = ids[:, 8:]
    assert ((queries == 0) | ((queries >= 1) & (queries < half))).all()  # no random fillers: zeros and keys
    assert ((queries > 0).sum(1) == 4).all()


# -- retention (bits recovered) ----------------------------------------------------------------------------

def retention(mode="extraction", **bits):
    """{rival: verdict} for arch -> per-seed bits recovered (a number: every seed)."""
    rows = [{"mode": mode, "arch": a, "seed": seed, "bits_recovered": b}
            for a, v in bits.items() for seed, b in enumerate(v if isinstance(v, list) else [v] * 3)]
    return {v.claim.split(" than ")[1].split("'")[0]: v.verdict for v in retention_claim.verdicts(rows, "h", mode)}


M = retention_claim.MARGIN_BITS
EXTRACTION = {"transformer": 40.0, "hyena": 30.0, "mamba2": 30.0, "none": 20.0}


def test_retention_is_judged_against_each_rival_separately():
    assert M == 1.0 and retention_claim.RIVALS["capacity"] == ("hyena", "mamba2")
    assert retention(tmm=35.0, **EXTRACTION) == {"transformer": N, "hyena": C, "mamba2": C}
    assert retention(tmm=around(41.0 + SE3 * 0.5 + EPS, 0.5), **EXTRACTION)["transformer"] == C
    assert retention(tmm=around(41.0 + SE3 * 0.5 - EPS, 0.5), **EXTRACTION)["transformer"] == S
    assert retention(tmm=41.0 - EPS, **EXTRACTION)["transformer"] == N  # within 1 bit: a tie
    assert retention("capacity", tmm=20.0, transformer=60.0, hyena=10.0, mamba2=8.0, none=0.0) == \
        {"hyena": C, "mamba2": C}  # the Transformer is no rival in capacity


def test_retention_needs_information_above_the_zero_vector():
    flat = {a: 20.0 for a in ("tmm", "transformer", "hyena", "mamba2", "none")}
    assert set(retention(**flat).values()) == {U}
    assert set(retention(**{**flat, "transformer": 20.0 + M}).values()) == {U}  # 1 bit above: no information
    assert retention(**{**flat, "transformer": 20.0 + M + EPS})["transformer"] == N  # TMM now trails
    assert retention(**{**flat, "tmm": 25.0}) == {"transformer": C, "hyena": C, "mamba2": C}
    # on random tokens the zero state's optimum is 0 bits: a baseline decoder short of it does not lower the bar
    low = {"hyena": -1.0, "mamba2": -1.0, "none": -2.0}
    assert set(retention("capacity", tmm=1.0 - EPS, **low).values()) == {U}  # 3 bits above the measured -2
    assert set(retention("capacity", tmm=1.0 + EPS, **low).values()) == {C}


def test_retention_missing_runs():
    assert retention(tmm=50.0, **{k: v for k, v in EXTRACTION.items() if k != "mamba2"})["mamba2"] == U
    assert set(retention(tmm=50.0, **{k: v for k, v in EXTRACTION.items() if k != "none"}).values()) == {U}
    assert set(retention(**EXTRACTION).values()) == {U}  # no TMM
    assert retention(tmm=[50.0, 50.0], **EXTRACTION)["hyena"] == C  # the seeds both ran


def test_bits_recovered_is_zero_for_a_uniform_guess_and_log2_v_per_token():
    from lab.experiments.retention_model import bits_recovered
    assert bits_recovered([math.log(16)] * 32, 16) == pytest.approx(0.0, abs=1e-12)
    assert bits_recovered([0.0] + [math.log(16)] * 31, 16) == pytest.approx(4.0)  # one token recovered exactly
    assert bits_recovered([math.log(32)] * 2, 16) == pytest.approx(-2.0)  # worse than uniform: negative


# -- ablation ----------------------------------------------------------------------------------------------

W = ablation_claim.WORSE


def ablation_run(label, bpb, evals=17, seeds=(0, 1, 2)):
    """A Pooled of one LM run per seed with ``evals`` evaluations (steps 10, 20, ...) at ``bpb`` bits per byte:
    one number (every evaluation and seed), one list per evaluation (every seed), or a dict seed -> either."""
    runs = []
    for seed in seeds:
        b = bpb[seed] if isinstance(bpb, dict) else bpb
        b = b if isinstance(b, list) else [b] * evals
        rows = [{"step": 10 * (i + 1), "tokens": 100, "flops_est": 1e6, "eval_acc": 0.0, "eval_loss": 1.0,
                 "eval_bpb": x} for i, x in enumerate(b)]
        runs.append(ModelResult(label, 100, "done", 0.0, 1.0, None, rows, seed=seed))
    return Pooled(label, 100, runs)


def ablation(**bpb):
    """(heads, kernel width, expanded) verdicts for label -> bits per byte (see ablation_run)."""
    lm_ = {k.replace("_", "-"): ablation_run(k.replace("_", "-"), v) for k, v in bpb.items()}
    return tuple(v.verdict for v in ablation_claim.verdicts(lm_))


def expanded_verdict(heads4, expanded):
    lm_ = {"heads4": ablation_run("heads4", heads4), "expanded": ablation_run("expanded", expanded)}
    return ablation_claim.verdicts(lm_)[2]


def test_ablation_is_judged_once_its_margin_has_settled_not_the_loss():
    assert ablation_claim.SETTLE_SHARE == 0.25
    falling = [3.0 * 0.98 ** i for i in range(20)]  # never levels off: 2% per evaluation to the end
    assert expanded_verdict(falling, [x + 0.02 for x in falling]).verdict == C
    assert expanded_verdict(falling, [x + 0.005 for x in falling]).verdict == N
    # the margin changes sign inside the last quarter: unsettled, however small the seed spread
    flips = [x + (0.02 if i < 17 else 0.0) for i, x in enumerate(falling)]
    v = expanded_verdict(falling, flips)
    assert v.verdict == S and "not settled" in v.evidence
    # the same sign throughout, but closing fast enough that a run twice as long would flip it
    closing = [x + 0.05 - 0.002 * i for i, x in enumerate(falling)]
    assert expanded_verdict(falling, closing).verdict == S
    slow = [x + 0.05 - 0.0001 * i for i, x in enumerate(falling)]
    assert expanded_verdict(falling, slow).verdict == C
    assert expanded_verdict([2.0, 2.0], [2.1, 2.1]).verdict == S  # too few evaluations in the last quarter


def test_ablation_margins_must_clear_the_seed_spread():
    a = 0.01
    spread = {seed: 2.0 + W + SE3 * a + d for seed, d in enumerate((-a, 0.0, a))}
    assert ablation(heads4=2.0, expanded={k: v + EPS for k, v in spread.items()})[2] == C
    v = ablation_claim.verdicts({"heads4": ablation_run("heads4", 2.0), "expanded": ablation_run(
        "expanded", {k: v - EPS for k, v in spread.items()})})[2]
    assert v.verdict == S and "would settle at about" in v.evidence


def test_ablation_heads_need_strict_ordering_and_kernel_width():
    assert W == 0.01
    assert ablation(heads1=2.0, heads4=1.98, heads16=1.96)[0] == C
    assert ablation(heads1=2.0, heads4=2.0, heads16=2.0)[0] == N  # a three-way tie
    assert ablation(heads1=2.0, heads4=1.99 + EPS, heads16=1.98)[0] == N  # heads 4 within 0.01 of heads 1
    assert ablation(heads1=1.9, heads4=2.0, heads16=2.1)[0] == N  # reversed
    assert ablation(heads1=2.0, heads4=1.9)[0] == U  # heads 16 did not run

    def kernel(k8):
        return ablation(flat_kernel1=2.0, flat_kernel4=2.05, flat_kernel8=k8)[1]
    assert kernel(2.01 + EPS) == C  # worse than the better of kernels 1 and 4 (2.0)
    assert kernel(2.01 - EPS) == N
    assert ablation(flat_kernel1=2.0, flat_kernel8=3.0)[1] == U
    assert ablation(heads4=2.0, expanded=2.0)[2] == N
    assert ablation(expanded=3.0)[2] == U


def test_ablation_compares_the_expanded_mixer_at_the_others_dropout():
    from lab.experiments.claims.models import ablation_models
    cfg = {m.label: m.config() for m in ablation_models(64, 2)}
    assert cfg["expanded"]["mixer_dropout"] == 0.0 and cfg["expanded-dropout0.1"]["mixer_dropout"] == 0.1
    assert all(c.get("dropout", 0.0) == 0.0 for c in cfg.values())


# -- operator index ----------------------------------------------------------------------------------------

MOVED = oi_claim.MOVED


def oi(*sources, taps=32):
    return oi_claim.verdict([Source(*s) for s in sources], taps).verdict


def seeds(kind, good, total=10, moved=0.5, taps=32):
    """One Source per seed 0, 1, 2 of ``kind`` with ``good`` (a number or one per seed) vectors of index -1 or 0."""
    good = good if isinstance(good, list) else [good] * 3
    return [(f"{kind}-{s}", kind, g, total, moved, taps, s) for s, g in enumerate(good)]


def test_operator_index_compares_shares_per_seed():
    assert MOVED == 0.1
    auto = seeds("autoencoder", 2)  # 20% in every seed
    assert oi(*seeds("causal", 3), *auto) == C
    assert oi(*seeds("causal", 2), *auto) == N  # a tie, with no spread
    assert oi(*seeds("causal", [1, 3, 5]), *auto) == S  # +10% against 2 SE 23%
    assert oi(*seeds("causal", [4, 3, 5]), *auto) == C
    # vectors of another length take no part; untrained models neither
    assert oi(*seeds("causal", 0), *auto, *seeds("causal", 9, taps=256)) == N
    assert oi(*seeds("causal", 3), *auto, ("x (untrained)", "untrained", 0, 10, None, 32, 0)) == C


def test_operator_index_not_tested_unless_the_vectors_moved():
    auto = seeds("autoencoder", 0)
    assert oi(*seeds("causal", 9, moved=MOVED), *auto) == U  # 0.1 is not above 0.1
    assert oi(*seeds("causal", 9, moved=MOVED + EPS), *auto) == C
    assert oi(*seeds("causal", 9), *seeds("autoencoder", 0, moved=MOVED)) == U
    assert oi(*seeds("causal", 9, moved=None), *auto) == U  # initial vectors not saved: movement unknown
    verdict = oi_claim.verdict([Source(*s) for s in seeds("causal", 0, moved=0.01) + auto], 32)
    assert "causal-0 (0.010)" in verdict.evidence and "no trained causal model" in verdict.evidence


def test_operator_index_missing_models():
    assert oi() == U
    assert oi(*seeds("causal", 9)) == U  # no autoencoder
    assert oi(*seeds("autoencoder", 0)) == U  # no causal model
    assert oi(*seeds("causal", 0, total=0), *seeds("autoencoder", 0)) == U  # no reliable index
