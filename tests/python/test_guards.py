"""The training loop's numerical guard: training stops with an error
naming the step and the FIRST non-finite tensor (the loss, a gradient by
parameter name, or a parameter after the optimizer step); on by default,
off with nan_guard=False / compare.py --no-nan-guard (CompareSettings.no_nan_guard)."""
import json
import math
from pathlib import Path

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

import tmm.models
import tmm.tasks
from lab.experiments.compare import CompareSettings, run_comparison
from tmm.train import NonFiniteError, TrainConfig, train

REPO = Path(__file__).resolve().parents[2]


def tiny_tmm(task):
    cfg = json.loads((REPO / "models" / "tmm-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def tcfg(**kw):
    return TrainConfig(**{**dict(steps=6, batch_size=2, warmup=1, eval_every=2, eval_batches=1, progress=False), **kw})


def poison_grad(param, at_call):
    """From the `at_call`-th backward on, the gradient of `param` holds a NaN."""
    calls = [0]

    def hook(grad):
        calls[0] += 1
        if calls[0] < at_call:
            return grad
        grad = grad.clone()
        grad.view(-1)[0] = float("nan")
        return grad

    param.register_hook(hook)


@pytest.fixture
def task(restore_threads):
    torch.set_num_threads(1)
    return tmm.tasks.make("copy", n=4)


def test_nonfinite_loss_names_the_step(task):
    model = tiny_tmm(task)
    with torch.no_grad():
        model.head.weight[0, 0] = float("inf")
    with pytest.raises(NonFiniteError, match=r"^training stopped at step 1: the loss is nan \(not finite\)$") as e:
        train(model, task, tcfg())
    assert e.value.step == 1 and e.value.tensor == "loss"
    assert [r["step"] for r in e.value.rows] == [0]  # what was logged before


def test_first_nonfinite_gradient_by_name(task):
    model = tiny_tmm(task)
    params = dict(model.named_parameters())
    # Two poisoned at step 3; the one earlier in named_parameters() order is
    # reported (clipping, which would turn every gradient into NaN, comes after).
    poison_grad(params["blocks.1.ffn_in.weight"], at_call=3)
    poison_grad(params["blocks.0.mixer.weight"], at_call=3)
    with pytest.raises(NonFiniteError) as e:
        train(model, task, tcfg())
    assert str(e.value) == (
        "training stopped at step 3: the gradient of 'blocks.0.mixer.weight' is not finite (1 of 32 elements; "
        "the first such parameter in model.named_parameters() order)"
    )
    assert e.value.step == 3 and e.value.tensor == "grad:blocks.0.mixer.weight"
    assert [r["step"] for r in e.value.rows] == [0, 2]


def test_nonfinite_parameter_after_the_update(task):
    # A global optimizer hook spoils two parameters after the second step;
    # the first of them in named_parameters() order is reported.
    model = tiny_tmm(task)
    params = dict(model.named_parameters())
    calls = [0]

    def spoil(optimizer, args, kwargs):
        calls[0] += 1
        if calls[0] == 2:
            with torch.no_grad():
                params["head.weight"][1, 2] = float("inf")
                params["blocks.1.mixer.bias"][0, 3] = float("nan")
                params["blocks.1.mixer.bias"][1, 3] = float("-inf")

    handle = register_optimizer_step_post_hook(spoil)
    try:
        with pytest.raises(NonFiniteError) as e:
            train(model, task, tcfg(warmup=2))
    finally:
        handle.remove()
    assert str(e.value) == (
        "training stopped at step 2: the parameter 'blocks.1.mixer.bias' is not finite after the optimizer step "
        "(2 of 32 elements; lr 0.001)"
    )
    assert e.value.step == 2 and e.value.tensor == "param:blocks.1.mixer.bias"


def test_guard_off_trains_through(task):
    model = tiny_tmm(task)
    poison_grad(dict(model.named_parameters())["blocks.0.mixer.weight"], at_call=3)
    res = train(model, task, tcfg(nan_guard=False))
    assert res.steps == 6 and all(math.isfinite(x) for x in res.losses[:3])
    assert not math.isfinite(res.losses[-1])  # the NaN spread into the weights, unchecked


@pytest.mark.timeout(120)
def test_compare_guard_default_on_and_no_nan_guard(tmp_path, restore_threads, capsys):
    def run(out, **extra):
        s = CompareSettings(configs=[str(REPO / "models" / "tmm-tiny.json")], n=4, steps=4, batch_size=2,
                            eval_every=2, eval_batches=1, threads=1, lr=1e30, out=str(out), no_progress=True, **extra)
        assert run_comparison(s, log_prefix="compare").exit_code == 0
        return json.loads((out / "summary.json").read_text())["runs"][0]

    # lr 1e30: the first update is finite but huge, the second step's loss is not.
    guarded = run(tmp_path / "guarded")
    assert guarded["status"] == "diverged" and guarded["steps"] == 1
    assert guarded["note"] == "training stopped at step 2: the loss is nan (not finite)"
    assert "compare: tmm: training stopped at step 2: the loss is nan" in capsys.readouterr().err
    unguarded = run(tmp_path / "unguarded", no_nan_guard=True)
    assert unguarded["status"] == "done" and unguarded["steps"] == 4
