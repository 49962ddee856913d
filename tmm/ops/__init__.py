"""The tmm operators, callable from Python and reachable as torch.ops.tmm.*.

``causal_toeplitz(x, weight, bias=None)`` mixes a B x L x C tensor along L
with causal Toeplitz matrices (learned long convolutions): see
docs/ops.md for the math. Autograd, torch.compile and opcheck all work; the
backward is its own op, ``torch.ops.tmm.causal_toeplitz_backward``.
"""
import contextlib
import os
from typing import Iterator, Optional

import torch

from .. import _C

__all__ = ["causal_toeplitz", "cpu_algorithm", "path"]


def causal_toeplitz(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """y[b,t,c] = sum_i sum_{s<=t} weight[g,i,t-s] x[b,s,c-(K-1)+i] + bias[g,t].

    x: B x L x C; weight: G x K x N with N >= L, C % G == 0, 1 <= K <= C/G;
    bias: G x N or None. g = c // (C/G); sources below the group's first
    channel count as zero. Returns B x L x C in x's dtype.
    """
    return torch.ops.tmm.causal_toeplitz(x, weight, bias)


@contextlib.contextmanager
def cpu_algorithm(name: str) -> Iterator[None]:
    """Force the CPU path inside the block: 'auto', 'direct' or 'fft'.

    For tests and crossover measurements; 'auto' (the default) picks the
    faster one. Process-wide, not thread-local.
    """
    previous = _C._cpu_algorithm()
    _C._set_cpu_algorithm(name)
    try:
        yield
    finally:
        _C._set_cpu_algorithm(previous)


# --- SHIM (branch `checks`): a minimal tmm.ops.path until the real path
# option (issue 16 item 3) lands; the lead replaces this block at merge. It
# maps the names onto cpu_algorithm (CPU) and TMM_CUDA_ALGORITHM (CUDA, read
# on every call). Process-wide, not thread-local.
_PATHS = ("auto", "direct", "fft", "cufft", "fused")


@contextlib.contextmanager
def path(name: str) -> Iterator[None]:
    """Force the kernel path inside the block: auto, direct, fft (CPU), cufft, fused (CUDA)."""
    if name not in _PATHS:
        raise ValueError(f"tmm.ops.path: name must be one of {', '.join(_PATHS)}, got {name!r}")
    previous = os.environ.get("TMM_CUDA_ALGORITHM")
    os.environ["TMM_CUDA_ALGORITHM"] = name if name in ("auto", "cufft", "fused") else "auto"
    try:
        with cpu_algorithm(name if name in ("auto", "direct", "fft") else "auto"):
            yield
    finally:
        if previous is None:
            os.environ.pop("TMM_CUDA_ALGORITHM", None)
        else:
            os.environ["TMM_CUDA_ALGORITHM"] = previous
