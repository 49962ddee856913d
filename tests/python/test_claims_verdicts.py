"""Every verdict rule of the claims suite (lab.experiments.claims) on results
made up for the test: each threshold approached from both sides (EPS inside
and outside, and exactly where the values are exact), ties, and rivals that
did not run. The rules themselves are in each claim module's docstring."""
import json

import pytest

import tmm.models
from lab.experiments.claims import (ablation_claim, copy_claim, copy_width, lm_claim, lr_grid, mqar_claim,
                                    retention_claim)
from lab.experiments.claims import operator_index_claim as oi_claim
from lab.experiments.claims.operator_index_claim import Source
from lab.experiments.claims.report import CONSISTENT, NOT_CONSISTENT, UNTESTED, seeds_ran
from lab.experiments.claims.results import ModelResult, Pooled, read_compare_job, value_at
from tmm.train import flops_per_token

C, N, U = CONSISTENT, NOT_CONSISTENT, UNTESTED
EPS = 1e-6


def pooled(label, finals, steps=None, bpb=None):
    """A Pooled of one run per seed: final accuracies, steps to 0.9 (None: not reached), final bits per byte."""
    steps = steps or [None] * len(finals)
    runs = []
    for i, (acc, st) in enumerate(zip(finals, steps)):
        rows = [{"step": 10, "tokens": 100, "flops_est": 1e6, "eval_acc": acc, "eval_loss": 1.0,
                 **({"eval_bpb": bpb[i]} if bpb else {})}]
        runs.append(ModelResult(label, 100, "done", acc, 1.0, st, rows))
    return Pooled(label, 100, runs)


# -- copy --------------------------------------------------------------------------------------------------

def efficiency(a, b, n_seeds=2):
    return copy_claim.efficiency(a, b, n_seeds, "tmm", "transformer")[0]


def test_copy_efficiency_ratio_threshold():
    ref = pooled("transformer", [1.0, 1.0], [100, 100])
    assert copy_claim.RATIO == 1.5
    assert efficiency(pooled("tmm", [1.0, 1.0], [140, 160]), ref) == C  # 1.5 exactly: "within"
    assert efficiency(pooled("tmm", [1.0, 1.0], [150, 150 + 2 * 100 * EPS]), ref) == N
    assert efficiency(pooled("tmm", [1.0, 1.0], [100, 100]), ref) == C  # a tie matches
    assert efficiency(pooled("tmm", [1.0, 1.0], [50, 50]), ref) == C


def test_copy_efficiency_seeds_learned_and_missing_rivals():
    both, one, none = ([1.0, 1.0], [100, 100]), ([1.0, 0.1], [100, None]), ([0.1, 0.1], [None, None])
    assert efficiency(pooled("tmm", *both), pooled("transformer", *one)) == C  # more seeds learned
    assert efficiency(pooled("tmm", *one), pooled("transformer", *both)) == N  # fewer
    assert efficiency(pooled("tmm", *one), pooled("transformer", *none)) == C  # learned where the other never did
    assert efficiency(pooled("tmm", *none), pooled("transformer", *one)) == N
    assert efficiency(pooled("tmm", *one), pooled("transformer", [1.0, 0.1], [50, None])) == N  # as many: ratio 2
    assert efficiency(pooled("tmm", *none), pooled("transformer", *none)) == U
    assert efficiency(None, pooled("transformer", *both)) == U
    assert efficiency(pooled("tmm", *both), None) == U


def copy_verdicts(models, n_seeds=1):
    out = copy_claim.verdicts(models, 256, n_seeds)
    return {v.claim.split(": ", 1)[1].split(" (")[0]: v.verdict for v in out}


STRUGGLE = "Mamba2 and Hyena struggle"
FROZEN = "frozen Toeplitz vectors make copying fail"


def test_copy_struggle_thresholds():
    tmm = pooled("tmm", [1.0], [100])
    hyena = pooled("hyena", [0.03], [None])  # at chance: struggles

    def with_mamba(acc, steps):
        return copy_verdicts({"tmm": tmm, "hyena": hyena, "mamba2": pooled("mamba2", [acc], [steps])})[STRUGGLE]
    assert copy_claim.STRUGGLE_STEPS == 2.0 and copy_claim.STRUGGLE_ACC == 0.1
    assert with_mamba(1.0, 200) == N  # 2x TMM's steps exactly is not "more than 2x"
    assert with_mamba(1.0, 201) == C
    assert with_mamba(1.0, 100) == N  # a tie with TMM
    assert with_mamba(0.9 - EPS, 150) == C  # ends 0.1 below TMM
    assert with_mamba(0.9 + EPS, 150) == N


