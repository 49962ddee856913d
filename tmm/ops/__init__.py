"""The tmm operators, callable from Python and reachable as torch.ops.tmm.*.

``causal_toeplitz(x, weight, bias=None)`` mixes a B x L x C tensor along L
with causal Toeplitz matrices (learned long convolutions): see
docs/ops.md for the math. Autograd, torch.compile and opcheck all work; the
backward is its own op, ``torch.ops.tmm.causal_toeplitz_backward``.
"""
import contextlib
from typing import Iterator, Optional

import torch

from .. import _C

__all__ = ["causal_toeplitz", "cpu_algorithm"]


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
