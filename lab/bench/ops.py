"""The operator benchmark (scripts/bench_ops.py): tmm.ops.causal_toeplitz
against its two references, side by side in one run,

    ours   tmm.ops.causal_toeplitz                  (the C++/CUDA operator)
    fft    tmm.testing.causal_toeplitz_fft          (the torch.fft composition)
    dense  tmm.testing.causal_toeplitz_dense        (the dense masked matmul)

(and ours with a kernel path forced, "ours_<path>", for each of `paths`), on
x: B x L x C, weight: G x K x L (N = L), bias: G x L, in two modes:

    fwd      y = op(x, weight, bias) under torch.no_grad() (inference).
    fwdbwd   y = op(...) then torch.autograd.grad(y, (x, weight, bias), grad_y)
             with a fixed random grad_y: all three gradients are computed.

Correctness first: for every (G, K, L) ours is run once forward and backward
next to the fft reference (same inputs, same dtype) and tmm.testing.rel_err
of y and the three gradients goes to `checks`; a config above the dtype's
tolerance (tmm.testing.TOLERANCE) is a MISMATCH (the timings are still
taken).

Timing (lab.bench.timing): inputs, grad_y and the leaves that require grad
are made before any timing; each cell makes `warmup` untimed calls (at least
one), then `repeats` timed ones. Peak memory (lab.bench.memory: alloc, and
rss on the CPU) is measured on extra untimed calls after the timed ones.

Guards: the dense reference builds a G x L x L matrix per tap and keeps the
K of them for backward, so a dense cell is skipped when G*K*L*L*itemsize
exceeds `dense_max_gib` or L exceeds `dense_max_len`. Every cell has a time
budget (`cell_budget` seconds): the cost of one call is predicted from the
same implementation at the previous length (scaled by L^2 for dense, L^1.2
otherwise) and then measured on the first warm-up call. A cell that cannot
fit one warm-up, one timed call and the memory calls is skipped ("skipped
(time)"): dense already on the prediction, the others (what the targets
compare) only on the prediction exceeding 3x the budget or on the measured
first call. A cell that fits fewer than `repeats` timed calls gets fewer.
Past `deadline` (seconds since the epoch) the remaining cells are skipped
("deadline") and the results are marked truncated.

CPU timings need a quiet machine: the run measures the CPU time other
processes used during it (lab.bench.provenance.CpuLoad) and marks each cell
whose timed calls shared the machine.

results.json is rewritten after every cell (lab.bench.report.LiveJson):
config, environment, checks, every cell's raw timings and peaks, the target
verdicts (lab.bench.ops_report), "complete" once the grid is done.
"""
from __future__ import annotations

import contextlib
import datetime
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from tmm import testing
from tmm.progress import Progress
from . import ops_report
from .memory import RssProbe, peak_alloc_bytes
from .ops_report import MODE_LABEL
from .provenance import CPU_LOAD, environment, git, loadavg
from .report import LiveJson
from .timing import time_calls

__all__ = ["OpsBenchConfig", "IMPL_NAMES", "DTYPES", "run_grid", "load_impls"]

GiB = float(1 << 30)
IMPL_NAMES = ("ours", "fft", "dense")
DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}


@dataclass
class OpsBenchConfig:
    """One grid: every (G, K) x L x mode x implementation."""
    lengths: List[int] = field(default_factory=lambda: [256, 1024, 4096, 16384])
    batch: int = 4
    channels: int = 512
    gk: List[Tuple[int, int]] = field(default_factory=lambda: [(1, 1), (8, 1), (512, 1), (1, 8)])
    dtype: str = "float32"
    device: str = "cpu"
    threads: int = 2
    repeats: int = 10
    warmup: int = 2
    modes: List[str] = field(default_factory=lambda: ["fwd", "fwdbwd"])
    impls: List[str] = field(default_factory=lambda: list(IMPL_NAMES))
    paths: List[str] = field(default_factory=list)  # ours with each path forced: impls "ours_<path>"
    max_len: Dict[str, int] = field(default_factory=dict)  # impl -> longest L it is timed at (a path's limit)
    cell_budget: float = 60.0
    dense_max_gib: float = 2.0
    dense_max_len: int = 4096
    cpu_algorithm: Optional[str] = None  # force ours' path for the whole run (tmm.ops.path)
    no_memory: bool = False
    seed: int = 0
    deadline: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)  # recorded in the JSON config as given

    def impl_names(self) -> List[str]:
        """Column order: ours, ours_<path>..., fft, dense (those asked for)."""
        names = ["ours"] if "ours" in self.impls else []
        names += [f"ours_{p}" for p in self.paths]
        return names + [i for i in ("fft", "dense") if i in self.impls]


