"""The tmm operators, callable from Python and reachable as torch.ops.tmm.*:
``causal_toeplitz(x, weight, bias=None)`` mixes a B x L x C tensor along L with
causal Toeplitz matrices (learned long convolutions; autograd, torch.compile
and opcheck work, the backward is ``torch.ops.tmm.causal_toeplitz_backward``).
``path(name)`` forces a kernel path in a ``with`` block (``get_path()`` /
``set_path()`` outside one); ``cpu_capability()`` names the CPU kernels'
instruction set. docs/ops.md is the manual.
"""
import contextlib
import warnings
from typing import Iterator, List, Optional

import torch

from .. import _C

__all__ = [
    "PATHS",
    "causal_toeplitz",
    "cpu_algorithm",
    "cpu_capabilities",
    "cpu_capability",
    "direct_crossover_length",
    "get_path",
    "path",
    "set_path",
]

# The kernel paths: auto picks per call; direct and fft are the CPU's,
# cufft and fused CUDA's.
PATHS = ("auto", "direct", "fft", "cufft", "fused")


def causal_toeplitz(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """y[b,t,c] = sum_i sum_{s<=t} weight[g,i,t-s] x[b,s,c-(K-1)+i] + bias[g,t].

    x: B x L x C; weight: G x K x N with N >= L, C % G == 0, 1 <= K <= C/G;
    bias: G x N or None. g = c // (C/G); sources below the group's first
    channel count as zero. Returns B x L x C in x's dtype.
    """
    return torch.ops.tmm.causal_toeplitz(x, weight, bias)


def get_path() -> str:
    """The current kernel path's name (one of PATHS)."""
    return _C._path()


def set_path(name: str) -> None:
    """Set the kernel path for the whole process until changed: one of PATHS.

    Raises ValueError for any other name. Prefer ``with path(name):``, which
    restores the previous path.
    """
    _C._set_path(name)


@contextlib.contextmanager
def path(name: str) -> Iterator[None]:
    """Force a kernel path inside the block, then restore the previous one.

    ``auto`` (the default) picks the fastest kernels per call. ``direct`` and
    ``fft`` force the CPU's time-domain or FFT kernels, ``cufft`` and
    ``fused`` CUDA's cuFFT or fused kernels. A call the forced path cannot
    run (a CUDA path on the CPU, a CPU path on CUDA, ``fused`` where the
    fused kernels do not apply) runs auto's choice. docs/ops.md has the table.

    Process-wide, not thread-local: the setting reaches autograd's backward
    threads and the calls of every other thread while the block runs (two
    threads forcing different paths at once race). ValueError for a name not
    in PATHS, raised before the block runs.
    """
    previous = get_path()
    set_path(name)
    try:
        yield
    finally:
        set_path(previous)


def direct_crossover_length() -> int:
    """``auto`` takes the CPU's direct path while L * K <= this length."""
    return _C.direct_crossover_length


def cpu_capability() -> str:
    """The instruction set the CPU kernels run with: "avx512", "avx2",
    "default" (the build's baseline) or "native" (a TMM_NATIVE_ARCH build).

    The best one this build has and this CPU supports, capped by the
    environment variable TMM_CPU_CAPABILITY (read at the first op call).
    """
    return _C._cpu_capability()


def cpu_capabilities() -> List[str]:
    """The CPU capabilities this build has and this CPU supports, best first."""
    return list(_C._cpu_capabilities())


def cpu_algorithm(name: str):
    """Deprecated: use ``path(name)``. Forces 'auto', 'direct' or 'fft'."""
    warnings.warn("tmm.ops.cpu_algorithm is deprecated; use tmm.ops.path", DeprecationWarning, stacklevel=2)
    if name not in ("auto", "direct", "fft"):
        raise ValueError(f"cpu algorithm: expected 'auto', 'direct' or 'fft', got {name!r}")
    return path(name)
