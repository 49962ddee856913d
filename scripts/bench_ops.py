#!/usr/bin/env python3
"""Operator benchmark: tmm.ops.causal_toeplitz against its two references.

Compares, side by side in one run,

    ours   tmm.ops.causal_toeplitz                  (the C++/CUDA operator)
    fft    tmm.ops.reference.causal_toeplitz_fft    (the torch.fft composition)
    dense  tmm.ops.reference.causal_toeplitz_dense  (the dense masked matmul)

on x: B x L x C, weight: G x K x L (N = L), bias: G x L, in two modes:

    fwd      y = op(x, weight, bias) under torch.no_grad() (inference).
    fwd+bwd  y = op(...) then torch.autograd.grad(y, (x, weight, bias), grad_y)
             with a fixed random grad_y: all three gradients are computed.

Usage (from the repository root; the extension must be built):

    python scripts/bench_ops.py                 # the issue's full grid
    python scripts/bench_ops.py --quick         # ~1-2 min on 2 cores (run.sh)
    python scripts/bench_ops.py --lengths 1024,4096 --gk "1,1 C,1" \
        --impls ours,fft --modes fwdbwd --out /tmp/bench

`--gk` takes "G,K" pairs separated by spaces; G may be written `C` for one
kernel per channel (G = channels, Hyena's layout). Defaults: L in {256, 1024,
4096, 16384}, B = 4, C = 512, (G, K) in {(1,1), (8,1), (C,1), (1,8)},
float32, 2 torch threads. `--quick`: L in {256, 1024, 4096}, B = 2, C = 128,
fewer repeats and a smaller per-cell time budget; any flag given explicitly
overrides the quick value.

Method
------
Correctness first: for every (G, K, L) the op is run once forward and
backward next to the fft reference (same inputs, same dtype) and the relative
errors ||a - b|| / ||b|| of y, grad_x, grad_weight and grad_bias go to
results.json (`checks`); a config above the dtype's tolerance is reported as
a MISMATCH (the timings are still taken).

Timing: inputs (and grad_y, and the leaf tensors that require grad) are
created before any timing. Each cell runs `--warmup` untimed calls, then
`--repeats` calls each timed alone with time.perf_counter (bracketed by
torch.cuda.synchronize() on CUDA), with Python's garbage collector paused.
The table shows the median and, in parentheses, the minimum; every raw
timing is in results.json.

Peak memory (CPU), measured on one extra untimed call after the timed ones,
in two ways (both are in results.json; the table shows the first):

  alloc  torch.profiler with profile_memory=True records every allocation
         and free made through c10's CPU allocator (any tensor created by
         torch or by the extension). The running sum of those events, in time
         order, is the live extra bytes; its maximum is the peak. Inputs
         allocated before the call do not count; the outputs it returns do.
         Blind to memory a library takes by itself (MKL FFT workspaces,
         std::vector scratch inside a kernel) and, possibly, to allocations
         made on worker threads.
  rss    the resident-set growth of this process: glibc's malloc_trim(0)
         returns freed heap pages to the OS, /proc/self/clear_refs ("5")
         resets the peak RSS, and peak = VmHWM after the call - VmRSS before.
         Sees every byte touched (any allocator, any thread), at page
         granularity, with some noise (thread stacks, lazily loaded code).
         Absent where /proc/self/clear_refs cannot be written.

On CUDA the peak is torch.cuda.max_memory_allocated() minus the allocated
bytes before the call.

Guards: the dense reference builds a G x L x L matrix per tap and keeps the
K of them for backward, so a dense cell is skipped when G*K*L*L*itemsize
exceeds `--dense-max-gib` (2 GiB) or L exceeds `--dense-max-len` (4096).
Every cell has a time budget (`--cell-budget` seconds, 60; quick 8): the
cost of one call is predicted from the same implementation at the previous
length (scaled by L^2 for dense, L^1.2 otherwise) and then measured on the
first warm-up call. A cell that cannot fit one warm-up, one timed call and
the memory calls is skipped ("skipped (time)"): dense already on the
prediction, ours and fft (what the targets compare) only on the prediction
exceeding 3x the budget or on the measured first call. A cell that fits
fewer than `--repeats` timed calls gets fewer (the count is recorded).

CPU timings need a quiet machine: the run measures the CPU time other
processes used during it (/proc/stat minus this process' own time), warns
when it exceeds 0.25 cores, and marks with `*` each cell whose timed calls
shared the machine that way.

Outputs (in `--out`, default bench/results/ops-<timestamp>/, each written
atomically through a temporary file and os.replace):

  results.json  config, environment (torch version, threads, machine, git
                revision), checks, every cell's raw timings and peaks, the
                target verdicts
  table.md      the markdown table and the target verdicts
  plot.png      time vs L per (G, K), log-log, one line per implementation,
                one row of panels per mode (if matplotlib is importable)

The targets checked (printed as a PASS/MISS list):

  1. fwd+bwd: ours >= 3x faster than the fft composition for L >= 1024, G = 1
  2. ours never slower than the best alternative that ran (any cell)
  3. ours' peak memory <= 1/3 of the fft composition's (any cell; alloc and
     rss verdicts listed separately)
  4. ours' fwd+bwd time grows <= 2.5x per doubling of L from 1024 to 16384
     (per (G, K); measured lengths that are not one doubling apart are
     compared per doubling: (t2/t1) ** (1 / log2(L2/L1)))
"""