def test_copy_struggle_needs_every_rival_and_a_learning_tmm():
    tmm, hyena = pooled("tmm", [1.0], [100]), pooled("hyena", [0.03], [None])
    quick = pooled("mamba2", [1.0], [120])
    assert copy_verdicts({"tmm": tmm, "hyena": hyena})[STRUGGLE] == U  # mamba2 did not run
    assert copy_verdicts({"tmm": tmm, "mamba2": quick})[STRUGGLE] == N  # the one that ran does not struggle
    assert copy_verdicts({"tmm": pooled("tmm", [0.9 - EPS], [None]), "hyena": hyena,
                          "mamba2": pooled("mamba2", [0.03], [None])})[STRUGGLE] == U  # TMM did not learn
    assert copy_verdicts({"hyena": hyena, "mamba2": quick})[STRUGGLE] == U  # TMM did not run
    assert STRUGGLE not in copy_verdicts({"tmm": tmm})  # no rival at all: no such statement


def test_copy_frozen_rule():
    tmm = pooled("tmm", [1.0], [100])

    def frozen(flat, heads, learner=tmm):
        models = {"tmm": learner} if learner else {}
        if flat is not None:
            models["tmm-frozen-flat"] = pooled("tmm-frozen-flat", [flat])
        if heads is not None:
            models["tmm-frozen"] = pooled("tmm-frozen", [heads])
        return copy_verdicts(models).get(FROZEN)
    assert copy_claim.FAIL_ACC == 0.5
    assert frozen(0.5 - EPS, 0.2) == C
    assert frozen(0.5, 0.2) == N  # 0.5 is not below 0.5
    assert frozen(0.2, None) == U  # the 4-head frozen TMM did not run
    assert frozen(None, 0.6) == N
    assert frozen(0.1, 0.1, learner=pooled("tmm", [0.3])) == U  # the trained TMM did not learn either
    assert frozen(0.1, 0.1, learner=None) == U
    assert frozen(None, None) is None


def curves(label, *runs):
    """A Pooled of one run per seed, each given as its evaluations' accuracies at steps 10, 20, ..."""
    out = []
    for accs in runs:
        rows = [{"step": 10 * (i + 1), "tokens": 100, "flops_est": 1e6, "eval_acc": a, "eval_loss": 1.0}
                for i, a in enumerate(accs)]
        out.append(ModelResult(label, 100, "done", accs[-1], 1.0, None, rows))
    return Pooled(label, 100, out)


def width(narrow, wide):
    return copy_width.verdict(narrow, wide, 32, "tmm-flat-d4", "hyena-d128").verdict


def test_copy_width_pair_steps_to_a_common_accuracy():
    assert copy_width.RATIO == 1.5 and copy_width.THRESHOLDS == (0.9, 0.5)
    wide = curves("hyena-d128", [0.3, 0.9])  # 0.5 and 0.9 at step 20
    assert width(curves("tmm-flat-d4", [0.1, 0.2, 0.9]), wide) == C  # 30 steps: 1.5x exactly
    assert width(curves("tmm-flat-d4", [0.1, 0.2, 0.3, 0.9]), wide) == N  # 2x
    assert width(curves("tmm-flat-d4", [0.9 - EPS, 0.9 - EPS, 0.9 - EPS, 0.9]), wide) == N  # 0.9 decides, not 0.5
    # 0.9 reached by neither: 0.5 decides
    assert width(curves("tmm-flat-d4", [0.2, 0.5, 0.6]), curves("hyena-d128", [0.2, 0.6])) == C
    assert width(curves("tmm-flat-d4", [0.2, 0.2, 0.2, 0.5]), curves("hyena-d128", [0.2, 0.6])) == N
    # reached in more (fewer) seeds decides whatever the steps
    assert width(curves("tmm-flat-d4", [0.1, 0.1, 0.9], [0.1, 0.1, 0.9]),
                 curves("hyena-d128", [0.9], [0.2, 0.2])) == C
    assert width(curves("tmm-flat-d4", [0.9], [0.2]), curves("hyena-d128", [0.9], [0.9])) == N
    assert width(curves("tmm-flat-d4", [0.5 - EPS]), curves("hyena-d128", [0.2])) == U  # neither reached 0.5
    assert width(curves("tmm-flat-d4", [0.9]), None) == U


