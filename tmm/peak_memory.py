"""The peak memory of a block of work, measured (not estimated).

On CUDA: the caching allocator's peak (``torch.cuda.max_memory_allocated``,
reset at the start). On Linux CPUs: the process's resident-set high-water
mark (``VmHWM``), reset at the start by writing 5 to ``/proc/self/clear_refs``
(Linux >= 4.0); the increase is that peak minus the resident set before, so
it counts what the block allocated (parameters, optimiser state,
activations, caches) and not the interpreter and libraries loaded before.
Elsewhere, or where the reset is refused, the numbers are None.

    with PeakMemory(device) as mem:
        train(...)
    mem.increase_mib   # None where it cannot be measured
"""
from __future__ import annotations

import re
from typing import Optional

import torch

__all__ = ["PeakMemory"]

_MIB = 2 ** 20


def _status_kib(field: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as f:
            m = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _reset_cpu_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


class PeakMemory:
    """A context manager; after it, ``peak_mib`` (the peak during the block) and
    ``increase_mib`` (the peak above the memory in use when it began)."""

    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.peak_mib: Optional[float] = None
        self.increase_mib: Optional[float] = None
        self._base = None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        elif self.device.type == "cpu" and _reset_cpu_peak():
            rss = _status_kib("VmRSS")
            self._base = None if rss is None else rss * 1024
        return self

    def __exit__(self, *exc):
        if self._base is None:
            return False
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            hwm = _status_kib("VmHWM")
            if hwm is None:
                return False
            peak = hwm * 1024
        self.peak_mib = peak / _MIB
        self.increase_mib = max(peak - self._base, 0) / _MIB
        return False
