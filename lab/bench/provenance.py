"""Where a measurement or a run was made: the machine (CPU model,
instruction-set flags, cores, memory, load), the software (python, torch,
tmm, CUDA) and the code (the git revision of a checkout, and whether it was
dirty); and CpuLoad, the CPU time other processes took during a
measurement, since CPU timings on a shared machine mean little without it.

The package does not know where a source checkout is: git() reads the one
its caller names (the scripts in scripts/ pass theirs); without one the
revision is None, as for an installed package. Every record keeps it as
``"git": {"revision": ..., "dirty": ...}`` beside ``environment()``.
"""
from __future__ import annotations

import os
import platform
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["CpuLoad", "CPU_LOAD", "BUSY_CORES", "loadavg", "loaded_note", "git", "machine", "versions",
           "environment"]

# The instruction-set extensions that decide which CPU kernels are fast.
_ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
              "avx512_bf16", "avx512_fp16", "amx_bf16", "asimd", "sve")
BUSY_CORES = 0.25  # other processes' load above which a CPU timing is marked unreliable


def loadavg() -> Optional[List[float]]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def loaded_note() -> Optional[str]:
    """A note for a summary when the machine is busy now (wall times are
    then inflated and noisy), else None."""
    load = loadavg()
    cpus = os.cpu_count() or 1
    if load is None or load[0] <= 0.75 * cpus + 0.5:
        return None
    return (f"the machine was loaded at the start (1-minute load average {load[0]:.1f} on {cpus} CPUs): "
            "wall times are inflated and noisy")


def git(repo=None) -> Dict[str, Any]:
    """{"revision": HEAD's hash, "dirty": tracked files changed} of the
    checkout ``repo``; None for both without one or outside git."""
    def run(*cmd: str) -> Optional[str]:
        try:
            r = subprocess.run(["git", "-C", str(repo), *cmd], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    revision = run("rev-parse", "HEAD") if repo is not None else None
    if revision is None:
        return {"revision": None, "dirty": None}
    return {"revision": revision, "dirty": bool(run("status", "--porcelain", "--untracked-files=no"))}


def _cpuinfo() -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and "cpu_model" not in out:
                    out["cpu_model"] = value.strip()
                elif key in ("flags", "Features") and "cpu_flags" not in out:
                    have = set(value.split())
                    out["cpu_flags"] = [f for f in _ISA_FLAGS if f in have]
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    out["mem_total_gib"] = round(int(line.split()[1]) / (1 << 20), 1)
                    break
    except OSError:
        pass
    return out


def machine() -> Dict[str, Any]:
    """The host: platform, cores (and those this process may use), CPU model
    and ISA flags, memory, load average now."""
    env: Dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(),
                           "hostname": platform.node(), "cpu_count": os.cpu_count()}
    try:
        env["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    env.update(_cpuinfo())
    env["loadavg"] = loadavg()
    return env


def versions() -> Dict[str, Any]:
    """python, torch (and its CUDA), tmm (where its native module is built)."""
    import torch

    out: Dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "torch_git": getattr(torch.version, "git_version", None),
                           "torch_cuda": torch.version.cuda}
    try:
        import tmm

        out["tmm_file"] = getattr(tmm, "__file__", None)
        out["tmm_version"] = tmm.__version__
    except ImportError:  # a source tree without the native build
        out["tmm_version"] = None
    return out


def environment(device: str = "cpu") -> Dict[str, Any]:
    """versions() and machine() plus torch's threads and, on CUDA, the
    device: the "env" block of every benchmark's and experiment's JSON."""
    import torch

    env = {**versions(), **machine()}
    env.update(threads=torch.get_num_threads(), interop_threads=torch.get_num_interop_threads(),
               omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), mkl=torch.backends.mkl.is_available(),
               device=str(device))
    if torch.device(device).type == "cuda":
        env["cuda_device"] = torch.cuda.get_device_name(torch.device(device))
        env["cuda"] = torch.version.cuda
        env["capability"] = list(torch.cuda.get_device_capability(torch.device(device)))
    return env


class CpuLoad:
    """CPU used by *other* processes over an interval, in cores: the busy
    time /proc/stat reports for the whole machine minus this process' own
    user+system time, divided by the wall time. A busy machine (a build, a
    test run) makes CPU timings unreliable; the benchmarks report it."""

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

    def others(self, start: Optional[Tuple[float, float, int]], min_wall: float = 0.2) -> Optional[float]:
        """Cores other processes used since `start` (a mark()); None when
        unknown or the interval is shorter than min_wall seconds."""
        end = self.mark()
        if start is None or end is None or end[0] - start[0] < min_wall:
            return None
        busy = (end[2] - start[2]) / self.tick
        own = end[1] - start[1]
        return round(max(0.0, (busy - own) / (end[0] - start[0])), 2)


CPU_LOAD = CpuLoad()