def test_copy_width_best_lr():
    slow, fast = curves("tmm-flat-d4", [0.1, 0.9]), curves("tmm-flat-d4", [0.9])
    half = curves("tmm-flat-d4", [0.6, 0.6])
    diverged = curves("tmm-flat-d4", [0.9])
    diverged.runs[0].status = "diverged"
    job = lambda p: {p.label: p.runs[0]}  # noqa: E731
    assert copy_width.best_lrs({1e-3: job(slow), 3e-3: job(fast), 1e-2: job(half)}) == {"tmm-flat-d4": 3e-3}
    assert copy_width.best_lrs({1e-3: job(half), 1e-2: job(slow)}) == {"tmm-flat-d4": 1e-2}  # 0.9 beats 0.5
    assert copy_width.best_lrs({1e-3: job(half), 3e-3: job(diverged)}) == {"tmm-flat-d4": 1e-3}


# -- language modelling ------------------------------------------------------------------------------------

F = 1e12  # every long run's total estimated FLOPs unless said otherwise


def lm_run(label, at_half, at_end, total=F):
    """Rows at 0, total / 2 and total FLOPs (bits per byte 4.0, at_half, at_end)."""
    rows = [{"step": s, "tokens": s * 100, "flops_est": total * s / 2, "eval_bpb": b, "eval_loss": b, "eval_acc": 0}
            for s, b in ((0, 4.0), (1, at_half), (2, at_end))]
    return Pooled(label, 100, [ModelResult(label, 100, "done", 0.0, at_end, None, rows)])


def lm_verdicts(**models):
    """{"equal" | "faster": verdict} for label -> (bpb at half, bpb at the end); "extension": tmm+final-norm."""
    labels = {k: lm_claim.EXTENSION if k == "extension" else k for k in models}
    out = lm_claim.verdicts({labels[k]: lm_run(labels[k], *v) for k, v in models.items()})
    return dict(zip(("equal", "faster"), (v.verdict for v in out)))


RIVALS = {"transformer": (2.0, 1.5), "hyena": (2.0, 1.5), "mamba2": (2.0, 1.5)}
T = lm_claim.TOLERANCE_BPB


def test_lm_equal_or_lower_at_matched_compute():
    assert T == 0.02
    assert lm_verdicts(tmm=(2.5, 1.5), **RIVALS)["equal"] == C  # a tie is "equal"
    assert lm_verdicts(tmm=(2.5, 1.5 + T - EPS), **RIVALS)["equal"] == C
    assert lm_verdicts(tmm=(2.5, 1.5 + T + EPS), **RIVALS)["equal"] == N
    assert lm_verdicts(tmm=(2.5, 1.4), **{**RIVALS, "transformer": (2.0, 1.3)})["equal"] == N  # one baseline is enough


def test_lm_converges_faster_is_strict():
    assert lm_verdicts(tmm=(2.0, 1.5), **RIVALS)["faster"] == N  # a tie is not faster
    assert lm_verdicts(tmm=(2.0 - T + EPS, 1.5), **RIVALS)["faster"] == N  # within the tolerance: a tie
    assert lm_verdicts(tmm=(2.0 - T - EPS, 1.5), **RIVALS)["faster"] == C
    # the Transformer is not a linear-complexity baseline: it takes no part in "faster"
    assert lm_verdicts(tmm=(1.9, 1.5), **{**RIVALS, "transformer": (1.0, 1.0)})["faster"] == C


