"""Peak memory, measured (not estimated): of one call, two ways, and of a
block of work (PeakMemory, around a whole training run).

  alloc  peak_alloc_bytes: the extra bytes live at the peak through torch's
         allocator. CPU: torch.profiler (profile_memory=True) records every
         allocation and free made through c10's CPU allocator; the running
         sum of those events in time order is the live extra bytes, its
         maximum the peak. Inputs allocated before the call do not count; the
         outputs it returns do. Blind to memory a library takes by itself
         (MKL FFT workspaces, std::vector scratch inside a kernel) and,
         possibly, to allocations made on worker threads. CUDA:
         torch.cuda.max_memory_allocated() minus what was allocated before.
  rss    RssProbe: the resident-set growth of this process: glibc's
         malloc_trim(0) returns freed heap pages to the OS,
         /proc/self/clear_refs ("5") resets the peak RSS, and the peak is
         VmHWM after the call minus VmRSS before. Sees every byte touched (any
         allocator, any thread), at page granularity, with some noise
         (thread stacks, lazily loaded code). Linux only; unavailable where
         /proc/self/clear_refs cannot be written.

PeakMemory (a context manager) reports, after its block, the peak and the
peak above the memory in use when the block began: on CUDA the caching
allocator's, on a Linux CPU the resident set's (as RssProbe: it counts
parameters, optimiser state, activations and caches the block allocated,
not the interpreter and libraries loaded before). The malloc_trim matters
most here: without it, heap pages freed by an earlier block (the previous
model's training) stay resident, the next block reuses them, and its
increase reads as zero. Elsewhere, or where the reset is refused, its
numbers are None.

    with PeakMemory(device) as mem:
        train(...)
    mem.increase_mib   # None where it cannot be measured
"""
from __future__ import annotations

import ctypes
import gc
import warnings
from typing import Any, Callable, Optional

import torch

from .timing import synchronize

__all__ = ["status_kib", "reset_peak_rss", "release_freed_heap", "RssProbe", "peak_alloc_bytes", "PeakMemory"]

_MIB = 2 ** 20

# (A CUDA build of torch without a GPU: the profiler's Kineto backend logs an
# error unless KINETO_LOG_LEVEL=5 is set before torch is imported; the
# benchmark scripts set it.)


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmHWM, VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """Reset VmHWM (the peak resident set) to the current resident set."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _malloc_trim():
    """glibc's malloc_trim, or None (another C library)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    return trim


def release_freed_heap() -> None:
    """Collect Python's garbage and return the freed heap pages of every
    malloc arena to the OS, so that the resident set holds only live memory."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class RssProbe:
    """Peak resident-set growth of this process over one call (Linux/glibc)."""

    def __init__(self) -> None:
        try:
            reset_peak_rss()
            status_kib("VmHWM")
            self.ok = True
        except OSError:
            self.ok = False

    def measure(self, fn: Callable[[], Any]) -> Optional[int]:
        if not self.ok:
            return None
        release_freed_heap()
        before = status_kib("VmRSS")
        reset_peak_rss()
        out = fn()
        peak = status_kib("VmHWM")
        del out
        return max(0, peak - before) * 1024


def peak_alloc_bytes(fn: Callable[[], Any], device="cpu") -> Optional[int]:
    """Peak live bytes allocated through torch during fn() (see above)."""
    gc.collect()
    dev = torch.device(device)
    if dev.type == "cuda":
        synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        out = fn()
        synchronize(dev)
        peak = torch.cuda.max_memory_allocated(dev) - base
        del out
        return max(0, int(peak))
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        # "Profiler clears events at the end of each cycle": expected, one cycle each.
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False,
                     with_stack=False) as prof:
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


class PeakMemory:
    """A context manager; after it, ``peak_mib`` (the peak during the block) and
    ``increase_mib`` (the peak above the memory in use when it began), None
    where they cannot be measured (see the module docstring)."""

    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.peak_mib: Optional[float] = None
        self.increase_mib: Optional[float] = None
        self._base = None

    def __enter__(self):
        if self.device.type == "cuda":
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        elif self.device.type == "cpu":
            release_freed_heap()
            try:
                reset_peak_rss()
                self._base = status_kib("VmRSS") * 1024
            except OSError:  # no /proc/self/clear_refs (not Linux, or refused): not measured
                self._base = None
        return self

    def __exit__(self, *exc):
        if self._base is None:
            return False
        if self.device.type == "cuda":
            synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            try:
                peak = status_kib("VmHWM") * 1024
            except OSError:
                return False
        self.peak_mib = peak / _MIB
        self.increase_mib = max(peak - self._base, 0) / _MIB
        return False