# ---------------------------------------------------------------------------
# implementations and inputs


def load_impls(cfg: OpsBenchConfig) -> Dict[str, Callable]:
    """name -> callable(x, weight, bias); fft always (ours is checked against
    it). ours is tmm.ops.causal_toeplitz, or torch.ops.tmm's where only
    libtmm_torch was loaded (torch.ops.load_library, no tmm._C); forced
    paths need tmm.ops.path."""
    impls: Dict[str, Callable] = {"fft": testing.causal_toeplitz_fft, "dense": testing.causal_toeplitz_dense}
    names = cfg.impl_names()
    if not any(n.startswith("ours") for n in names):
        return impls
    try:
        import tmm.ops as tmm_ops

        ours, path = tmm_ops.causal_toeplitz, tmm_ops.path
    except ImportError as e:
        if not hasattr(torch.ops.tmm, "causal_toeplitz") or cfg.paths or cfg.cpu_algorithm:
            raise SystemExit(
                f"bench_ops: tmm.ops is not available ({e}).\nBuild the extension first "
                "(scripts/run.sh or pip install -e .), or pass --impls fft,dense.") from e
        ours, path = torch.ops.tmm.causal_toeplitz, None
    impls["ours"] = ours
    for p in cfg.paths:
        def forced(x, w, b, p=p):
            with path(p):
                return ours(x, w, b)
        impls[f"ours_{p}"] = forced
    return impls


def make_call(fn: Callable, mode: str, inp: testing.Inputs) -> Callable[[], Any]:
    """A zero-argument closure running one call of `mode`; inputs pre-made."""
    x, w, b = inp.x, inp.weight, inp.bias
    if mode == "fwd":
        def call():
            with torch.no_grad():
                return fn(x, w, b)
        return call
    xg, wg, bg = (t.detach().clone().requires_grad_(True) for t in (x, w, b))
    gy = inp.grad_y

    def call():
        y = fn(xg, wg, bg)
        return torch.autograd.grad(y, (xg, wg, bg), gy)
    return call


def check_config(impls: Dict[str, Callable], inp: testing.Inputs, dtype: torch.dtype) -> Dict[str, Any]:
    """ours vs fft, forward and the three gradients, same inputs and dtype."""
    outs = {}
    for name in ("ours", "fft"):
        xg, wg, bg = (t.detach().clone().requires_grad_(True) for t in (inp.x, inp.weight, inp.bias))
        y = impls[name](xg, wg, bg)
        outs[name] = (y,) + tuple(torch.autograd.grad(y, (xg, wg, bg), inp.grad_y))
    res: Dict[str, Any] = {}
    for key, a, b in zip(("y", "grad_x", "grad_weight", "grad_bias"), outs["ours"], outs["fft"]):
        res[key] = (testing.rel_err(a, b) if a.shape == b.shape
                    else f"shape {tuple(a.shape)} vs {tuple(b.shape)}")
    res["tol"] = testing.tolerance(dtype)
    res["ok"] = all(isinstance(v, float) and math.isfinite(v) and v <= res["tol"]
                    for k, v in res.items() if k in ("y", "grad_x", "grad_weight", "grad_bias"))
    return res


def min_bytes(mode: str, B: int, L: int, C: int, G: int, K: int, itemsize: int) -> int:
    """Bytes the op must move at least: fwd reads x and writes y; fwd+bwd
    also reads grad_y and x and writes grad_x; plus weight and bias."""
    wbytes = (G * K * L + G * L) * itemsize
    return (2 if mode == "fwd" else 5) * B * L * C * itemsize + (2 if mode == "fwd" else 3) * wbytes


