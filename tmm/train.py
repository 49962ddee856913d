"""The training loop of tmm's experiments and scripts/compare.py: AdamW with
warm-up and linear decay, a NaN guard, gradient accumulation, autocast, DDP
or FSDP2, periodic evaluation, and crash-safe checkpoints whose resume is
bitwise the uninterrupted run on the CPU. docs/training.md is the manual
(section 13: the loop step by step; section 7: the FLOPs estimate).

    result = tmm.train.train(model, tmm.tasks.make("copy", n=32), TrainConfig(steps=300), log=print)
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from typing import Callable, Optional

import torch

from . import train_checkpoints
from .distributed import rank_and_world_size
from .progress import Progress

__all__ = ["TrainConfig", "TrainResult", "NonFiniteError", "train", "evaluate", "flops_per_token"]


@dataclasses.dataclass
class TrainConfig:
    steps: int = 300
    batch_size: int = 16  # the global batch: windows per optimizer step, over all processes and micro-batches
    grad_accum: int = 1  # micro-batches per step on each process (batch_size divides by world size x grad_accum)
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
    checkpoint_dir: Optional[str] = None  # where training checkpoints go (tmm.train_checkpoints)
    checkpoint_every: int = 0  # steps between checkpoints (and one at the end); 0 = none
    checkpoint_keep: int = 2  # checkpoints kept (the newest ones)
    resume: bool = False  # continue from checkpoint_dir's newest checkpoint, if there is one
    precision: str = "float32"  # float32, or bfloat16 / float16 autocast (float16 with a GradScaler)
    compile: object = False  # torch.compile the (DDP-wrapped) model's forward: True, or a backend's name
    activation_checkpointing: bool = False  # recompute each block in backward
    fsdp: bool = False  # FSDP2 (fully_shard per block, then the model) instead of DDP
    peak_flops: Optional[float] = None  # one device's peak FLOP/s for the MFU column (None: the table's, if known)


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


def _rfft_flops(L: int) -> float:
    """One real FFT of the causal convolution's transform size (docs/ops.md:
    n = max(4, the next power of two >= 2L - 1)), at half a complex FFT's
    5 n log2 n FLOPs."""
    n = max(4, 1 << max(2 * L - 2, 0).bit_length())
    return 2.5 * n * math.log2(n)


def _mean_attended(L: int, window: int) -> float:
    """The mean number of keys a causal query attends to: min(t + 1, window) averaged over t < L."""
    w = window if 0 < window < L else L
    return (w * (w + 1) / 2 + (L - w) * w) / L


def flops_per_token(config: dict, num_params: int, seq_len: int) -> float:
    """Estimated training FLOPs per token (forward + backward); docs/training.md,
    section 7, has the formula."""
    arch = config.get("arch")
    d = int(config.get("d_model", 0))
    layers = int(config.get("n_layers", 0))
    L = int(seq_len)
    weights = num_params
    if not config.get("tie_embeddings") and "vocab_size" in config:
        weights -= int(config["vocab_size"]) * d  # the input embedding: a lookup, no FLOPs
    mix = 0.0
    if arch == "transformer":
        heads = int(config["n_heads"])
        head_dim = int(config.get("head_dim") or d // heads)
        mix = 4.0 * _mean_attended(L, int(config.get("window") or 0)) * heads * head_dim
    elif arch == "tmm":
        mixer = config.get("mixer", "toeplitz")
        G, K = int(config.get("heads", 0)) or 1, int(config.get("kernel", 1))
        N = int(config.get("max_len", L))
        if mixer == "masked":  # a full lower-triangular N x N matrix (and bias) per head
            vectors = G * N * N + G * N
            mix = (L + 1.0) * d
        else:
            n_mix = 2 if mixer == "expanded" else 1
            vectors = 0 if mixer == "frozen" else n_mix * (G * K * N + G * N)  # frozen: buffers, not parameters
            mix = n_mix * (2 * d + G * K) * _rfft_flops(L) / L
        weights -= layers * vectors
    elif arch == "hyena":
        mix = 3 * d * _rfft_flops(L) / L  # one filter per channel
    elif arch == "mamba2":
        d_inner = int(config.get("expand", 2)) * d
        N = int(config.get("d_state", 64))
        G = int(config.get("ngroups", 1))
        Q = min(int(config.get("chunk_size", 64)), L)
        mix = 2.0 * Q * (G * N + d_inner) + 4.0 * d_inner * N
    return 6.0 * weights + 3.0 * layers * mix


# Dense peak FLOP/s per GPU (vendor data sheets, no sparsity): (name fragment, 16-bit tensor cores, TF32, FP32).
# Matched in order against torch.cuda.get_device_name(); the first fragment found wins.
PEAK_FLOPS = (
    ("GH200", 989e12, 494.5e12, 67e12),
    ("H200", 989e12, 494.5e12, 67e12),
    ("H100 PCIe", 756e12, 378e12, 51e12),
    ("H100", 989e12, 494.5e12, 67e12),  # SXM
    ("B200", 2250e12, 1100e12, 80e12),
    ("A100", 312e12, 156e12, 19.5e12),
    ("L40S", 362e12, 183e12, 91.6e12),
    ("A10G", 70e12, 35e12, 31.2e12),
    ("L4", 121e12, 60e12, 30.3e12),
)
_AMP_DTYPES = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


def peak_flops(device, precision="float32"):
    """One device's peak FLOP/s for ``precision`` from :data:`PEAK_FLOPS`
    (float32: the TF32 figure when torch allows TF32 matmuls), or None (a
    CPU, or a GPU not in the table: give ``TrainConfig.peak_flops``)."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(device)
    for fragment, half, tf32, fp32 in PEAK_FLOPS:
        if fragment in name:
            if precision in ("bfloat16", "float16"):
                return half
            return tf32 if torch.backends.cuda.matmul.allow_tf32 else fp32
    return None


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
    named = [(n, t.to_local() if hasattr(t, "to_local") else t) for n, t in named if t is not None]
    if not named:
        return None
    ok = torch.stack([torch.isfinite(t).all() for _, t in named])
    if bool(ok.all()):
        return None
    name, t = named[int((~ok).nonzero()[0, 0])]
    return name, int((~torch.isfinite(t)).sum()), t.numel()


