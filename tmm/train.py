"""A small training loop for the comparison scripts (``scripts/compare.py``).

    task = tmm.tasks.make("copy", n=32)
    model = tmm.models.build(config)
    result = tmm.train.train(model, task, TrainConfig(steps=300), log=print)

What it does, in order, each step: set the learning rate (linear warm-up
from 0 to ``lr`` over ``warmup`` steps, then linear decay to
``min_lr_ratio * lr`` at ``steps``), draw a batch from the task (its own
seeded ``torch.Generator``, always on the CPU, so that every device and
world size sees the same data), ``loss = model(ids, labels=labels).loss``,
backward, clip the global gradient norm to ``grad_clip``, one AdamW step.

Numerical guard (``nan_guard``, on by default): the loss is checked before
backward, every gradient before clipping and every parameter after the
optimizer step; the first non-finite one stops training with
:class:`NonFiniteError`, whose message names the step and the tensor (the
loss, or the parameter by name, the first in ``model.named_parameters()``
order).

Checkpoints (``checkpoint_dir`` and ``checkpoint_every``): every N steps and
at the end, rank 0 writes the model, the optimizer, the step, every RNG
state (Python, NumPy, torch, the task's data stream) and the metrics so far
with :mod:`tmm.checkpointing` (crash-safe). With ``resume=True`` training
continues from the newest checkpoint there; on the CPU the continued run is
bitwise the uninterrupted one (same losses, same parameters). Restored rows
are in the result but are not passed to ``log`` again.

Distributed: when ``torch.distributed`` is initialised with more than one
process (``torchrun``), the model is wrapped in ``DistributedDataParallel``
(which works on the C++ models: their parameters are ordinary tensors to
autograd), every rank draws the same global batch of ``batch_size`` and
trains on its contiguous shard (``batch_size`` must divide by the world
size), each shard's loss weighted by its share of the labelled tokens so
that the averaged gradient is the global batch's. Only rank 0 evaluates,
logs, shows progress and writes checkpoints; rows are empty on other ranks.

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

from . import checkpointing

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
    nan_guard: bool = True  # stop at the first non-finite loss, gradient or updated parameter
    checkpoint_dir: Optional[str] = None  # where training checkpoints go (tmm.checkpointing)
    checkpoint_every: int = 0  # steps between checkpoints (and one at the end); 0 = none
    checkpoint_keep: int = 2  # checkpoints kept (the newest ones)
    resume: bool = False  # continue from checkpoint_dir's newest checkpoint, if there is one


@dataclasses.dataclass
class TrainResult:
    rows: list  # the logged rows, in order
    steps: int  # steps completed
    tokens: int
    wall_s: float  # time in training steps
    total_s: float  # everything, evaluation included
    flops_est: float
    stopped_early: Optional[str] = None  # why training stopped before cfg.steps (time budget), or None
    losses: list = dataclasses.field(default_factory=list)  # the training loss of every step (global batch)
    resumed_from: Optional[int] = None  # the checkpoint's step when the run was resumed

    @property
    def final(self):
        return self.rows[-1] if self.rows else None

    @property
    def best_acc(self):
        return max((r["eval_acc"] for r in self.rows), default=float("nan"))


class NonFiniteError(RuntimeError):
    """The loss, a gradient or a parameter became NaN or infinite. ``.step``
    is the step (1-based: the step being computed), ``.tensor`` what was
    found ("loss", "grad:<parameter name>", "grad_norm" or
    "param:<parameter name>") and ``.rows`` what was logged before."""

    def __init__(self, message, step, rows=None, tensor=None):
        super().__init__(message)
        self.step = step
        self.rows = rows or []
        self.tensor = tensor


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

    def __init__(self, total, desc="", enabled=True, initial=0):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.n, self.postfix = initial, {}
        self._initial = initial  # steps done before this bar (a resumed run): not in the rate
        self._tqdm = None
        self._start = self._last = time.monotonic()
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._tqdm = tqdm(total=total, desc=desc, unit="step", dynamic_ncols=True, leave=True, file=sys.stderr,
                              initial=initial)

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
        rate = (self.n - self._initial) / elapsed if elapsed > 0 else 0.0
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


def _first_nonfinite(named):
    """(name, bad elements, size) of the first tensor in `named` ((name,
    tensor or None) pairs) holding a NaN or an infinity, or None. One
    host-device sync when all are finite."""
    named = [(n, t) for n, t in named if t is not None]
    if not named:
        return None
    ok = torch.stack([torch.isfinite(t).all() for _, t in named])
    if bool(ok.all()):
        return None
    name, t = named[int((~ok).nonzero()[0, 0])]
    return name, int((~torch.isfinite(t)).sum()), t.numel()


def _distributed():
    """(rank, world size) of an initialised torch.distributed group, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# What must match for a checkpoint to continue this run (the rest, e.g. the