# ---------------------------------------------------------------------------
# cells


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


def dense_guard(cfg: OpsBenchConfig, G: int, K: int, L: int, itemsize: int) -> Optional[str]:
    if L > cfg.dense_max_len:
        return f"L > {cfg.dense_max_len}"
    nbytes = G * K * L * L * itemsize
    if nbytes > cfg.dense_max_gib * GiB:
        return f"mem {nbytes / GiB:.1f} GiB"
    return None


def run_cell(call: Callable[[], Any], impl: str, cfg: OpsBenchConfig, predicted_s: Optional[float],
             rss: RssProbe) -> Dict[str, Any]:
    is_cuda = torch.device(cfg.device).type == "cuda"
    n_mem = 0 if cfg.no_memory else (2 if rss.ok and not is_cuda else 1)
    # The prediction only skips dense outright; the others are what the
    # targets compare, so they get their first call and are judged on it.
    slack = 1.0 if impl == "dense" else 3.0
    if predicted_s is not None and predicted_s * (2 + n_mem) > slack * cfg.cell_budget:
        return {"status": "skipped", "reason": f"time (predicted {predicted_s:.2f} s/call)"}
    cell_load_start = CPU_LOAD.mark()
    res = time_calls(call, cfg.device, warmup=max(1, cfg.warmup), repeats=cfg.repeats,
                     budget_s=cfg.cell_budget, reserve_calls=n_mem)
    if res["status"] != "ok":
        return res
    if not cfg.no_memory:
        res["peak_alloc_bytes"] = peak_alloc_bytes(call, cfg.device)
        if rss.ok and not is_cuda:
            res["peak_rss_bytes"] = rss.measure(call)
    if not is_cuda:
        if res.get("other_cpu_cores") is None:  # timed calls too short to tell: the whole cell
            res["other_cpu_cores"] = CPU_LOAD.others(cell_load_start, 0.1)
    else:
        res["other_cpu_cores"] = None
    return res