def test_lm_missing_rivals_and_runs():
    without = {k: v for k, v in RIVALS.items() if k != "mamba2"}
    assert lm_verdicts(tmm=(1.9, 1.4), **without) == {"equal": U, "faster": U}  # wins against those that ran
    assert lm_verdicts(tmm=(2.1, 1.6), **without) == {"equal": N, "faster": N}  # loses to one that ran
    assert lm_verdicts(**RIVALS) == {"equal": U, "faster": U}  # no TMM
    assert lm_claim.verdicts({}) and {v.verdict for v in lm_claim.verdicts({})} == {U}
    # the extension takes no part: beating it or losing to it changes nothing
    assert lm_verdicts(tmm=(1.9, 1.4), extension=(1.0, 1.0), **RIVALS) == {"equal": C, "faster": C}


def test_lm_compares_at_matched_flops_not_tokens():
    # Mamba2 costs twice TMM's FLOPs per token: TMM's last evaluation (its total) is Mamba2's midpoint
    runs = {"tmm": lm_run("tmm", 2.0, 1.5), "mamba2": lm_run("mamba2", 1.8, 1.4, total=2 * F),
            "hyena": lm_run("hyena", 2.5, 2.0), "transformer": lm_run("transformer", 2.5, 2.0)}
    assert lm_claim.matched_flops(runs) == F
    assert lm_claim.bpb_at(runs["mamba2"], F) == pytest.approx(1.8)
    assert lm_claim.bpb_at(runs["mamba2"], F / 2) == pytest.approx(2.9)
    # at equal tokens Mamba2 leads (1.4 against 1.5); at equal FLOPs TMM does (1.5 against 1.8, 2.0 against 2.9)
    assert [v.verdict for v in lm_claim.verdicts(runs)] == [C, C]
    # a shorter run sets the matched point, where every other run is interpolated
    runs["transformer"] = lm_run("transformer", 3.0, 1.0, total=F / 2)
    assert lm_claim.matched_flops(runs) == F / 2
    assert lm_claim.bpb_at(runs["tmm"], F / 2) == pytest.approx(2.0)
    assert lm_claim.verdicts(runs)[0].verdict == N  # the Transformer's 1.0 at F / 2 against TMM's 2.0


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


def test_lm_sweep_grows_past_an_edge_until_the_best_is_inside():
    assert lr_grid.LR_STEP == 3.0 and lr_grid.MAX_EXTENSIONS == 3
    none = {"low": 0, "high": 0}

    def extension(runs, extended=none):
        return lr_grid.past_edge(runs, lm_claim.best_lr(runs), extended)

    inside = {1e-3: sweep_run(2.0), 3e-3: sweep_run(1.5), 1e-2: sweep_run(1.7)}
    assert extension(inside) is None
    top = {1e-3: sweep_run(2.0), 3e-3: sweep_run(1.5), 1e-2: sweep_run(1.4)}
    assert extension(top) == 3e-2
    assert extension({**top, 1e-2: sweep_run(1.4, "diverged")}) is None  # 3e-3 is inside
    bottom = {1e-3: sweep_run(1.0), 3e-3: sweep_run(1.5)}
    assert extension(bottom) == pytest.approx(3.33e-4)
    assert extension(bottom, {"low": 3, "high": 0}) is None  # grown 3 times on that side: stop
    assert extension({1e-3: None}) is None  # nothing finished: nothing to extend from


def test_a_sweep_grows_until_its_best_is_inside_or_it_has_grown_three_times():
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
    one = {3e-3: sweep_run(1.5)}  # one lr is no sweep: nothing grows
    lr_grid.grow(one, lm_claim.best_lr, train(lambda lr: 1.0))
    assert trained == [] and list(one) == [3e-3]


def test_a_job_is_read_with_the_current_flops_estimate(tmp_path):
    # a job logged with another estimate (here 0): the verdicts see the current formula's FLOPs
    model = tmm.models.build("mamba2-tiny")
    cfg, params = model.config, model.num_parameters()
    (tmp_path / "config.json").write_text(json.dumps({"task": {"seq_len": 64}, "models": [
        {"label": "mamba2", "config_name": "mamba2", "params": params, "config": cfg}]}))
    (tmp_path / "summary.json").write_text(json.dumps({"runs": [
        {"config": "mamba2", "params": params, "status": "done", "final_acc": 0.5, "final_eval_loss": 1.0,
         "steps_to_learned": None}]}))
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"config": "mamba2", "step": s, "tokens": 512 * s, "flops_est": 0.0, "eval_loss": 1.0}) + "\n"
        for s in (0, 10)))
    rows = read_compare_job(tmp_path)["mamba2"].rows
    assert [r["flops_est"] for r in rows] == [0.0, flops_per_token(cfg, params, 64) * 5120]


