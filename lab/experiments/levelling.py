"""When a loss has levelled off: one detector for every experiment that
trains "until the loss stops improving" (the retention decoders; the
ablations judge whether their verdict has settled instead, see
lab.experiments.claims.ablation_claim).

    detector = LevelOff()
    for row in evaluations:               # e.g. tmm.train.train's log rows
        if detector.update(row["eval_loss"]):
            break                         # detector.reason says where and why

The rule: an exponential moving average of the loss, ``ema_t = smoothing *
ema_(t-1) + (1 - smoothing) * loss_t`` (ema_0 = the first loss), is levelled
off at evaluation t when its improvement over the last ``window``
evaluations is below ``min_gain`` of its value ``window`` evaluations ago:
``(ema_(t-window) - ema_t) < min_gain * |ema_(t-window)|``. So a loss still
falling by 0.5% per window keeps training; one that has flattened, or rises
(overfitting, noise), stops. No decision before step ``min_step`` (the
caller's: e.g. past the learning-rate warm-up, where a loss barely moves
because the rate is still small, not because it has levelled off). The EMA keeps one noisy evaluation from ending
a run that is still improving; the window sets how long a plateau must last.
The caller's step cap stays the bound when the loss never levels off.

:func:`train_until_level` runs :func:`tmm.train.train` with it (the loop has
no stop hook: the detector ends it from the log callback after an
evaluation, with the parameters of the step just evaluated).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

__all__ = ["LevelOff", "LevelledOff", "train_until_level"]


@dataclasses.dataclass
class LevelOff:
    window: int = 5  # evaluations the improvement is measured over
    min_gain: float = 0.005  # relative improvement of the EMA over the window below which the loss has levelled
    smoothing: float = 0.5  # the EMA's weight on its previous value
    min_step: int = 0  # no decision at evaluations before this step

    def __post_init__(self):
        if self.window < 1:
            raise ValueError(f"LevelOff: window must be >= 1, got {self.window}")
        if not 0.0 <= self.smoothing < 1.0:
            raise ValueError(f"LevelOff: smoothing must be in [0, 1), got {self.smoothing}")
        if self.min_gain < 0:
            raise ValueError(f"LevelOff: min_gain must be >= 0, got {self.min_gain}")
        self.ema: list = []
        self.reason: Optional[str] = None

    def update(self, loss: float, step: Optional[int] = None) -> bool:
        """Adds one evaluation's loss (at ``step``); True once the loss has levelled off (and from then on)."""
        if self.reason is not None:
            return True
        prev = self.ema[-1] if self.ema else loss
        self.ema.append(self.smoothing * prev + (1.0 - self.smoothing) * loss)
        if len(self.ema) <= self.window or (step is not None and step < self.min_step):
            return False
        then, now = self.ema[-1 - self.window], self.ema[-1]
        gain = then - now
        if gain < self.min_gain * abs(then):
            self.reason = (f"loss levelled off: its EMA improved by {gain:.4g} ({gain / abs(then):.2%}) over the last "
                           f"{self.window} evaluations, below {self.min_gain:.2%}")
            return True
        return False

    def describe(self) -> str:
        return (f"EMA (smoothing {self.smoothing}) of the held-out loss improving by less than {self.min_gain:.2%} "
                f"over {self.window} evaluations, from step {self.min_step} on")


class LevelledOff(Exception):
    """Raised from a training log callback to end :func:`tmm.train.train` once the loss has levelled off."""


def train_until_level(model, task, cfg, detector: LevelOff, log: Optional[Callable[[dict], None]] = None,
                      key: str = "eval_loss"):
    """``tmm.train.train(model, task, cfg, log)`` that stops after the first
    evaluation at which ``detector`` finds ``row[key]`` levelled off
    (cfg.steps stays the cap). Returns (TrainResult-like namespace with
    rows, steps, wall_s, final, stopped_early; levelled: the detector's
    reason or None). Each evaluation row is passed to ``log`` first."""
    from tmm.train import train

    rows = []

    def watch(row):
        rows.append(row)
        if log is not None:
            log(row)
        if detector.update(row[key], row.get("step")):
            raise LevelledOff(detector.reason)

    try:
        out = train(model, task, cfg, log=watch)
        return _Result(out.rows, out.steps, out.wall_s, out.stopped_early, None)
    except LevelledOff as e:
        last = rows[-1]
        return _Result(rows, last["step"], last["wall_s"], None, f"{e} (step {last['step']} of {cfg.steps})")


@dataclasses.dataclass
class _Result:
    rows: list
    steps: int
    wall_s: float
    stopped_early: Optional[str]  # the time budget's note, as tmm.train's
    levelled: Optional[str]  # why training ended before the cap, or None

    @property
    def final(self) -> dict:
        return self.rows[-1]