from __future__ import annotations

import os

# The profiler's Kineto backend logs an error on a CUDA build of torch without
# a GPU; keep it quiet (must be set before torch is imported).
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

import argparse
import contextlib
import ctypes
import datetime
import gc
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import warnings

import torch

# "Profiler clears events at the end of each cycle": expected, one cycle each.
warnings.filterwarnings("ignore", message=".*Profiler clears events.*")

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MiB = float(1 << 20)
GiB = float(1 << 30)

IMPL_NAMES = ("ours", "fft", "dense")
MODE_ALIASES = {
    "fwd": "fwd", "forward": "fwd", "f": "fwd",
    "fwdbwd": "fwdbwd", "fwd+bwd": "fwdbwd", "forward+backward": "fwdbwd",
    "fb": "fwdbwd", "bwd": "fwdbwd",
}
MODE_LABEL = {"fwd": "fwd", "fwdbwd": "fwd+bwd"}
DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}
# Relative (norm-wise) error above which ours is reported as not matching fft.
CHECK_TOL = {torch.float64: 1e-9, torch.float32: 1e-4,
             torch.bfloat16: 3e-2, torch.float16: 1e-2}

FULL_DEFAULTS = dict(lengths="256,1024,4096,16384", batch=4, channels=512,
                     repeats=10, warmup=2, cell_budget=60.0)
QUICK_DEFAULTS = dict(lengths="256,1024,4096", batch=2, channels=128,
                      repeats=5, warmup=1, cell_budget=8.0)
DEFAULT_GK = "1,1 8,1 C,1 1,8"


# --------------------------------------------------------------------------
# command line


def _split_list(text: str) -> List[str]:
    return [t for t in text.replace(",", " ").split() if t]


def parse_gk(text: str, channels: int) -> List[Tuple[int, int]]:
    pairs = []
    for item in text.replace(";", " ").split():
        parts = item.replace("x", ",").replace(":", ",").split(",")
        if len(parts) != 2:
            raise argparse.ArgumentTypeError(f"bad --gk entry {item!r}: want G,K")
        g = channels if parts[0].strip().upper() == "C" else int(parts[0])
        pairs.append((g, int(parts[1])))
    return pairs


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark tmm.ops.causal_toeplitz against the torch.fft "
                    "composition and the dense masked matmul.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small grid for scripts/run.sh (~1-2 min on 2 cores)")
    p.add_argument("--lengths", default=None, help="sequence lengths L, e.g. 256,1024")
    p.add_argument("--batch", type=int, default=None, help="batch size B")
    p.add_argument("--channels", type=int, default=None, help="channels C")
    p.add_argument("--gk", default=DEFAULT_GK,
                   help='(G,K) pairs, e.g. "1,1 8,1 C,1 1,8" (C = channels)')
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    p.add_argument("--repeats", type=int, default=None, help="timed calls per cell")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls per cell (at least 1 is made)")
    p.add_argument("--modes", default="fwd,fwdbwd", help="fwd, fwdbwd (or fwd+bwd)")
    p.add_argument("--impls", default="ours,fft,dense", help="ours, fft, dense")
    p.add_argument("--cell-budget", type=float, default=None,
                   help="seconds one cell may take (default 60, quick 8)")
    p.add_argument("--dense-max-gib", type=float, default=2.0,
                   help="skip dense when G*K*L*L*itemsize exceeds this")
    p.add_argument("--dense-max-len", type=int, default=4096,
                   help="skip dense when L exceeds this")
    p.add_argument("--cpu-algorithm", default=None,
                   help="force ours' CPU path for the whole run (tmm.ops.cpu_algorithm: "
                        "auto, direct, fft); default: the op's own choice")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory calls")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None,
                   help="output folder (default bench/results/ops-<timestamp>/)")
    args = p.parse_args(argv)

    base = QUICK_DEFAULTS if args.quick else FULL_DEFAULTS
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        args.lengths = [int(t) for t in _split_list(str(args.lengths))]
        args.gk = parse_gk(args.gk, args.channels)
    except (ValueError, argparse.ArgumentTypeError) as e:
        p.error(f"bad --lengths or --gk: {e}")
    try:
        args.modes = list(dict.fromkeys(MODE_ALIASES[m.lower()] for m in _split_list(args.modes)))
    except KeyError as e:
        p.error(f"unknown mode {e.args[0]!r} (use fwd, fwdbwd)")
    args.impls = [i.lower() for i in _split_list(args.impls)]
    for i in args.impls:
        if i not in IMPL_NAMES:
            p.error(f"unknown impl {i!r} (use {', '.join(IMPL_NAMES)})")
    args.impls = [i for i in IMPL_NAMES if i in args.impls]  # fixed column order
    if not args.lengths or not args.gk or not args.modes or not args.impls:
        p.error("empty --lengths, --gk, --modes or --impls")
    if args.repeats < 1 or args.warmup < 0:
        p.error("--repeats must be >= 1 and --warmup >= 0")
    if args.out is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args.out = str(REPO_ROOT / "bench" / "results" / f"ops-{stamp}")
    return args