# -- MQAR (the project's own test) --------------------------------------------------------------------------

def mqar(**acc):
    return mqar_claim.verdict({k.replace("_", "-"): v for k, v in acc.items()}, (4, 64)).verdict


def test_mqar_separates_only_when_the_transformer_learns():
    assert mqar_claim.SEPARATES == 0.9 and mqar_claim.MARGIN == 0.05
    assert mqar(tmm=0.9, transformer=0.9, hyena=0.1, hyena_ar=0.1) == C  # 0.9 separates
    assert mqar(tmm=0.9, transformer=0.9 - EPS, hyena=0.1, hyena_ar=0.1) == U
    assert mqar(tmm=0.1, transformer=0.9 - EPS, hyena=0.9, hyena_ar=0.9) == U  # however the others do


def test_mqar_better_is_strict():
    base = {"transformer": 1.0, "hyena": 0.25, "hyena_ar": 0.5}
    assert mqar(tmm=0.5, **base) == N  # a tie with the better Hyena
    assert mqar(tmm=0.55 - EPS, **base) == N  # within the margin
    assert mqar(tmm=0.55 + EPS, **base) == C
    assert mqar(tmm=0.75, **base, mamba2=1.0) == C  # Mamba2 takes no part
    assert mqar(tmm=0.55 + EPS, transformer=1.0, hyena=0.5, hyena_ar=0.25) == C  # either Hyena may be the better


def test_mqar_missing_runs():
    assert mqar(transformer=1.0, hyena=0.1, hyena_ar=0.1) == U  # no TMM
    assert mqar(tmm=1.0, hyena=0.1, hyena_ar=0.1) == U  # no Transformer: cannot tell the setting separates
    assert mqar(tmm=1.0, transformer=1.0) == U  # no Hyena
    assert mqar(tmm=1.0, transformer=1.0, hyena=0.1) == U  # hyena-ar did not run, TMM beats the other
    assert mqar(tmm=0.5, transformer=1.0, hyena_ar=0.5) == N  # and when it does not, that settles it
    assert mqar(tmm=1.0, transformer=1.0, hyena=None, hyena_ar=0.1) == U  # None: no result


def test_mqar_each_model_counts_at_its_best_lr():
    def acc(a, status="done"):
        return ModelResult("tmm", 1, status, a, 1.0, None, [])
    assert mqar_claim.best_run({1e-3: acc(0.3), 3e-3: acc(0.6), 1e-2: None}) == (0.6, 3e-3)  # None: did not run
    assert mqar_claim.best_run({1e-3: acc(0.95), 3e-3: acc(0.99, "diverged")}) == (0.95, 1e-3)
    assert mqar_claim.best_run({3e-3: acc(0.5), 1e-3: acc(0.5)}) == (0.5, 1e-3)  # a tie: the lowest lr
    assert mqar_claim.best_run({1e-3: acc(None)}) is None


def test_mqar_grid_grows_only_while_the_best_could_gain_more_than_the_margin():
    def acc(a):
        return ModelResult("tmm", 1, "done", a, 1.0, None, [])
    assert mqar_claim.MARGIN == 0.05
    top = {3e-4: acc(0.2), 1e-3: acc(0.25), 3e-3: acc(0.45)}
    assert mqar_claim.lr_to_grow_from(top) == 3e-3
    assert lr_grid.past_edge(top, mqar_claim.lr_to_grow_from(top), {"low": 0, "high": 0}) == 9e-3
    assert mqar_claim.lr_to_grow_from({**top, 3e-3: acc(0.95 - EPS)}) == 3e-3
    assert mqar_claim.lr_to_grow_from({**top, 3e-3: acc(0.95)}) is None  # 1.0 is within the margin of it
    assert mqar_claim.lr_to_grow_from({1e-3: None}) is None