def run_grid(cfg: OpsBenchConfig, impls: Dict[str, Callable], live: LiveJson, progress: bool = True) -> None:
    """Every cell of the grid into live.data["cells"] (checks into "checks"),
    flushed after each; "truncated" when the deadline cut it short."""
    dtype = DTYPES[cfg.dtype]
    itemsize = torch.empty((), dtype=dtype).element_size()
    is_cuda = torch.device(cfg.device).type == "cuda"
    rss = RssProbe()
    live.data["memory_method"] = {
        "alloc": "cuda max_memory_allocated" if is_cuda else
                 "torch.profiler profile_memory: peak of the running sum of allocator events",
        "rss": ("VmHWM - VmRSS after malloc_trim(0) and clear_refs=5" if rss.ok and not is_cuda
                else "unavailable"),
    }
    B, C = cfg.batch, cfg.channels
    names = cfg.impl_names()
    configs = [(G, K, L) for G, K in cfg.gk for L in sorted(set(cfg.lengths))]
    total = 0
    for G, K, L in configs:
        if invalid_reason(C, G, K) is None:
            total += cost_units("fft", "fwdbwd", L, K) * 2 if "ours" in names else 0
            total += sum(cost_units(i, m, L, K) for m in cfg.modes for i in names)
    last: Dict[Tuple[str, str, int, int], Tuple[int, float]] = {}
    checks, cells = live.section("checks"), live.section("cells")
    with Progress(max(total, 1), desc="bench_ops", unit="unit", enabled=progress) as bar:
        for G, K, L in configs:
            tag = f"G={G} K={K} L={L}"
            invalid = invalid_reason(C, G, K)
            if invalid is not None:
                for mode in cfg.modes:
                    for impl in names:
                        cells.append(dict(mode=mode, G=G, K=K, L=L, impl=impl, status="skipped", reason=invalid))
                live.flush()
                continue
            if cfg.deadline is not None and time.time() > cfg.deadline:
                for mode in cfg.modes:
                    for impl in names:
                        cells.append(dict(mode=mode, G=G, K=K, L=L, impl=impl, status="skipped", reason="deadline"))
                live.data["truncated"] = True
                live.flush()
                continue
            inp = testing.make_inputs(B, L, C, G, K, dtype=dtype, device=cfg.device, seed=cfg.seed + 7919 * L + 131 * G + K)
            if "ours" in names:
                bar.describe(f"check {tag}")
                try:
                    chk = check_config(impls, inp, dtype)
                except Exception as e:  # noqa: BLE001 - record, keep going
                    chk = {"ok": False, "error": repr(e)}
                chk.update(G=G, K=K, L=L)
                checks.append(chk)
                bar.update(cost_units("fft", "fwdbwd", L, K) * 2)
            for mode in cfg.modes:
                for impl in names:
                    cell: Dict[str, Any] = dict(mode=mode, G=G, K=K, L=L, impl=impl,
                                                bytes=min_bytes(mode, B, L, C, G, K, itemsize))
                    bar.describe(f"{MODE_LABEL[mode]} {impl} {tag}")
                    reason = dense_guard(cfg, G, K, L, itemsize) if impl == "dense" else None
                    if impl in cfg.max_len and L > cfg.max_len[impl]:
                        reason = f"L > {cfg.max_len[impl]}"
                    if reason is None and cfg.deadline is not None and time.time() > cfg.deadline:
                        reason = "deadline"
                        live.data["truncated"] = True
                    if reason is not None:
                        cell.update(status="skipped", reason=reason)
                    else:
                        predicted = None
                        prev = last.get((mode, impl, G, K))
                        if prev is not None:
                            predicted = prev[1] * (L / prev[0]) ** (2.0 if impl == "dense" else 1.2)
                        try:
                            cell.update(run_cell(make_call(impls[impl], mode, inp), impl, cfg, predicted, rss))
                        except Exception as e:  # noqa: BLE001 - record, keep going
                            cell.update(status="error", reason=repr(e)[:300])
                        if cell.get("status") == "ok":
                            last[(mode, impl, G, K)] = (L, cell["min_ms"] / 1e3)
                        elif cell.get("warmup_s"):  # skipped after one call: keep its time
                            last[(mode, impl, G, K)] = (L, min(cell["warmup_s"]))
                    cells.append(cell)
                    live.flush()
                    bar.update(cost_units(impl, mode, L, K))
                    if is_cuda and impl in ("fft", "dense"):
                        torch.cuda.empty_cache()  # the references' buffers are large
            del inp
            if is_cuda:
                torch.cuda.empty_cache()


def run(cfg: OpsBenchConfig, out_dir: Path, progress: bool = True, plot: bool = True, repo=None) -> Dict[str, Any]:
    """The whole benchmark: results.json (live), then table.md and plot.png
    via ops_report.finish(). Returns what finish() returns (the results
    document and the texts to print). ``repo``: the checkout whose git
    revision the results record (provenance.git)."""
    impls = load_impls(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in asdict(cfg).items() if k != "extra"}
    config.update(cfg.extra)
    config["gk"] = [list(p) for p in cfg.gk]
    live = LiveJson(out_dir / "results.json", {
        "schema": "tmm.bench_ops/1",
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "config": config, "env": environment(cfg.device), "git": git(repo), "checks": [], "cells": []})
    t0 = time.perf_counter()
    load_start = CPU_LOAD.mark()
    live.data["env"]["loadavg_start"] = loadavg()
    force = contextlib.nullcontext()
    if cfg.cpu_algorithm:
        import tmm.ops

        force = tmm.ops.path(cfg.cpu_algorithm)
    try:
        with force:
            run_grid(cfg, impls, live, progress)
        live.data["complete"] = True  # ran to the end ("truncated" says whether the deadline cut cells)
    except KeyboardInterrupt:
        live.data["interrupted"] = True
    live.data["wall_s"] = round(time.perf_counter() - t0, 2)
    live.data["env"]["loadavg_end"] = loadavg()
    live.data["env"]["other_cpu_cores"] = CPU_LOAD.others(load_start, 0.0)
    return ops_report.finish(cfg, live, out_dir, plot)