# --------------------------------------------------------------------------
# implementations


def _load_reference():
    """tmm.ops.reference; when the package cannot be imported (extension not
    built) the file is pure PyTorch, so load it from the checkout by path."""
    try:
        from tmm.ops import reference
        return reference, None
    except Exception as e:  # noqa: BLE001 - any import failure
        first = e
    path = REPO_ROOT / "tmm" / "ops" / "reference.py"
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("_tmm_ops_reference", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module, f"tmm not importable ({first!r}); references loaded from {path}"
    except Exception as e:  # noqa: BLE001
        raise SystemExit(f"bench_ops: cannot import tmm.ops.reference: {first!r}; "
                         f"loading {path} failed too: {e!r}")


def load_impls(names: Sequence[str]) -> Tuple[Dict[str, Callable], Optional[str]]:
    """name -> callable(x, weight, bias) (fft always: ours is checked against
    it), and a note when the references came from the file."""
    reference, note = _load_reference()
    impls: Dict[str, Callable] = {"fft": reference.causal_toeplitz_fft,
                                  "dense": reference.causal_toeplitz_dense}
    if "ours" in names:
        try:
            import tmm.ops as tmm_ops
            impls["ours"] = getattr(tmm_ops, "causal_toeplitz")
        except Exception as e:  # noqa: BLE001
            raise SystemExit(
                f"bench_ops: tmm.ops.causal_toeplitz is not available ({e!r}).\n"
                "Build the extension first (scripts/run.sh or pip install -e .), "
                "or pass --impls fft,dense.")
    return impls, note


# --------------------------------------------------------------------------
# measurement helpers


class Device:
    def __init__(self, spec: str):
        self.device = torch.device(spec)
        self.is_cuda = self.device.type == "cuda"
        if self.is_cuda and not torch.cuda.is_available():
            raise SystemExit("bench_ops: --device cuda but torch.cuda is not available")

    def sync(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)


class RssProbe:
    """Peak resident-set growth of this process over one call (Linux/glibc)."""

    def __init__(self) -> None:
        self.ok = False
        self._trim = None
        try:
            libc = ctypes.CDLL("libc.so.6")
            self._trim = libc.malloc_trim
            self._trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            self._trim = None
        try:
            self._reset_peak()
            self._read_kib("VmHWM")
            self.ok = True
        except OSError:
            self.ok = False

    @staticmethod
    def _reset_peak() -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    @staticmethod
    def _read_kib(field: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise OSError(f"{field} not in /proc/self/status")

    def measure(self, fn: Callable[[], Any]) -> Optional[int]:
        if not self.ok:
            return None
        gc.collect()
        if self._trim is not None:
            self._trim(0)
        before = self._read_kib("VmRSS")
        self._reset_peak()
        out = fn()
        peak = self._read_kib("VmHWM")
        del out
        return max(0, peak - before) * 1024


class CpuLoad:
    """CPU used by *other* processes over an interval, in cores: the busy
    time /proc/stat reports for the whole machine minus this process' own
    user+system time, divided by the wall time. A busy machine (a build, a
    test run) makes CPU timings unreliable; the run reports it."""

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.ok = self._busy() is not None

    @staticmethod
    def _busy() -> Optional[int]:
        try:
            with open("/proc/stat") as f:
                vals = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
        guest = sum(vals[8:10]) if len(vals) > 9 else 0  # already in user/nice
        return sum(vals) - idle - guest

    def mark(self) -> Optional[Tuple[float, float, int]]:
        if not self.ok:
            return None
        t = os.times()
        return (time.perf_counter(), t.user + t.system, self._busy())

    def others(self, start: Optional[Tuple[float, float, int]],
               min_wall: float = 0.2) -> Optional[float]:
        end = self.mark()
        if start is None or end is None or end[0] - start[0] < min_wall:
            return None
        busy = (end[2] - start[2]) / self.tick
        own = end[1] - start[1]
        return round(max(0.0, (busy - own) / (end[0] - start[0])), 2)


CPU_LOAD = CpuLoad()
BUSY_CORES = 0.25  # other processes' load above which a cell is marked


def peak_alloc_bytes(fn: Callable[[], Any], dev: Device) -> Optional[int]:
    """Peak live bytes allocated during fn() (see the module docstring)."""
    gc.collect()
    if dev.is_cuda:
        dev.sync()
        torch.cuda.reset_peak_memory_stats(dev.device)
        base = torch.cuda.memory_allocated(dev.device)
        out = fn()
        dev.sync()
        peak = torch.cuda.max_memory_allocated(dev.device) - base
        del out
        return max(0, int(peak))
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 record_shapes=False, with_stack=False) as prof:
        out = fn()
        del out
    events = []
    for e in prof.profiler.kineto_results.events():
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU:
            events.append((e.start_ns(), int(e.nbytes())))
    events.sort(key=lambda a: a[0])
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def make_inputs(B: int, L: int, C: int, G: int, K: int, dtype: torch.dtype,
                dev: Device, seed: int) -> Dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + 7919 * L + 131 * G + K)
    x = torch.randn(B, L, C, generator=gen)
    weight = torch.randn(G, K, L, generator=gen) * math.sqrt(2.0 / L)  # Kaiming, fan-in L
    bias = torch.randn(G, L, generator=gen) * 0.1
    grad_y = torch.randn(B, L, C, generator=gen)
    out = {"x": x, "weight": weight, "bias": bias, "grad_y": grad_y}
    return {k: v.to(device=dev.device, dtype=dtype).contiguous() for k, v in out.items()}