def test_mqar_task_is_zoologys():
    from lab.experiments.claims.scales import SCALES
    import torch
    import tmm.tasks
    s = SCALES["default"]
    assert s.mqar_vocab >= 256 and s.mqar_settings == ((4, 64), (8, 128), (16, 256))
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

def retention(random_source=None, **bits):
    """{mode: verdict} for "mode_arch" -> bits recovered."""
    rows = [{"mode": k.split("_")[0], "arch": k.split("_", 1)[1], "bits_recovered": v} for k, v in bits.items()]
    return {v.claim.split(", ")[1].split(":")[0]: v.verdict
            for v in retention_claim.verdicts(rows, "h", random_source=random_source)}


M = retention_claim.MARGIN_BITS
EXTRACTION = {"extraction_transformer": 40.0, "extraction_hyena": 30.0, "extraction_mamba2": 30.0,
              "extraction_none": 20.0}
CAPACITY = {"capacity_hyena": 10.0, "capacity_mamba2": 8.0, "capacity_none": 0.0}


def test_retention_margin_is_strict():
    assert M == 1.0
    assert retention(extraction_tmm=50.0, capacity_tmm=20.0, **EXTRACTION, **CAPACITY) == \
        {"extraction": C, "capacity": C}
    assert retention(extraction_tmm=40.0, capacity_tmm=10.0, **EXTRACTION, **CAPACITY) == \
        {"extraction": N, "capacity": N}  # ties
    assert retention(extraction_tmm=41.0 - EPS, capacity_tmm=11.0 - EPS, **EXTRACTION, **CAPACITY) == \
        {"extraction": N, "capacity": N}
    assert retention(extraction_tmm=41.0 + EPS, capacity_tmm=11.0 + EPS, **EXTRACTION, **CAPACITY) == \
        {"extraction": C, "capacity": C}
    assert retention(extraction_tmm=35.0, **EXTRACTION)["extraction"] == N  # behind the Transformer only


def test_retention_needs_information_above_the_zero_vector():
    flat = {f"extraction_{a}": 20.0 for a in ("tmm", "transformer", "hyena", "mamba2", "none")}
    assert retention(**flat)["extraction"] == U
    assert retention(**{**flat, "extraction_transformer": 20.0 + M})["extraction"] == U  # 1 bit above: no information
    assert retention(**{**flat, "extraction_transformer": 20.0 + M + EPS})["extraction"] == N  # TMM now trails
    assert retention(**{**flat, "extraction_tmm": 25.0})["extraction"] == C
    # capacity: the Transformer is no rival, but its state shows the harness carries information
    flat = {f"capacity_{a}": 0.0 for a in ("tmm", "hyena", "mamba2", "none")}
    assert retention(**flat)["capacity"] == U
    assert retention(**flat, capacity_transformer=3.0)["capacity"] == N
    # one token recovered out of 16 (4 bits) shows
    assert retention(**{**flat, "capacity_tmm": 4.0})["capacity"] == C


def test_retention_random_tokens_measure_against_zero():
    # on random tokens the zero state's optimum is 0 bits: a baseline decoder short of it does not lower the bar
    base = {"capacity_hyena": 0.5, "capacity_mamba2": 0.5, "capacity_none": -2.0}
    assert retention(capacity_tmm=1.0 - EPS + 0.5, **base)["capacity"] == N  # within 1 bit of Hyena
    assert retention(capacity_tmm=1.0 - EPS, **{**base, "capacity_hyena": -1.0, "capacity_mamba2": -1.0}) == \
        {"capacity": U}  # nobody 1 bit above 0, although 3 bits above the measured -2
    assert retention(capacity_tmm=1.0 + EPS, **{**base, "capacity_hyena": -1.0, "capacity_mamba2": -1.0}) == \
        {"capacity": C}
    # on the corpus (extraction) the measured baseline is the bar, whatever its sign
    assert retention(extraction_tmm=-0.5, extraction_transformer=-2.0, extraction_hyena=-2.0,
                     extraction_mamba2=-2.0, extraction_none=-2.0)["extraction"] == C
    assert retention(random_source=False, capacity_tmm=-0.5, capacity_hyena=-2.0, capacity_mamba2=-2.0,
                     capacity_none=-2.0)["capacity"] == C


