"""lab.experiments.levelling: when a loss has levelled off, on made-up
curves (each side of the threshold) and on one real training run."""
import math

import pytest
import torch

import tmm.tasks
from lab.experiments.levelling import LevelOff, train_until_level
from lab.experiments.model_configs import build_model, fit_to_task, read_config
from tmm.train import TrainConfig


def first_levelled(losses, **kw):
    d = LevelOff(**kw)
    for i, x in enumerate(losses):
        if d.update(x, step=i):
            return i
    return None


def test_a_falling_loss_keeps_training_and_a_flat_one_stops():
    falling = [4.0 * 0.97 ** i for i in range(100)]  # 3% per evaluation: never below 0.5% per 5
    assert first_levelled(falling) is None
    flat = [2.0] * 20
    assert first_levelled(flat) == 5  # as soon as a whole window exists
    # falls, then flattens: stops once the EMA's gain over 5 evaluations drops below 0.5%
    curve = [max(4.0 * 0.9 ** i, 1.0) for i in range(60)]
    stop = first_levelled(curve)
    assert 14 < stop < 30
    d = LevelOff()
    for x in curve[:stop + 1]:
        d.update(x)
    assert "levelled off" in d.reason and d.update(123.0)  # stays levelled


def test_threshold_both_sides():
    # a geometric loss falls by exactly 1 - r^5 over 5 evaluations, EMA and all (once the start has washed out)
    def gain_per_window(g):
        return [10.0 * (1 - g) ** (i / 5) for i in range(400)]
    assert first_levelled(gain_per_window(0.006), min_gain=0.005, smoothing=0.0) is None
    assert first_levelled(gain_per_window(0.004), min_gain=0.005, smoothing=0.0) == 5
    assert first_levelled([3.0] * 10 + [3.1] * 10) == 5  # a rising loss has levelled off too


def test_no_decision_before_min_step():
    assert first_levelled([2.0] * 20, min_step=12) == 12


def test_bad_settings():
    with pytest.raises(ValueError, match="window"):
        LevelOff(window=0)
    with pytest.raises(ValueError, match="smoothing"):
        LevelOff(smoothing=1.0)


def test_train_until_level_stops_a_real_run_and_keeps_its_rows():
    task = tmm.tasks.make("copy", n=4, vocab=4)
    seen = []

    def run(lr):
        torch.manual_seed(0)
        model = build_model(fit_to_task(read_config("tmm-tiny")[0], task))
        cfg = TrainConfig(steps=60, batch_size=8, lr=lr, warmup=5, eval_every=5, eval_batches=2, progress=False,
                          threads=1)
        return train_until_level(model, task, cfg, LevelOff(min_step=20), log=seen.append)
    # a learning rate too small to move the loss: levelled at the first evaluation with a whole window
    # behind it (steps 0, 5, ..., 25: six evaluations) at or past min_step
    out = run(1e-7)
    assert out.levelled and "step 25 of 60" in out.levelled
    assert out.steps == 25 and out.rows == seen and out.final is seen[-1] and out.final["step"] == 25
    assert math.isfinite(out.final["eval_loss"])
    # one that learns: the cap or a later plateau, never before the loss stopped falling
    seen.clear()
    out = run(3e-3)
    assert out.steps > 20 and out.rows == seen