def make_call(fn: Callable, mode: str, inp: Dict[str, torch.Tensor]) -> Callable[[], Any]:
    """A zero-argument closure running one call of `mode`; inputs pre-made."""
    x, w, b = inp["x"], inp["weight"], inp["bias"]
    if mode == "fwd":
        def call():
            with torch.no_grad():
                return fn(x, w, b)
        return call
    xg = x.detach().clone().requires_grad_(True)
    wg = w.detach().clone().requires_grad_(True)
    bg = b.detach().clone().requires_grad_(True)
    gy = inp["grad_y"]

    def call():
        y = fn(xg, wg, bg)
        return torch.autograd.grad(y, (xg, wg, bg), gy)
    return call


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a = a.detach().double()
    b = b.detach().double()
    denom = b.norm().item()
    diff = (a - b).norm().item()
    return diff / denom if denom > 0 else diff


def check_config(impls: Dict[str, Callable], inp: Dict[str, torch.Tensor],
                 dtype: torch.dtype) -> Dict[str, Any]:
    """ours vs fft, forward and the three gradients, same inputs and dtype."""
    res: Dict[str, Any] = {}
    outs = {}
    for name in ("ours", "fft"):
        xg = inp["x"].detach().clone().requires_grad_(True)
        wg = inp["weight"].detach().clone().requires_grad_(True)
        bg = inp["bias"].detach().clone().requires_grad_(True)
        y = impls[name](xg, wg, bg)
        g = torch.autograd.grad(y, (xg, wg, bg), inp["grad_y"])
        outs[name] = (y,) + tuple(g)
    for key, a, b in zip(("y", "grad_x", "grad_weight", "grad_bias"), outs["ours"], outs["fft"]):
        if a.shape != b.shape:
            res[key] = f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
        else:
            res[key] = rel_err(a, b)
    tol = CHECK_TOL.get(dtype, 1e-2)
    res["tol"] = tol
    res["ok"] = all(isinstance(v, float) and math.isfinite(v) and v <= tol
                    for k, v in res.items() if k in ("y", "grad_x", "grad_weight", "grad_bias"))
    return res


# --------------------------------------------------------------------------
# progress bar


class Progress:
    """tqdm when importable, else a small text bar on stderr. Progress is
    counted in estimated work units so the ETA follows the expensive cells."""

    def __init__(self, total: int):
        self.total = max(total, 1)
        self.done = 0
        self.t0 = time.perf_counter()
        self._last_draw = 0.0
        self._text = ""
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, file=sys.stderr, dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| [{elapsed}<{remaining}] {postfix}")
        except Exception:  # noqa: BLE001 - fall back to the built-in bar
            self.bar = None

    def describe(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)
        else:
            self._draw(text, force=True)

    def update(self, units: int, text: str = "") -> None:
        self.done += units
        if self.bar is not None:
            self.bar.update(units)
            if text:
                self.bar.set_postfix_str(text, refresh=False)
        else:
            self._draw(text)

    def _draw(self, text: str, force: bool = False) -> None:
        text = self._text = text or self._text
        now = time.perf_counter()
        if not force and now - self._last_draw < 0.5 and self.done < self.total:
            return
        self._last_draw = now
        frac = min(1.0, self.done / self.total)
        elapsed = now - self.t0
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        width = 30
        fill = int(round(frac * width))
        eta_s = "?" if math.isnan(eta) else _fmt_secs(eta)
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {frac * 100:5.1f}% "
                         f"{_fmt_secs(elapsed)}<{eta_s} {text[:50]:<50}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self._draw("done", force=True)
            sys.stderr.write("\n")


def _fmt_secs(s: float) -> str:
    s = int(round(s))
    return f"{s // 60:02d}:{s % 60:02d}" if s < 3600 else f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


# --------------------------------------------------------------------------
# the benchmark


def cost_units(impl: str, mode: str, L: int, K: int) -> int:
    """A rough relative cost (whole units), for the progress bar's ETA only."""
    base = L * math.log2(max(L, 2)) * K if impl != "dense" else L * L * K / 16.0
    return max(1, int(round(base * (3.0 if mode == "fwdbwd" else 1.0) / 1e3)))


def invalid_reason(C: int, G: int, K: int) -> Optional[str]:
    if G < 1 or C % G != 0:
        return f"invalid: C={C} not divisible by G={G}"
    if not 1 <= K <= C // G:
        return f"invalid: K={K} outside 1..C/G={C // G}"
    return None