# time budget, threads or checkpoint cadence, may change between sessions).
_RESUME_KEYS = ("steps", "batch_size", "lr", "weight_decay", "betas", "warmup", "min_lr_ratio", "grad_clip", "seed",
                "eval_every", "eval_batches", "eval_batch_size")


def _check_resumable(path, saved, cfg):
    diff = []
    for k in _RESUME_KEYS:
        a, b = saved.get(k), getattr(cfg, k)
        if (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b):
            diff.append(f"{k}: checkpoint {a!r}, this run {b!r}")
    if diff:
        raise checkpointing.CheckpointError(
            f"resume: {path} was written by a run with other settings ({'; '.join(diff)})"
        )


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
    numerical guard finds a NaN or an infinity, and
    :class:`tmm.checkpointing.CheckpointError` when ``resume`` finds a
    checkpoint that does not fit this model or these settings."""
    if cfg.checkpoint_every < 0:
        raise ValueError(f"train: checkpoint_every must be >= 0, got {cfg.checkpoint_every}")
    if cfg.checkpoint_keep < 1:
        raise ValueError(f"train: checkpoint_keep must be >= 1, got {cfg.checkpoint_keep}")
    if (cfg.checkpoint_every or cfg.resume) and not cfg.checkpoint_dir:
        what = "resume=True" if cfg.resume else f"checkpoint_every={cfg.checkpoint_every}"
        raise ValueError(f"train: {what} needs checkpoint_dir (the folder of the checkpoints)")
    rank, world = _distributed()
    main = rank == 0
    if cfg.batch_size % world:
        raise ValueError(f"train: batch_size {cfg.batch_size} does not divide by the world size {world}")
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    from .tasks import IGNORE_INDEX

    device = next(model.parameters()).device
    params = model.num_parameters()
    config = model.config if hasattr(model, "config") else {}
    fpt = flops_per_token(config, params, task.seq_len)
    tokens_per_step = cfg.batch_size * task.seq_len

    # Batches come from CPU generators: the same data on every device and rank.
    gen = torch.Generator().manual_seed(cfg.seed)
    eval_set = []
    if main:
        eval_gen = torch.Generator().manual_seed(cfg.seed + 1_000_003)  # held out: another stream
        eval_bs = cfg.eval_batch_size or cfg.batch_size
        eval_batch = getattr(task, "eval_batch", None) or task.batch  # a held-out split when the task has one
        for _ in range(max(cfg.eval_batches, 1)):
            ids, labels = eval_batch(eval_bs, eval_gen)
            eval_set.append((ids.to(device), labels.to(device)))

    opt = _optimizer(model, cfg)
    model.train()
    rows, losses = [], []
    wall, elapsed_before = 0.0, 0.0
    loss_sum, loss_n = 0.0, 0
    step = 0
    stopped = None
    resumed_from = None
    if cfg.resume:
        path = checkpointing.latest(cfg.checkpoint_dir)
        if path is not None:
            _check_resumable(path, checkpointing.read_state(path).get("train_config") or {}, cfg)
            saved = checkpointing.load(path, model, opt, {"data": gen})
            step = resumed_from = saved["step"]
            rows, losses = saved["rows"], saved["losses"]
            loss_sum, loss_n = saved["loss_sum"], saved["loss_n"]
            wall, elapsed_before = saved["wall_s"], saved["total_s"]
            stopped = saved["stopped_early"]
            if not main:
                rows = []
    t_start = time.monotonic() - elapsed_before

    fwd = model
    if world > 1:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        # Broadcasts rank 0's parameters, then averages gradients in backward.
        fwd = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")
        per_rank = cfg.batch_size // world

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
        extra = getattr(task, "eval_metrics", None)  # e.g. lm's bits per byte
        if extra is not None:
            row.update(extra(eval_loss, eval_set))
        loss_sum, loss_n = 0.0, 0
        rows.append(row)
        if log is not None:
            log(row)
        return row

    def save_checkpoint():
        state = {
            "train_config": dataclasses.asdict(cfg),
            "rows": rows,
            "losses": losses,
            "loss_sum": loss_sum,
            "loss_n": loss_n,
            "wall_s": wall,
            "total_s": time.monotonic() - t_start,
            "stopped_early": stopped,
            "world_size": world,
        }
        checkpointing.save(cfg.checkpoint_dir, step, model, opt, state, {"data": gen}, keep=cfg.checkpoint_keep)

    def stop(message, tensor):
        raise NonFiniteError(f"training stopped at step {step + 1}: {message}", step + 1, rows, tensor)

    bar = ProgressBar(cfg.steps, cfg.desc, cfg.progress and main, initial=step)
    try:
        if resumed_from is None and main:
            emit(0)
        while step < cfg.steps and not stopped:
            t0 = time.monotonic()
            lr = _lr_at(step, cfg)
            for g in opt.param_groups:
                g["lr"] = lr
            ids, labels = task.batch(cfg.batch_size, gen)  # the global batch
            if world == 1:
                objective = reported = fwd(ids.to(device), labels=labels.to(device)).loss
            else:
                n_global = int((labels != IGNORE_INDEX).sum())
                ids, labels = (t[rank * per_rank:(rank + 1) * per_rank].to(device) for t in (ids, labels))
                n_local = int((labels != IGNORE_INDEX).sum())
                out = fwd(ids, labels=labels)
                # DDP averages gradients over the ranks: weighting each shard's mean loss by
                # its share of the labelled tokens makes that average the global batch's gradient.
                if n_local:
                    objective = out.loss * (n_local * world / n_global)
                else:  # no labelled token here: a zero loss that still joins DDP's reduction
                    objective = out.logits.sum() * 0.0
                reported = (objective.detach() / world).to(comm_device)
                dist.all_reduce(reported)  # the global batch's mean loss, the same on every rank
            opt.zero_grad(set_to_none=True)
            if cfg.nan_guard and not torch.isfinite(reported):
                stop(f"the loss is {reported.item()} (not finite)", "loss")
            objective.backward()
            # clip_grad_norm_ in two halves, so that the guard looks at the gradients
            # before clipping, which would spread one NaN to all of them. The global
            # norm is finite iff every gradient is (or it overflowed: checked below).
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.nn.utils.get_total_norm(grads)
            if cfg.nan_guard and not torch.isfinite(norm):
                bad = _first_nonfinite((n, p.grad) for n, p in model.named_parameters())
                if bad:
                    stop(f"the gradient of '{bad[0]}' is not finite ({bad[1]} of {bad[2]} elements; "
                         "the first such parameter in model.named_parameters() order)", f"grad:{bad[0]}")
                stop(f"the global gradient norm overflowed to {norm.item()} although every gradient is finite",
                     "grad_norm")
            torch.nn.utils.clip_grads_with_norm_(model.parameters(), cfg.grad_clip or math.inf, norm)
            opt.step()
            if cfg.nan_guard and not torch.isfinite(torch.nn.utils.get_total_norm(model.parameters())):
                bad = _first_nonfinite(model.named_parameters())
                if bad:
                    stop(f"the parameter '{bad[0]}' is not finite after the optimizer step ({bad[1]} of {bad[2]} "
                         f"elements; lr {lr:g})", f"param:{bad[0]}")
            step += 1
            wall += time.monotonic() - t0
            loss_value = reported.item()
            losses.append(loss_value)
            loss_sum += loss_value
            loss_n += 1
            over = cfg.time_budget_s is not None and time.monotonic() - t_start >= cfg.time_budget_s
            if world > 1 and cfg.time_budget_s is not None:
                flag = torch.tensor([int(over)], device=comm_device)
                dist.broadcast(flag, 0)  # rank 0's clock decides, so every rank stops at the same step
                over = bool(flag.item())
            if over and step < cfg.steps:
                stopped = f"time budget of {cfg.time_budget_s:.0f} s reached at step {step} of {cfg.steps}"
            if main and (step % cfg.eval_every == 0 or step == cfg.steps or stopped):
                row = emit(step)
                bar.update(1, loss=f"{row['eval_loss']:.3f}", acc=f"{row['eval_acc']:.3f}")
            else:
                bar.update(1)
            if main and cfg.checkpoint_every and (step % cfg.checkpoint_every == 0 or step == cfg.steps or stopped):
                save_checkpoint()
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
        losses=losses,
        resumed_from=resumed_from,
    )
