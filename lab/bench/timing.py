"""The one timing loop of tmm's benchmarks and checks.

    t = time_calls(call, device="cuda", warmup=2, repeats=10, budget_s=5.0)
    t["median_ms"], t["min_ms"], t["times_s"], t["repeats"]

A call is timed alone: on the CPU with time.perf_counter, on CUDA with a pair
of CUDA events around it on the current stream (synchronized before and
after, so no other work overlaps). The untimed warm-up calls also measure
the cost of one call, and the time budget decides from it how many timed
calls fit (at least one), or that the cell does not fit at all: then the
result is {"status": "skipped", "reason": "time (... s/call)"}. Python's
garbage collector is paused during the timed calls. On the CPU the result
also says how many cores other processes used meanwhile (provenance.CpuLoad).
"""
from __future__ import annotations

import gc
import math
import statistics
import time
from typing import Any, Callable, Dict, Tuple

import torch

from .provenance import CPU_LOAD

__all__ = ["synchronize", "timed", "time_calls"]


def _is_cuda(device) -> bool:
    return torch.device(device).type == "cuda"


def synchronize(device="cpu") -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if _is_cuda(device):
        torch.cuda.synchronize(torch.device(device))


def timed(fn: Callable[[], Any], device="cpu") -> Tuple[float, Any]:
    """(seconds, fn()) of one call, the device synchronized before and after."""
    synchronize(device)
    if _is_cuda(device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3, out
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def time_calls(fn: Callable[[], Any], device="cpu", *, warmup: int = 1, repeats: int = 10,
               budget_s: float = math.inf, reserve_calls: int = 0) -> Dict[str, Any]:
    """Time `repeats` calls of fn after `warmup` untimed ones, within
    budget_s seconds for the whole (reserve_calls: calls the caller makes
    afterwards, e.g. memory probes, that the budget must also cover)."""
    t_start = time.perf_counter()
    warm = []
    for i in range(warmup):
        seconds, out = timed(fn, device)
        del out
        warm.append(seconds)
        need = seconds * (1 + reserve_calls)
        if need > budget_s - (time.perf_counter() - t_start):
            if i == 0 and need > budget_s:
                return {"status": "skipped", "reason": f"time ({seconds:.2f} s/call)", "warmup_s": warm}
            break
    n = repeats
    if warm and math.isfinite(budget_s):
        per_call = min(warm)
        left = budget_s - (time.perf_counter() - t_start) - reserve_calls * per_call
        n = max(1, min(repeats, int(left / max(per_call, 1e-9))))

    times = []
    load_start = None if _is_cuda(device) else CPU_LOAD.mark()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(n):
            seconds, out = timed(fn, device)
            del out
            times.append(seconds)
    finally:
        if gc_was_enabled:
            gc.enable()
    res: Dict[str, Any] = {
        "status": "ok", "warmup_s": warm, "times_s": times, "repeats": n,
        "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
        "mean_ms": statistics.fmean(times) * 1e3,
    }
    if load_start is not None:
        res["other_cpu_cores"] = CPU_LOAD.others(load_start)
    return res