def dense_guard(args: argparse.Namespace, G: int, K: int, L: int, itemsize: int) -> Optional[str]:
    if L > args.dense_max_len:
        return f"L > {args.dense_max_len}"
    nbytes = G * K * L * L * itemsize
    if nbytes > args.dense_max_gib * GiB:
        return f"mem {nbytes / GiB:.1f} GiB"
    return None


def run_cell(call: Callable[[], Any], impl: str, args: argparse.Namespace, dev: Device,
             predicted_s: Optional[float], rss: RssProbe) -> Dict[str, Any]:
    budget = args.cell_budget
    n_mem = 0 if args.no_memory else (2 if rss.ok and not dev.is_cuda else 1)
    # The prediction only skips dense outright; ours and fft are what the
    # targets compare, so they get their first call and are judged on it.
    slack = 1.0 if impl == "dense" else 3.0
    if predicted_s is not None and predicted_s * (2 + n_mem) > slack * budget:
        return {"status": "skipped", "reason": f"time (predicted {predicted_s:.2f} s/call)"}
    t_start = time.perf_counter()
    cell_load_start = CPU_LOAD.mark()
    warm_times = []
    for i in range(max(1, args.warmup)):  # at least one untimed call
        dev.sync()
        t0 = time.perf_counter()
        out = call()
        dev.sync()
        warm_times.append(time.perf_counter() - t0)
        del out
        per_call = warm_times[-1]
        if per_call * (1 + n_mem) > budget - (time.perf_counter() - t_start):
            if i == 0 and per_call * (1 + n_mem) > budget:
                return {"status": "skipped", "reason": f"time ({per_call:.2f} s/call)",
                        "warmup_s": warm_times}
            break
    per_call = min(warm_times)
    left = budget - (time.perf_counter() - t_start) - n_mem * per_call
    repeats = max(1, min(args.repeats, int(left / max(per_call, 1e-9))))

    times = []
    load_start = CPU_LOAD.mark()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            dev.sync()
            t0 = time.perf_counter()
            out = call()
            dev.sync()
            times.append(time.perf_counter() - t0)
            del out
    finally:
        if gc_was_enabled:
            gc.enable()
    res: Dict[str, Any] = {
        "status": "ok", "warmup_s": warm_times, "times_s": times, "repeats": repeats,
        "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
        "mean_ms": statistics.fmean(times) * 1e3,
    }
    other = None if dev.is_cuda else CPU_LOAD.others(load_start)
    if not args.no_memory:
        res["peak_alloc_bytes"] = peak_alloc_bytes(call, dev)
        if rss.ok and not dev.is_cuda:
            res["peak_rss_bytes"] = rss.measure(call)
    if other is None and not dev.is_cuda:  # timed calls too short to tell: whole cell
        other = CPU_LOAD.others(cell_load_start, 0.1)
    res["other_cpu_cores"] = other
    return res


def run_benchmark(args: argparse.Namespace, impls: Dict[str, Callable], dev: Device,
                  state: Dict[str, Any]) -> None:
    dtype = DTYPES[args.dtype]
    itemsize = torch.empty((), dtype=dtype).element_size()
    rss = RssProbe()
    state["memory_method"] = {
        "alloc": "cuda max_memory_allocated" if dev.is_cuda else
                 "torch.profiler profile_memory: peak of the running sum of allocator events",
        "rss": ("VmHWM - VmRSS after malloc_trim(0) and clear_refs=5"
                if rss.ok and not dev.is_cuda else "unavailable"),
    }
    B, C = args.batch, args.channels

    configs = []
    for G, K in args.gk:
        for L in sorted(set(args.lengths)):
            configs.append((G, K, L))
    total = 0
    for G, K, L in configs:
        if invalid_reason(C, G, K) is not None:
            continue
        if "ours" in args.impls:
            total += cost_units("fft", "fwdbwd", L, K) * 2
        for mode in args.modes:
            for impl in args.impls:
                total += cost_units(impl, mode, L, K)
    prog = Progress(total)
    last: Dict[Tuple[str, str, int, int], Tuple[int, float]] = {}
    try:
        for G, K, L in configs:
            tag = f"G={G} K={K} L={L}"
            invalid = invalid_reason(C, G, K)
            if invalid is not None:
                for mode in args.modes:
                    for impl in args.impls:
                        state["cells"].append(dict(mode=mode, G=G, K=K, L=L, impl=impl,
                                                   status="skipped", reason=invalid))
                continue
            inp = make_inputs(B, L, C, G, K, dtype, dev, args.seed)
            if "ours" in args.impls:
                prog.describe(f"check {tag}")
                try:
                    chk = check_config(impls, inp, dtype)
                except Exception as e:  # noqa: BLE001 - record, keep going
                    chk = {"ok": False, "error": repr(e)}
                chk.update(G=G, K=K, L=L)
                state["checks"].append(chk)
                prog.update(cost_units("fft", "fwdbwd", L, K) * 2)
            for mode in args.modes:
                for impl in args.impls:
                    cell: Dict[str, Any] = dict(mode=mode, G=G, K=K, L=L, impl=impl)
                    prog.describe(f"{MODE_LABEL[mode]} {impl} {tag}")
                    reason = dense_guard(args, G, K, L, itemsize) if impl == "dense" else None
                    if reason is not None:
                        cell.update(status="skipped", reason=reason)
                    else:
                        predicted = None
                        prev = last.get((mode, impl, G, K))
                        if prev is not None:
                            p = 2.0 if impl == "dense" else 1.2
                            predicted = prev[1] * (L / prev[0]) ** p
                        try:
                            cell.update(run_cell(make_call(impls[impl], mode, inp), impl, args, dev,
                                                 predicted, rss))
                        except Exception as e:  # noqa: BLE001 - record, keep going
                            cell.update(status="error", reason=repr(e)[:300])
                        if cell.get("status") == "ok":
                            last[(mode, impl, G, K)] = (L, cell["min_ms"] / 1e3)
                        elif cell.get("warmup_s"):  # skipped after one call: keep its time
                            last[(mode, impl, G, K)] = (L, min(cell["warmup_s"]))
                    state["cells"].append(cell)
                    prog.update(cost_units(impl, mode, L, K))
            del inp
        state["complete"] = True
    finally:
        prog.close()


