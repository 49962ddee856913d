"""Wall-clock budgets of the drivers: a step count sized from a few timed
steps, and a total budget shared among the training runs still to come."""
from __future__ import annotations

import time

import torch

from .model_configs import build_model

__all__ = ["time_steps", "size_steps", "proportional_share", "EvenShares"]


def time_steps(cfg, task, batch_size, seed, n=3, device="cpu", grad_accum=1, world=1, precision="float32"):
    """Seconds per training step (forward, backward, AdamW) of a throwaway
    model: the median of n timed steps after one untimed. A step is what
    one process runs: its ``batch_size / world`` rows in ``grad_accum``
    micro-batches, forward under autocast for bfloat16 / float16 (the
    gradient reduction between processes is not timed)."""
    import contextlib

    torch.manual_seed(seed)
    model = build_model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(seed + 7)
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    amp = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision)
    rows = max(1, batch_size // max(world, 1) // max(grad_accum, 1))
    times = []
    for i in range(n + 1):
        batches = [[t.to(device) for t in task.batch(rows, gen)] for _ in range(grad_accum)]
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for ids, labels in batches:
            with torch.autocast(dev.type, dtype=amp) if amp else contextlib.nullcontext():
                loss = model(ids, labels=labels, shift_labels=False).loss
            loss.backward()
        opt.step()
        sync()
        if i:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def size_steps(budget_s: float, step_s: dict, eval_batches: int) -> int:
    """The common step count that fits ``budget_s`` for all runs (``step_s``:
    label -> seconds per step): per run, steps x its step time plus its
    evaluations (~22 of ``eval_batches`` forward passes at ~1/3 of a step
    each), 15% left for noise; at least 10."""
    evals_cost = 22 * eval_batches / 3
    return max(int(0.85 * budget_s / sum(step_s.values()) - evals_cost), 10)


def proportional_share(left_s: float, label, rest: list, step_s=None) -> float:
    """The share of the ``left_s`` seconds for run ``label`` among the runs
    ``rest`` (its own label included) still to train: in proportion to their
    step times when known, else even; at least 1 s."""
    if step_s:
        share = left_s * step_s[label] / sum(step_s[r] for r in rest)
    else:
        share = left_s / len(rest)
    return max(share, 1.0)


class EvenShares:
    """Each training phase gets an even share of the time left (``minutes``
    None: no limit); ``cap()`` is called once per phase, skipped ones too."""

    def __init__(self, minutes, phases):
        self.total = None if minutes is None else minutes * 60.0
        self.phases, self.start = phases, time.monotonic()

    def cap(self):
        if self.total is None:
            return None
        left = self.total - (time.monotonic() - self.start)
        share = max(left / max(self.phases, 1), 1.0)
        self.phases -= 1
        return share