def test_retention_missing_runs():
    assert "capacity" not in retention(extraction_tmm=50.0, **EXTRACTION)  # a job of one mode judges that mode
    assert [v.verdict for v in retention_claim.verdicts([], "h", modes=["capacity"])] == [U]  # a job without rows
    assert retention(capacity_tmm=20.0, capacity_none=0.0, capacity_hyena=None)["capacity"] == U  # no result
    partial = {k: v for k, v in CAPACITY.items() if k != "capacity_mamba2"}
    assert retention(capacity_tmm=20.0, **partial)["capacity"] == U  # mamba2 did not run
    assert retention(capacity_tmm=9.0, **partial)["capacity"] == N  # behind hyena, which did
    no_base = {k: v for k, v in CAPACITY.items() if k != "capacity_none"}
    assert retention(capacity_tmm=20.0, **no_base)["capacity"] == U  # no zero-vector baseline to compare with
    assert retention(**CAPACITY)["capacity"] == U  # no TMM


def test_bits_recovered_is_zero_for_a_uniform_guess_and_log2_v_per_token():
    import math
    from lab.experiments.retention_model import bits_recovered
    assert bits_recovered([math.log(16)] * 32, 16) == pytest.approx(0.0, abs=1e-12)
    assert bits_recovered([0.0] + [math.log(16)] * 31, 16) == pytest.approx(4.0)  # one token recovered exactly
    assert bits_recovered([math.log(32)] * 2, 16) == pytest.approx(-2.0)  # worse than uniform: negative


# -- ablation ----------------------------------------------------------------------------------------------

W = ablation_claim.WORSE


def ablation_run(label, bpb, evals=17):
    """A Pooled of one LM run with ``evals`` evaluations (steps 10, 20, ...) at ``bpb`` bits per byte: one
    number (every evaluation), or one per evaluation."""
    bpb = bpb if isinstance(bpb, list) else [bpb] * evals
    rows = [{"step": 10 * (i + 1), "tokens": 100, "flops_est": 1e6, "eval_acc": 0.0, "eval_loss": 1.0,
             "eval_bpb": x} for i, x in enumerate(bpb)]
    return Pooled(label, 100, [ModelResult(label, 100, "done", 0.0, 1.0, None, rows)])


def ablation(**bpb):
    """(heads, kernel width, expanded) verdicts for label -> bits per byte (a number: at every evaluation)."""
    lm = {k.replace("_", "-"): ablation_run(k, v) for k, v in bpb.items()}
    return tuple(v.verdict for v in ablation_claim.verdicts(lm))


def expanded_verdict(heads4, expanded):
    """The expanded rule's verdict on two curves (bits per byte per evaluation, steps 10, 20, ...)."""
    lm = {"heads4": ablation_run("heads4", heads4), "expanded": ablation_run("expanded", expanded)}
    return ablation_claim.verdicts(lm)[2]


def test_ablation_is_judged_once_its_verdict_has_settled_not_the_loss():
    assert ablation_claim.SETTLE_SHARE == 0.25
    falling = [3.0 * 0.98 ** i for i in range(20)]  # never levels off: 2% per evaluation to the end
    # the same fall for both, expanded 0.02 above: settled, although neither loss has levelled off
    assert expanded_verdict(falling, [x + 0.02 for x in falling]).verdict == C
    assert expanded_verdict(falling, [x + 0.005 for x in falling]).verdict == N
    # the margin changes sign inside the last quarter (steps 150-200): not settled
    flips = [x + (0.02 if i < 17 else 0.0) for i, x in enumerate(falling)]
    v = expanded_verdict(falling, flips)
    assert v.verdict == U and "not settled" in v.evidence
    # the same sign throughout, but closing fast enough that a run twice as long would flip it
    closing = [x + 0.05 - 0.002 * i for i, x in enumerate(falling)]  # margin at the end 0.002, -0.002 per step 10
    assert expanded_verdict(falling, closing).verdict == U
    # closing slowly: the trend keeps the sign over another 200 steps
    slow = [x + 0.05 - 0.0001 * i for i, x in enumerate(falling)]
    assert expanded_verdict(falling, slow).verdict == C
    # too few evaluations in the last quarter to tell
    assert expanded_verdict([2.0, 2.0], [2.1, 2.1]).verdict == U
    # a rule not naming a variant is not held up by it
    lm = {"heads4": ablation_run("heads4", 2.0), "expanded": ablation_run("expanded", 2.02),
          "heads1": ablation_run("heads1", flips)}
    assert ablation_claim.verdicts(lm)[2].verdict == C