def _full(t):
    """A DTensor's full value (FSDP2), else the tensor."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _enable_activation_checkpointing(model):
    """Turns on per-block recomputation in backward; ValueError for a model without it."""
    if not hasattr(model, "activation_checkpointing"):
        raise ValueError(f"train: activation_checkpointing is not available for a {type(model).__name__}: it has no "
                         "per-block recomputation (tmm.nn.LanguageModel's activation_checkpointing)")
    model.activation_checkpointing = True


def _check_shardable(model):
    if not hasattr(model, "blocks"):
        raise ValueError(f"train: fsdp (FSDP2 fully_shard) is not available for a {type(model).__name__}: it has no "
                         ".blocks to shard")


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
        raise train_checkpoints.CheckpointError(
            f"resume: {path} was written by a run with other settings ({'; '.join(diff)})"
        )


@torch.no_grad()
def evaluate(model, task, eval_set, autocast=None):
    """(mean loss, mean accuracy) over a list of (ids, labels) batches
    (``autocast``: a context manager factory around each forward)."""
    was_training = model.training
    model.eval()
    losses, accs = [], []
    try:
        for ids, labels in eval_set:
            with (autocast or contextlib.nullcontext)():
                out = model(ids, labels=labels, shift_labels=False)
            losses.append(float(out.loss))
            accs.append(float(task.accuracy(out.logits, labels)))
    finally:
        model.train(was_training)
    return sum(losses) / len(losses), sum(accs) / len(accs)


def _check_config(cfg):
    if cfg.checkpoint_every < 0:
        raise ValueError(f"train: checkpoint_every must be >= 0, got {cfg.checkpoint_every}")
    if isinstance(cfg.grad_accum, bool) or not isinstance(cfg.grad_accum, int) or cfg.grad_accum < 1:
        raise ValueError(f"train: grad_accum must be an int >= 1 (micro-batches per step), got {cfg.grad_accum!r}")
    if cfg.checkpoint_keep < 1:
        raise ValueError(f"train: checkpoint_keep must be >= 1, got {cfg.checkpoint_keep}")
    if cfg.precision not in _AMP_DTYPES:
        raise ValueError(f"train: precision must be one of {', '.join(_AMP_DTYPES)}, got {cfg.precision!r}")
    if cfg.peak_flops is not None and not cfg.peak_flops > 0:
        raise ValueError(f"train: peak_flops must be > 0 (FLOP/s of one device), got {cfg.peak_flops!r}")
    if (cfg.checkpoint_every or cfg.resume) and not cfg.checkpoint_dir:
        what = "resume=True" if cfg.resume else f"checkpoint_every={cfg.checkpoint_every}"
        raise ValueError(f"train: {what} needs checkpoint_dir (the folder of the checkpoints)")


class _Training:
    """The state of one :func:`train` call and its stages: set-up (here),
    :meth:`step`, :meth:`evaluate`, :meth:`save_checkpoint`, :meth:`result`."""

    def __init__(self, model, task, cfg, log):
        self.model, self.task, self.cfg, self.log = model, task, cfg, log
        self.rank, self.world = rank_and_world_size()
        self.main = self.rank == 0
        if cfg.batch_size % (self.world * cfg.grad_accum):
            raise ValueError(f"train: batch_size {cfg.batch_size} does not divide into {cfg.grad_accum} micro-batches "
                             f"(grad_accum) on each of {self.world} processes (the world size)")
        if cfg.threads:
            torch.set_num_threads(int(cfg.threads))
        self.device = next(model.parameters()).device
        config = model.config if hasattr(model, "config") else {}
        self.fpt = flops_per_token(config, model.num_parameters(), task.seq_len)
        self.tokens_per_step = cfg.batch_size * task.seq_len
        self.amp_dtype = _AMP_DTYPES[cfg.precision]
        self.scaler = torch.amp.GradScaler(self.device.type) if cfg.precision == "float16" else None
        self.peak = cfg.peak_flops or peak_flops(self.device, cfg.precision)
        if cfg.activation_checkpointing:
            _enable_activation_checkpointing(model)
        self.sharded = cfg.fsdp and self.world > 1
        if cfg.fsdp:
            _check_shardable(model)
        if self.sharded:
            self._shard()
        # Batches come from CPU generators: the same data on every device and rank.
        self.gen = torch.Generator().manual_seed(cfg.seed)
        # Every rank evaluates a sharded model (its forward gathers parameters from all); rank 0 logs.
        self.eval_set = self._eval_set() if self.main or self.sharded else []
        self.opt = _optimizer(model, cfg)
        model.train()
        self.rows, self.losses = [], []
        self.wall, elapsed_before = 0.0, 0.0
        self.loss_sum, self.loss_n = 0.0, 0
        self.step_count = 0
        # Windows of a positioned stream (a task with batch_at) read so far, by all ranks.
        self.streamed = hasattr(task, "batch_at")
        self.data_position = 0
        self.stopped = None
        self.resumed_from = None
        if cfg.resume:
            elapsed_before = self._resume()
        self.t_start = time.monotonic() - elapsed_before
        self.mark = (self.step_count, self.wall)  # where the current logging interval began
        self.fwd = model
        if self.world > 1 and not self.sharded:
            self._wrap_ddp()
        if cfg.compile:  # True: the default backend (inductor); a str names one
            self.fwd = torch.compile(self.fwd, **({"backend": cfg.compile} if isinstance(cfg.compile, str) else {}))

    def autocast(self):
        """The forward's autocast context (a no-op in float32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def _backward(self, objective):
        (self.scaler.scale(objective) if self.scaler is not None else objective).backward()

    def _shard(self):
        """FSDP2: fully_shard each block, then the model (gradients reduce-scattered, averaged over ranks)."""
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        for block in self.model.blocks:
            fully_shard(block)
        fully_shard(self.model)
        self.comm_device = self.device if dist.get_backend() == "nccl" else torch.device("cpu")
        self.per_rank = self.cfg.batch_size // self.world

    def _eval_set(self):
        """The fixed held-out set: another seeded stream, the task's held-out split when it has one."""
        cfg = self.cfg
        eval_gen = torch.Generator().manual_seed(cfg.seed + 1_000_003)
        eval_bs = cfg.eval_batch_size or cfg.batch_size
        eval_batch = getattr(self.task, "eval_batch", None) or self.task.batch
        out = []
        for _ in range(max(cfg.eval_batches, 1)):
            ids, labels = eval_batch(eval_bs, eval_gen)
            out.append((ids.to(self.device), labels.to(self.device)))
        return out

    def _resume(self):
        """Loads the newest checkpoint, if any; returns the time the run had already taken."""
        path = train_checkpoints.latest(self.cfg.checkpoint_dir)
        if path is None:
            return 0.0
        _check_resumable(path, train_checkpoints.read_state(path).get("train_config") or {}, self.cfg)
        saved = train_checkpoints.load(path, self.model, self.opt, {"data": self.gen})
        if self.scaler is not None and saved.get("grad_scaler"):
            self.scaler.load_state_dict(saved["grad_scaler"])
        self.step_count = self.resumed_from = saved["step"]
        self.rows, self.losses = saved["rows"], saved["losses"]
        self.loss_sum, self.loss_n = saved["loss_sum"], saved["loss_n"]
        self.wall = saved["wall_s"]
        self.stopped = saved["stopped_early"]
        if self.streamed:
            if "data_position" not in saved:
                raise train_checkpoints.CheckpointError(f"resume: {path} has no data_position (the stream position "
                                                        f"of the task {self.task.name!r})")
            self.data_position = saved["data_position"]
        if not self.main:
            self.rows = []
        return saved["total_s"]

    def _wrap_ddp(self):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        # Broadcasts rank 0's parameters, then averages gradients in backward.
        device = self.device
        self.fwd = self.ddp = DistributedDataParallel(self.model,
                                                      device_ids=[device.index] if device.type == "cuda" else None)
        self.comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")
        self.per_rank = self.cfg.batch_size // self.world

    def _ddp(self):
        return self.ddp

    def _stop(self, message, tensor):
        step = self.step_count + 1
        raise NonFiniteError(f"training stopped at step {step}: {message}", step, self.rows, tensor)

    def _check_loss(self, loss):
        if self.cfg.nan_guard and not torch.isfinite(loss):
            self._stop(f"the loss is {loss.item()} (not finite)", "loss")

    def _forward_backward(self, ids, labels, local=False):
        """Forward and backward over this rank's rows of the global batch, in
        ``grad_accum`` micro-batches; returns the global batch's mean loss (a
        tensor, the same on every rank). ``local``: ids and labels are this
        rank's rows already, not the global batch."""
        world, micro = self.world, self.cfg.grad_accum
        if world == 1 and micro == 1:  # the plain step
            with self.autocast():
                loss = self.fwd(ids.to(self.device), labels=labels.to(self.device), shift_labels=False).loss
            self._check_loss(loss)
            self._backward(loss)
            return loss.detach()
        import torch.distributed as dist

        from .tasks import IGNORE_INDEX

        if local:
            count = (labels != IGNORE_INDEX).sum().to(self.comm_device if world > 1 else "cpu")
            if world > 1:
                dist.all_reduce(count)
            n_global = int(count)
        else:
            n_global = int((labels != IGNORE_INDEX).sum())
            if world > 1:
                rank, per_rank = self.rank, self.per_rank
                ids, labels = (t[rank * per_rank:(rank + 1) * per_rank] for t in (ids, labels))
        ids, labels = ids.to(self.device), labels.to(self.device)
        total = None
        for j, (x, y) in enumerate(zip(ids.chunk(micro), labels.chunk(micro))):
            n = int((y != IGNORE_INDEX).sum())
            # DDP (and FSDP2) reduce gradients at the last micro-batch's backward only.
            sync = world == 1 or j == micro - 1
            if self.sharded:
                self.model.set_requires_gradient_sync(sync)
            with contextlib.nullcontext() if sync or self.sharded else self._ddp().no_sync(), self.autocast():
                out = self.fwd(x, labels=y, shift_labels=False)
                # Each micro-batch's mean loss weighted by its share of the global batch's labelled
                # tokens (times the world size: DDP averages over the ranks): the gradients sum to
                # the global batch's mean loss's.
                if n:
                    objective = out.loss * (n * world / n_global)
                else:  # no labelled token here: a zero loss that still joins DDP's reduction
                    objective = out.logits.sum() * 0.0
                reported = (objective.detach() / world).to(self.comm_device if world > 1 else objective.device)
                if world > 1:
                    dist.all_reduce(reported)  # the same on every rank, so every rank stops alike
            self._check_loss(reported)
            with contextlib.nullcontext() if sync or self.sharded else self._ddp().no_sync():
                self._backward(objective)
            total = reported if total is None else total + reported
        return total

    def _clip_guarded(self):
        """clip_grad_norm_ in two halves, so that the guard looks at the gradients
        before clipping, which would spread one NaN to all of them. The global
        norm is finite iff every gradient is (or it overflowed: checked here)."""
        model, cfg = self.model, self.cfg
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads)  # a DTensor when sharded: clipping takes it as it is
        # float16: an overflow is the GradScaler's to handle (the step is skipped, the scale lowered).
        if cfg.nan_guard and self.scaler is None and not torch.isfinite(_full(norm)):
            bad = _first_nonfinite((n, p.grad) for n, p in model.named_parameters())
            if bad:
                self._stop(f"the gradient of '{bad[0]}' is not finite ({bad[1]} of {bad[2]} elements; "
                           "the first such parameter in model.named_parameters() order)", f"grad:{bad[0]}")
            self._stop(f"the global gradient norm overflowed to {_full(norm).item()} although every gradient is finite",
                       "grad_norm")
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), cfg.grad_clip or math.inf, norm)

    def _out_of_time(self):
        cfg = self.cfg
        over = cfg.time_budget_s is not None and time.monotonic() - self.t_start >= cfg.time_budget_s
        if self.world > 1 and cfg.time_budget_s is not None:
            import torch.distributed as dist

            flag = torch.tensor([int(over)], device=self.comm_device)
            dist.broadcast(flag, 0)  # rank 0's clock decides, so every rank stops at the same step
            over = bool(flag.item())
        return over

    def step(self):
        """One optimizer step on the next global batch, guarded."""
        cfg, model, opt = self.cfg, self.model, self.opt
        t0 = time.monotonic()
        lr = _lr_at(self.step_count, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        if self.streamed:  # this rank's rows of the global batch at the stream position
            ids, labels = self.task.batch_at(self.data_position, cfg.batch_size, self.rank, self.world)
            self.data_position += cfg.batch_size
        else:
            ids, labels = self.task.batch(cfg.batch_size, self.gen)  # the global batch
        opt.zero_grad(set_to_none=True)
        reported = self._forward_backward(ids, labels, local=self.streamed)
        self._clip_guarded()
        if self.scaler is not None:
            self.scaler.step(opt)
            self.scaler.update()
        else:
            opt.step()
        if cfg.nan_guard and not torch.isfinite(_full(torch.nn.utils.get_total_norm(model.parameters()))):
            bad = _first_nonfinite(model.named_parameters())
            if bad:
                self._stop(f"the parameter '{bad[0]}' is not finite after the optimizer step ({bad[1]} of {bad[2]} "
                           f"elements; lr {lr:g})", f"param:{bad[0]}")
        self.step_count += 1
        self.wall += time.monotonic() - t0
        loss_value = reported.item()
        self.losses.append(loss_value)
        self.loss_sum += loss_value
        self.loss_n += 1
        if self._out_of_time() and self.step_count < cfg.steps:
            self.stopped = (f"time budget of {cfg.time_budget_s:.0f} s reached at step {self.step_count} "
                            f"of {cfg.steps}")

    def evaluate(self):
        """The evaluation row of the current step, logged (rank 0 only)."""
        step = self.step_count
        eval_loss, eval_acc = evaluate(self.fwd if self.sharded else self.model, self.task, self.eval_set,
                                       self.autocast)
        steps0, wall0 = self.mark
        self.mark = (step, self.wall)
        interval = self.wall - wall0
        tps = (step - steps0) * self.tokens_per_step / interval if interval > 0 and step > steps0 else None
        row = {
            "step": step,
            "tokens": step * self.tokens_per_step,
            "wall_s": round(self.wall, 4),
            "train_loss": (self.loss_sum / self.loss_n) if self.loss_n else None,
            "eval_loss": eval_loss,
            "eval_acc": eval_acc,
            "flops_est": self.fpt * step * self.tokens_per_step,
            "lr": self.opt.param_groups[0]["lr"],
            "tokens_per_s": tps,
            "mfu": tps * self.fpt / (self.peak * self.world) if tps is not None and self.peak else None,
        }
        extra = getattr(self.task, "eval_metrics", None)  # e.g. lm's bits per byte
        if extra is not None:
            row.update(extra(eval_loss, self.eval_set))
        self.loss_sum, self.loss_n = 0.0, 0
        if not self.main:  # a sharded model's other ranks evaluate with rank 0, which alone logs
            return row
        self.rows.append(row)
        if self.log is not None:
            self.log(row)
        return row

    def save_checkpoint(self):
        state = {
            "train_config": dataclasses.asdict(self.cfg),
            "rows": self.rows,
            "losses": self.losses,
            "loss_sum": self.loss_sum,
            "loss_n": self.loss_n,
            "wall_s": self.wall,
            "total_s": time.monotonic() - self.t_start,
            "stopped_early": self.stopped,
            "world_size": self.world,
        }
        if self.streamed:
            state["data_position"] = self.data_position
        if self.scaler is not None:
            state["grad_scaler"] = self.scaler.state_dict()
        tokenizer_json = getattr(getattr(self.task, "tokenizer", None), "json_text", None)  # None: bytes, or no text
        train_checkpoints.save(self.cfg.checkpoint_dir, self.step_count, self.model, self.opt, state,
                               {"data": self.gen}, keep=self.cfg.checkpoint_keep, sharded=self.sharded,
                               files={"tokenizer.json": tokenizer_json} if tokenizer_json else None)

    def due(self, every):
        """Whether this step gets an evaluation (every = eval_every) or a checkpoint."""
        return self.step_count % every == 0 or self.step_count == self.cfg.steps or bool(self.stopped)

    def result(self):
        step = self.step_count
        return TrainResult(
            rows=self.rows,
            steps=step,
            tokens=step * self.tokens_per_step,
            wall_s=self.wall,
            total_s=time.monotonic() - self.t_start,
            flops_est=self.fpt * step * self.tokens_per_step,
            stopped_early=self.stopped,
            losses=self.losses,
            resumed_from=self.resumed_from,
        )


def train(model, task, cfg: TrainConfig, log: Optional[Callable[[dict], None]] = None) -> TrainResult:
    """Trains `model` on `task` for cfg.steps steps (or until cfg.time_budget_s);
    returns a :class:`TrainResult`. Raises :class:`NonFiniteError` when the
    numerical guard finds a NaN or an infinity, and
    :class:`tmm.train_checkpoints.CheckpointError` when ``resume`` finds a
    checkpoint that does not fit this model or these settings."""
    _check_config(cfg)
    run = _Training(model, task, cfg, log)
    bar = Progress(cfg.steps, cfg.desc, unit="step", initial=run.step_count, enabled=cfg.progress and run.main)
    try:
        evaluates = run.main or run.sharded
        if run.resumed_from is None and evaluates:
            run.evaluate()
        while run.step_count < cfg.steps and not run.stopped:
            run.step()
            if evaluates and run.due(cfg.eval_every):
                row = run.evaluate()
                bar.update(1, loss=f"{row['eval_loss']:.3f}", acc=f"{row['eval_acc']:.3f}")
            else:
                bar.update(1)
            if (run.main or run.sharded) and cfg.checkpoint_every and run.due(cfg.checkpoint_every):
                run.save_checkpoint()
    finally:
        bar.close()
    return run.result()