# --------------------------------------------------------------------------
# targets, table, plot


def _index(cells: List[Dict[str, Any]]) -> Dict[Tuple, Dict[str, Any]]:
    return {(c["mode"], c["G"], c["K"], c["L"], c["impl"]): c for c in cells}


def _ok(c: Optional[Dict[str, Any]]) -> bool:
    return c is not None and c.get("status") == "ok"


def evaluate_targets(cells: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    idx = _index(cells)
    rows = sorted({(c["mode"], c["G"], c["K"], c["L"]) for c in cells})
    targets = []

    def verdict(name: str, items: List[Tuple[bool, str, float]], worst_is_min: bool,
                unit: str) -> Dict[str, Any]:
        if not items:
            return {"target": name, "result": "n/a", "detail": "no measured cells"}
        n_pass = sum(1 for ok, _, _ in items if ok)
        worst = (min if worst_is_min else max)(items, key=lambda t: t[2])
        misses = [f"{where} {val:.2f}{unit}" for ok, where, val in items if not ok]
        res = "PASS" if n_pass == len(items) else "MISS"
        detail = f"{n_pass}/{len(items)} cells; worst {worst[2]:.2f}{unit} at {worst[1]}"
        out = {"target": name, "result": res, "detail": detail}
        if misses:
            out["misses"] = misses
        return out

    # 1. fwd+bwd speed-up >= 3x over fft, L >= 1024, G == 1
    items = []
    for mode, G, K, L in rows:
        if mode != "fwdbwd" or G != 1 or L < 1024:
            continue
        o, f = idx.get((mode, G, K, L, "ours")), idx.get((mode, G, K, L, "fft"))
        if _ok(o) and _ok(f):
            r = f["median_ms"] / o["median_ms"]
            items.append((r >= 3.0, f"G={G} K={K} L={L}", r))
    targets.append(verdict("fwd+bwd ours >= 3x faster than fft (L >= 1024, G = 1)",
                           items, True, "x"))

    # 2. never slower than the best alternative
    items = []
    for mode, G, K, L in rows:
        o = idx.get((mode, G, K, L, "ours"))
        alts = [idx.get((mode, G, K, L, i)) for i in ("fft", "dense")]
        alts = [a for a in alts if _ok(a)]
        if _ok(o) and alts:
            best = min(a["median_ms"] for a in alts)
            r = best / o["median_ms"]
            items.append((r >= 1.0, f"{MODE_LABEL[mode]} G={G} K={K} L={L}", r))
    targets.append(verdict("ours never slower than the best alternative (best/ours >= 1)",
                           items, True, "x"))

    # 3. peak memory <= 1/3 of the composition's
    for key, label in (("peak_alloc_bytes", "alloc"), ("peak_rss_bytes", "rss")):
        items = []
        for mode, G, K, L in rows:
            o, f = idx.get((mode, G, K, L, "ours")), idx.get((mode, G, K, L, "fft"))
            if _ok(o) and _ok(f) and o.get(key) is not None and f.get(key):
                r = o[key] / f[key]
                items.append((r <= 1.0 / 3.0, f"{MODE_LABEL[mode]} G={G} K={K} L={L}", r))
        if items or label == "alloc":
            targets.append(verdict(f"peak memory ({label}) ours <= 1/3 of fft (ours/fft)",
                                   items, False, ""))

    # 4. growth per doubling of L in [1024, 16384], fwd+bwd
    items = []
    for G, K in sorted({(g, k) for m, g, k, _ in rows if m == "fwdbwd"}):
        pts = sorted((L, idx[("fwdbwd", G, K, L, "ours")]["median_ms"])
                     for m, g, k, L in rows
                     if m == "fwdbwd" and (g, k) == (G, K) and 1024 <= L <= 16384
                     and _ok(idx.get(("fwdbwd", G, K, L, "ours"))))
        for (l1, t1), (l2, t2) in zip(pts, pts[1:]):
            per_doubling = (t2 / t1) ** (1.0 / math.log2(l2 / l1))
            items.append((per_doubling <= 2.5, f"G={G} K={K} L={l1}->{l2}", per_doubling))
    targets.append(verdict("fwd+bwd ours time growth per doubling of L (1024..16384) <= 2.5x",
                           items, False, "x"))
    return targets


def _fmt_ms(c: Optional[Dict[str, Any]]) -> str:
    if c is None:
        return "-"
    if c.get("status") == "ok":
        busy = (c.get("other_cpu_cores") or 0) > BUSY_CORES
        return f"{c['median_ms']:.3g} ({c['min_ms']:.3g})" + ("*" if busy else "")
    if c.get("status") == "skipped":
        reason = c.get("reason", "")
        short = reason.split(" (")[0] if reason.startswith("time") else reason
        short = "invalid" if reason.startswith("invalid") else short
        return f"skipped ({short})" if short else "skipped"
    return "error"


def _ratio(a: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]) -> str:
    """a's median / b's median."""
    if _ok(a) and _ok(b) and b["median_ms"] > 0:
        return f"{a['median_ms'] / b['median_ms']:.2f}x"
    return "-"