def test_ablation_heads_need_strict_ordering():
    assert W == 0.01
    assert ablation(heads1=2.0, heads4=1.98, heads16=1.96)[0] == C
    assert ablation(heads1=2.0, heads4=2.0, heads16=2.0)[0] == N  # a three-way tie
    assert ablation(heads1=2.0, heads4=1.99 + EPS, heads16=1.98)[0] == N  # heads 4 within 0.01 of heads 1
    assert ablation(heads1=2.0, heads4=1.99 - EPS, heads16=1.98 - 2 * EPS)[0] == C
    assert ablation(heads1=2.0, heads4=1.98, heads16=1.97 + EPS)[0] == N  # heads 16 within 0.01 of heads 4
    assert ablation(heads1=1.9, heads4=2.0, heads16=2.1)[0] == N  # reversed
    assert ablation(heads1=2.0, heads4=1.9)[0] == U  # heads 16 did not run


def test_ablation_kernel_width_and_expanded():
    def kernel(k8):
        return ablation(flat_kernel1=2.0, flat_kernel4=2.05, flat_kernel8=k8)[1]
    assert kernel(2.01 + EPS) == C  # worse than the better of kernels 1 and 4 (2.0)
    assert kernel(2.01 - EPS) == N
    assert kernel(2.0) == N  # a tie
    assert ablation(flat_kernel1=2.0, flat_kernel8=3.0)[1] == U
    assert ablation(heads4=2.0, expanded=2.01 + EPS)[2] == C
    assert ablation(heads4=2.0, expanded=2.01 - EPS)[2] == N
    assert ablation(heads4=2.0, expanded=2.0)[2] == N
    assert ablation(expanded=3.0)[2] == U


# -- operator index ----------------------------------------------------------------------------------------

MOVED = oi_claim.MOVED


def oi(*sources):
    return oi_claim.verdict([Source(*s) for s in sources]).verdict


def test_operator_index_compares_shares_strictly():
    assert MOVED == 0.1
    auto = ("auto", "autoencoder", 2, 10, 0.5)  # 20%
    assert oi(("copy", "causal", 3, 10, 0.5), auto) == C
    assert oi(("copy", "causal", 2, 10, 0.5), auto) == N  # a tie
    assert oi(("copy", "causal", 1, 10, 0.5), auto) == N
    # shares pool the vectors of every model of a kind; untrained models take no part
    assert oi(("copy", "causal", 1, 10, 0.5), ("lm", "causal", 5, 10, 0.5), auto,
              ("copy (untrained)", "untrained", 10, 10)) == C


def test_operator_index_not_tested_unless_the_vectors_moved():
    auto = ("auto", "autoencoder", 0, 10, 0.5)
    assert oi(("copy", "causal", 9, 10, MOVED), auto) == U  # 0.1 is not above 0.1
    assert oi(("copy", "causal", 9, 10, MOVED + EPS), auto) == C
    assert oi(("copy", "causal", 9, 10, 0.5), ("auto", "autoencoder", 0, 10, MOVED)) == U
    assert oi(("copy", "causal", 9, 10, None), auto) == U  # initial vectors not saved: movement unknown
    # an unmoved model is left out, the others still count
    assert oi(("copy", "causal", 0, 10, 0.01), ("lm", "causal", 9, 10, 0.5), auto) == C
    verdict = oi_claim.verdict([Source("copy", "causal", 0, 10, 0.01), Source(*auto)])
    assert "copy (0.010)" in verdict.evidence and "no trained causal model" in verdict.evidence


def test_operator_index_missing_models():
    assert oi() == U
    assert oi(("copy", "causal", 9, 10, 0.5)) == U  # no autoencoder
    assert oi(("auto", "autoencoder", 0, 10, 0.5)) == U  # no causal model
    assert oi(("copy", "causal", 0, 0, 0.5), ("auto", "autoencoder", 0, 10, 0.5)) == U  # no reliable index
