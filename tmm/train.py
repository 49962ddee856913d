"""A small training loop for the comparison scripts (``scripts/compare.py``).

    task = tmm.tasks.make("copy", n=32)
    model = tmm.models.build(config)
    result = tmm.train.train(model, task, TrainConfig(steps=300), log=print)

What it does, in order, each step: draw a batch from the task (its own seeded
``torch.Generator``), ``loss = model(ids, labels=labels).loss``, backward,
check that the loss and every gradient are finite (else
:class:`NonFiniteError`, naming the step and the first bad parameter), clip
the global gradient norm to ``grad_clip``, one AdamW step, then the learning
rate schedule (linear warm-up from 0 to ``lr`` over ``warmup`` steps, then
linear decay to ``min_lr_ratio * lr`` at ``steps``).

Evaluation (at step 0, every ``eval_every`` steps and at the last step) runs
the model in eval mode without gradients over a fixed held-out set of
``eval_batches`` batches, drawn once from a generator seeded differently from
the training stream, and reports the mean loss and the task's accuracy
(``task.accuracy``), averaged over the batches.

Each evaluation gives ``log`` one dict row::

    step, tokens, wall_s, train_loss, eval_loss, eval_acc, flops_est, lr

``tokens`` counts every input token processed by training steps
(``steps * batch_size * seq_len``); ``wall_s`` is the time spent in training
steps only (evaluation excluded, so that curves against wall-clock compare
the architectures' training speed); ``train_loss`` is the mean training loss
since the previous row.

FLOPs estimate (:func:`flops_per_token`): ``6 * N`` per trained token, N the
number of parameters (forward 2N, backward 4N; embeddings included, which
overcounts them slightly), plus each architecture's sequence-mixing term,
times 3 for forward + backward:
  - transformer: ``2 * n_layers * L * d`` (Kaplan et al. 2020: QK^T and AV,
    the causal mask not discounted);
  - tmm, hyena: the FFT long convolution, ``3 FFTs of length 2L`` at
    ``2.5 * 2L * log2(2L)`` flops each per channel, per token
    ``15 * log2(2L) * channels`` (tmm: d channels; hyena: d channels, plus
    its implicit filter MLP, which runs once per sequence and is ignored);
  - mamba2: the chunked SSD scan, per token about
    ``2 * Q * (N + P) * H + 4 * d_inner * N`` (intra-chunk scores and
    outputs over a chunk of Q, plus the state updates and read-outs).
It is an estimate for comparing architectures at one scale, not a count of
what the kernels execute.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Callable, Optional

import torch

__all__ = ["TrainConfig", "TrainResult", "NonFiniteError", "train", "flops_per_token", "ProgressBar"]


@dataclasses.dataclass
class TrainConfig:
    steps: int = 300
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.1  # on parameters with >= 2 dimensions only
    betas: tuple = (0.9, 0.95)
    warmup: int = 30  # steps of linear warm-up
    min_lr_ratio: float = 0.1  # the linear decay ends at min_lr_ratio * lr
    grad_clip: float = 1.0  # global L2 norm; 0 or None = no clipping
    seed: int = 0  # training batches; the caller seeds the model's init
    eval_every: int = 50
    eval_batches: int = 4
    eval_batch_size: Optional[int] = None  # default: batch_size
    threads: Optional[int] = None  # torch.set_num_threads; None = leave as is
    time_budget_s: Optional[float] = None  # stop (after a final eval) once training has run this long
    progress: bool = True  # a progress bar on stderr
    desc: str = ""  # the progress bar's label


@dataclasses.dataclass
class TrainResult:
    rows: list  # the logged rows, in order
    steps: int  # steps completed
    tokens: int
    wall_s: float  # time in training steps
    total_s: float  # everything, evaluation included
    flops_est: float
    stopped_early: Optional[str] = None  # why training stopped before cfg.steps (time budget), or None

    @property
    def final(self):
        return self.rows[-1] if self.rows else None

    @property
    def best_acc(self):
        return max((r["eval_acc"] for r in self.rows), default=float("nan"))


class NonFiniteError(RuntimeError):
    """The loss or a gradient became NaN or infinite; ``.step`` is the step
    (1-based: the step being computed) and ``.rows`` what was logged before."""

    def __init__(self, message, step, rows=None):
        super().__init__(message)
        self.step = step
        self.rows = rows or []


def flops_per_token(config: dict, num_params: int, seq_len: int) -> float:
    """Estimated training FLOPs per token (forward + backward); see the module
    docstring for the formula."""
    arch = config.get("arch")
    d = int(config.get("d_model", 0))
    layers = int(config.get("n_layers", 0))
    L = int(seq_len)
    if arch == "transformer":
        mix = 2.0 * L * d
    elif arch in ("tmm", "hyena"):
        mix = 15.0 * math.log2(2 * L) * d
    elif arch == "mamba2":
        d_inner = int(config.get("expand", 2)) * d
        P = int(config.get("headdim", 64))
        N = int(config.get("d_state", 64))
        Q = min(int(config.get("chunk_size", 64)), L)
        H = max(d_inner // max(P, 1), 1)
        mix = 2.0 * Q * (N + P) * H + 4.0 * d_inner * N
    else:
        mix = 0.0
    return 6.0 * num_params + 3.0 * layers * mix


class ProgressBar:
    """tqdm when it is installed, else a plain text bar on stderr (redrawn
    at most twice a second) with rate and ETA. ``update(n, **postfix)``."""

    def __init__(self, total, desc="", enabled=True):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.n, self.postfix = 0, {}
        self._tqdm = None
        self._start = self._last = time.monotonic()
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._tqdm = tqdm(total=total, desc=desc, unit="step", dynamic_ncols=True, leave=True, file=sys.stderr)

    def update(self, n=1, **postfix):
        self.n += n
        self.postfix.update(postfix)
        if not self.enabled:
            return
        if self._tqdm is not None:
            if postfix:
                self._tqdm.set_postfix(self.postfix, refresh=False)
            self._tqdm.update(n)
            return
        now = time.monotonic()
        if now - self._last >= 0.5:
            self._last = now
            self._draw(now)

    def _draw(self, now, end="\r"):
        elapsed = now - self._start
        frac = self.n / self.total if self.total else 1.0
        width = 24
        filled = int(width * min(frac, 1.0))
        rate = self.n / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.n) / rate if rate > 0 else float("nan")
        post = " ".join(f"{k}={v}" for k, v in self.postfix.items())
        sys.stderr.write(
            f"{self.desc} [{'#' * filled}{'.' * (width - filled)}] {self.n}/{self.total} "
            f"{_hms(elapsed)}<{_hms(eta)} {rate:.2f} step/s {post}\x1b[K{end}"
        )
        sys.stderr.flush()

    def close(self):
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            self._draw(time.monotonic(), end="\n")


def _hms(s):
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def _lr_at(step, cfg):
    """Learning rate for step `step` (0-based): linear warm-up, linear decay."""
    if cfg.warmup > 0 and step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(cfg.steps - cfg.warmup, 1)
    frac = min(max(step - cfg.warmup, 0) / span, 1.0)
    return cfg.lr * (1.0 - (1.0 - cfg.min_lr_ratio) * frac)


def _optimizer(model, cfg):
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, betas=tuple(cfg.betas))


def _first_nonfinite_grad(model):
    for name, p in model.named_parameters():
        if p.grad is not None and not torch.isfinite(p.grad).all():
            return name
    return None


@torch.no_grad()
def evaluate(model, task, eval_set):
    """(mean loss, mean accuracy) over a list of (ids, labels) batches."""
    was_training = model.training
    model.eval()
    losses, accs = [], []
    try:
        for ids, labels in eval_set:
            out = model(ids, labels=labels)
            losses.append(float(out.loss))
            accs.append(float(task.accuracy(out.logits, labels)))
    finally:
        model.train(was_training)
    return sum(losses) / len(losses), sum(accs) / len(accs)


def train(model, task, cfg: TrainConfig, log: Optional[Callable[[dict], None]] = None) -> TrainResult:
    """Trains `model` on `task` for cfg.steps steps (or until cfg.time_budget_s);
    returns a :class:`TrainResult`. Raises :class:`NonFiniteError` when the
    loss or a gradient stops being finite."""
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    params = model.num_parameters()
    config = model.config if hasattr(model, "config") else {}
    fpt = flops_per_token(config, params, task.seq_len)
    tokens_per_step = cfg.batch_size * task.seq_len

    gen = torch.Generator().manual_seed(cfg.seed)
    eval_gen = torch.Generator().manual_seed(cfg.seed + 1_000_003)  # held out: another stream
    eval_bs = cfg.eval_batch_size or cfg.batch_size
    eval_set = [task.batch(eval_bs, eval_gen) for _ in range(max(cfg.eval_batches, 1))]

    opt = _optimizer(model, cfg)
    model.train()
    rows = []
    wall = 0.0
    t_start = time.monotonic()
    loss_sum, loss_n = 0.0, 0
    bar = ProgressBar(cfg.steps, cfg.desc, cfg.progress)
    stopped = None

    def emit(step):
        nonlocal loss_sum, loss_n
        eval_loss, eval_acc = evaluate(model, task, eval_set)
        row = {
            "step": step,
            "tokens": step * tokens_per_step,
            "wall_s": round(wall, 4),
            "train_loss": (loss_sum / loss_n) if loss_n else None,
            "eval_loss": eval_loss,
            "eval_acc": eval_acc,
            "flops_est": fpt * step * tokens_per_step,
            "lr": opt.param_groups[0]["lr"],
        }
        loss_sum, loss_n = 0.0, 0
        rows.append(row)
        if log is not None:
            log(row)
        return row

    step = 0
    try:
        emit(0)
        while step < cfg.steps:
            t0 = time.monotonic()
            lr = _lr_at(step, cfg)
            for g in opt.param_groups:
                g["lr"] = lr
            ids, labels = task.batch(cfg.batch_size, gen)
            loss = model(ids, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            if not torch.isfinite(loss):
                raise NonFiniteError(
                    f"training stopped at step {step + 1}: the loss is {loss.item()} (not finite)", step + 1, rows
                )
            loss.backward()
            # The global norm (computed anyway to clip) is finite iff every gradient is.
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or math.inf)
            if not torch.isfinite(norm):
                bad = _first_nonfinite_grad(model)
                raise NonFiniteError(
                    f"training stopped at step {step + 1}: the gradient of '{bad}' is not finite", step + 1, rows
                )
            opt.step()
            step += 1
            wall += time.monotonic() - t0
            loss_sum += loss.item()
            loss_n += 1
            over = cfg.time_budget_s is not None and time.monotonic() - t_start >= cfg.time_budget_s
            if over and step < cfg.steps:
                stopped = f"time budget of {cfg.time_budget_s:.0f} s reached at step {step} of {cfg.steps}"
            if step % cfg.eval_every == 0 or step == cfg.steps or stopped:
                row = emit(step)
                bar.update(1, loss=f"{row['eval_loss']:.3f}", acc=f"{row['eval_acc']:.3f}")
            else:
                bar.update(1)
            if stopped:
                break
    finally:
        bar.close()
    return TrainResult(
        rows=rows,
        steps=step,
        tokens=step * tokens_per_step,
        wall_s=wall,
        total_s=time.monotonic() - t_start,
        flops_est=fpt * step * tokens_per_step,
        stopped_early=stopped,
    )