def _mib(c: Optional[Dict[str, Any]]) -> str:
    if _ok(c) and c.get("peak_alloc_bytes") is not None:
        return f"{c['peak_alloc_bytes'] / MiB:.2f}"
    return "-"


def make_table(cells: List[Dict[str, Any]]) -> str:
    idx = _index(cells)
    rows = sorted({(c["mode"], c["G"], c["K"], c["L"]) for c in cells},
                  key=lambda r: (0 if r[0] == "fwd" else 1, r[1], r[2], r[3]))
    head = ["mode", "G", "K", "L", "ours ms", "fft ms", "dense ms", "fft/ours",
            "dense/ours", "ours peak MiB", "fft peak MiB", "mem ratio"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < 4 else "---:" for i in range(len(head))) + "|"]
    for mode, G, K, L in rows:
        o, f, d = (idx.get((mode, G, K, L, i)) for i in IMPL_NAMES)
        mem = "-"
        if _ok(o) and _ok(f) and o.get("peak_alloc_bytes") is not None and f.get("peak_alloc_bytes"):
            mem = f"{o['peak_alloc_bytes'] / f['peak_alloc_bytes']:.2f}"
        vals = [MODE_LABEL[mode], str(G), str(K), str(L), _fmt_ms(o), _fmt_ms(f), _fmt_ms(d),
                _ratio(f, o), _ratio(d, o), _mib(o), _mib(f), mem]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def format_targets(targets: List[Dict[str, Any]]) -> str:
    out = []
    for t in targets:
        out.append(f"- {t['result']:4s} {t['target']}: {t['detail']}")
        for m in t.get("misses", [])[:8]:
            out.append(f"    miss: {m}")
        if len(t.get("misses", [])) > 8:
            out.append(f"    ... {len(t['misses']) - 8} more in results.json")
    return "\n".join(out) + "\n"


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def make_plot(cells: List[Dict[str, Any]], path: Path, title: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return f"no plot: matplotlib unavailable ({e!r})"
    ok = [c for c in cells if c.get("status") == "ok"]
    if not ok:
        return "no plot: no measured cells"
    modes = [m for m in ("fwdbwd", "fwd") if any(c["mode"] == m for c in ok)]
    gks = sorted({(c["G"], c["K"]) for c in cells})
    fig, axes = plt.subplots(len(modes), len(gks), figsize=(4.2 * len(gks), 3.6 * len(modes)),
                             squeeze=False)
    styles = {"ours": ("tab:red", "o"), "fft": ("tab:blue", "s"), "dense": ("tab:gray", "^")}
    for r, mode in enumerate(modes):
        for c_, (G, K) in enumerate(gks):
            ax = axes[r][c_]
            for impl in IMPL_NAMES:
                pts = sorted((c["L"], c["median_ms"]) for c in ok
                             if c["mode"] == mode and c["G"] == G and c["K"] == K
                             and c["impl"] == impl)
                if pts:
                    color, marker = styles[impl]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker,
                            color=color, label=impl)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{MODE_LABEL[mode]}  G={G} K={K}", fontsize=10)
            ax.set_xlabel("L")
            if c_ == 0:
                ax.set_ylabel("median time (ms)")
            ax.grid(True, which="both", alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return None


# --------------------------------------------------------------------------
# environment


def _loadavg() -> Optional[List[float]]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _git(*cmd: str) -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(REPO_ROOT), *cmd], capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(dev: Device, impls: Dict[str, Callable]) -> Dict[str, Any]:
    env: Dict[str, Any] = {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "mkl": torch.backends.mkl.is_available(),
        "device": str(dev.device),
        "git_revision": _git("rev-parse", "HEAD") or "unknown (no commit)",
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }
    try:
        env["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    env["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    env["mem_total_gib"] = round(int(line.split()[1]) / (1 << 20), 1)
                    break
    except OSError:
        pass
    if dev.is_cuda:
        env["cuda_device"] = torch.cuda.get_device_name(dev.device)
        env["cuda"] = torch.version.cuda
    if "ours" in impls:
        try:
            import tmm
            env["tmm_file"] = getattr(tmm, "__file__", None)
            env["tmm_version"] = getattr(tmm, "__version__", None)
        except Exception:  # noqa: BLE001
            pass
    return env


# --------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass  # only settable before the first inter-op work
    torch.set_num_threads(args.threads)
    dev = Device(args.device)
    impls, ref_note = load_impls(args.impls)
    if ref_note:
        print(f"bench_ops: {ref_note}", file=sys.stderr)
        state_note = ref_note
    else:
        state_note = None
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    config = {k: v for k, v in vars(args).items()}
    config["gk"] = [list(p) for p in args.gk]
    state: Dict[str, Any] = {
        "schema": "tmm.bench_ops/1",
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "complete": False,
        "config": config,
        "env": dict(environment(dev, impls), reference_note=state_note),
        "checks": [],
        "cells": [],
    }
    print(f"bench_ops: B={args.batch} C={args.channels} L={args.lengths} "
          f"(G,K)={args.gk} {args.dtype} {args.device} threads={torch.get_num_threads()} "
          f"repeats={args.repeats} warmup={args.warmup} budget={args.cell_budget:g}s/cell",
          file=sys.stderr)
    t0 = time.perf_counter()
    load_start = CPU_LOAD.mark()
    state["env"]["loadavg_start"] = _loadavg()
    interrupted = False
    if args.cpu_algorithm:
        import tmm.ops as tmm_ops
        algo_ctx = tmm_ops.cpu_algorithm(args.cpu_algorithm)
    else:
        algo_ctx = contextlib.nullcontext()
    try:
        with algo_ctx:
            run_benchmark(args, impls, dev, state)
    except KeyboardInterrupt:
        interrupted = True
        print("\nbench_ops: interrupted; writing the partial results", file=sys.stderr)
    state["wall_s"] = round(time.perf_counter() - t0, 2)
    state["env"]["loadavg_end"] = _loadavg()
    others = CPU_LOAD.others(load_start, 0.0)
    state["env"]["other_cpu_cores"] = others
    busy_note = ""
    if others is not None and others > BUSY_CORES and not dev.is_cuda:
        busy_note = (f"WARNING: other processes used {others:.2f} CPU cores on average during "
                     f"this run (of {os.cpu_count()}); CPU timings are unreliable.\n")
    if any((c.get("other_cpu_cores") or 0) > BUSY_CORES for c in state["cells"]):
        busy_note += (f"* = other processes used > {BUSY_CORES} cores during that cell's "
                      "timed calls.\n")
    targets = evaluate_targets(state["cells"])
    state["targets"] = targets
    table = make_table(state["cells"])
    targets_txt = format_targets(targets)

    bad = [c for c in state["checks"] if not c.get("ok")]
    checks_txt = (f"correctness: ours vs fft matches on {len(state['checks']) - len(bad)}/"
                  f"{len(state['checks'])} configs")
    if state["checks"]:
        worst = max((max(v for k, v in c.items() if k in ("y", "grad_x", "grad_weight", "grad_bias")
                         and isinstance(v, float)) for c in state["checks"]
                     if any(isinstance(c.get(k), float) for k in ("y", "grad_x"))), default=None)
        if worst is not None:
            checks_txt += f" (worst rel err {worst:.2e}, tol {CHECK_TOL.get(DTYPES[args.dtype])})"
    for c in bad:
        detail = c.get("error") or {k: c.get(k) for k in ("y", "grad_x", "grad_weight", "grad_bias")}
        checks_txt += f"\n  MISMATCH G={c['G']} K={c['K']} L={c['L']}: {detail}"

    title = (f"tmm causal_toeplitz, B={args.batch} C={args.channels} {args.dtype} "
             f"{args.device} threads={torch.get_num_threads()}")
    plot_note = None if args.no_plot else make_plot(state["cells"], out_dir / "plot.png", title)
    md = (f"# {title}\n\n{state['env']['git_revision']}, torch {torch.__version__}, "
          f"{state['env'].get('cpu_model', platform.machine())}; time: median (min) of the "
          f"timed calls in ms; peak: extra bytes allocated through torch's allocator.\n\n"
          f"{table}\n{busy_note}\n## Targets\n\n{targets_txt}\n{checks_txt}\n")
    atomic_write(out_dir / "results.json",
                 (json.dumps(state, indent=1, default=str) + "\n").encode())
    atomic_write(out_dir / "table.md", md.encode())

    print(checks_txt)
    print("\ntargets:")
    print(targets_txt)
    if plot_note:
        print(plot_note)
    print(f"results: {out_dir}/results.json, table.md"
          + ("" if plot_note or args.no_plot else ", plot.png")
          + f" ({state['wall_s']:.0f} s)\n")
    print(table, end="")
    if busy_note:
        print("\n" + busy_note, end="")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
