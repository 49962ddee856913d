"""Pure-PyTorch references for the causal Toeplitz operator.

These are the slow, obviously-correct versions the C++ kernels are tested
against. They have the same semantics, shapes and dtype behaviour as
``torch.ops.tmm.causal_toeplitz``:

    x:      B x L x C
    weight: G x K x N   (N >= L, C % G == 0, 1 <= K <= C/G)
    bias:   G x N, or None

With Cg = C/G, g = c // Cg and lo = g*Cg:

    y[b,t,c] = sum_{i<K} sum_{s<=t} weight[g,i,t-s] * x[b,s,c-(K-1)+i] + bias[g,t]

where a source channel c-(K-1)+i below lo counts as zero. Tap i therefore
reads x shifted by K-1-i channels to the right inside each group. Only the
first L taps and L bias entries are used. Both references are differentiable
by autograd and return x's dtype; float16/bfloat16 are computed in float32.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "causal_toeplitz_dense",
    "causal_toeplitz_fft",
    "causal_toeplitz_backward_reference",
]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _split(x: Tensor, weight: Tensor) -> Tuple[Tensor, Tensor]:
    """Check shapes; return x as (B, L, G, Cg) and weight cropped to (G, K, L),
    both in the compute dtype."""
    assert x.dim() == 3 and weight.dim() == 3, "x must be B x L x C, weight G x K x N"
    B, L, C = x.shape
    G, K, N = weight.shape
    assert N >= L and C % G == 0 and 1 <= K <= C // G, (tuple(x.shape), tuple(weight.shape))
    dt = _compute_dtype(x.dtype)
    return x.to(dt).reshape(B, L, G, C // G), weight[:, :, :L].to(dt)


def _shift_channels(xg: Tensor, shift: int) -> Tensor:
    """xg[..., c - shift] inside each group (last dim), zero where c < shift."""
    if shift == 0:
        return xg
    return torch.nn.functional.pad(xg, (shift, 0))[..., : xg.shape[-1]]


def _finish(y: Tensor, x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """y: (B, L, G, Cg) in the compute dtype -> add bias, back to (B, L, C) in x's dtype."""
    B, L, G, Cg = y.shape
    if bias is not None:
        assert bias.shape == (G, weight.shape[2]), "bias must be G x N"
        y = y + bias[:, :L].to(y.dtype).t()[None, :, :, None]
    return y.reshape(B, L, G * Cg).to(x.dtype)


def causal_toeplitz_dense(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """The authors' first code: for each (group, tap) build the dense L x L
    lower-triangular Toeplitz matrix T[t, s] = weight[g, i, t - s] (t >= s,
    zero above the diagonal) and apply it along the sequence with a matmul.
    O(L^2) memory and time per group and tap."""
    xg, w = _split(x, weight)
    L, K = xg.shape[1], w.shape[1]
    lag = torch.arange(L, device=x.device)[:, None] - torch.arange(L, device=x.device)[None, :]
    causal = lag >= 0
    y = torch.zeros_like(xg)
    for i in range(K):
        T = w[:, i, lag.clamp(min=0)] * causal  # (G, L, L)
        y = y + torch.einsum("gts,bsgc->btgc", T, _shift_channels(xg, K - 1 - i))
    return _finish(y, x, weight, bias)


def causal_toeplitz_fft(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """The hand-written torch.fft version: zero-pad to n >= 2L - 1 (so the
    circular convolution does not wrap), multiply the spectra, sum the taps in
    the frequency domain, transform back once and keep the first L outputs.
    O(L log L) per channel."""
    xg, w = _split(x, weight)
    L, K = xg.shape[1], w.shape[1]
    if x.numel() == 0:  # the FFT backends reject empty batches
        return causal_toeplitz_dense(x, weight, bias)
    n = 2 * L
    wf = torch.fft.rfft(w, n=n, dim=-1)  # (G, K, F)
    yf = 0
    for i in range(K):
        xf = torch.fft.rfft(_shift_channels(xg, K - 1 - i), n=n, dim=1)  # (B, F, G, Cg)
        yf = yf + xf * wf[:, i].t()[None, :, :, None]
    y = torch.fft.irfft(yf, n=n, dim=1)[:, :L]
    return _finish(y, x, weight, bias)


def causal_toeplitz_backward_reference(
    grad_y: Tensor, x: Tensor, weight: Tensor
) -> Tuple[Tensor, Tensor, Tensor]:
    """(grad_x, grad_weight (G, K, N), grad_bias (G, N)) by autograd through
    the dense reference, all computed and returned in float64. Taps and bias
    entries past L get zero gradient."""
    x64 = x.detach().to(torch.float64).requires_grad_(True)
    w64 = weight.detach().to(torch.float64).requires_grad_(True)
    b64 = torch.zeros(weight.shape[0], weight.shape[2], dtype=torch.float64,
                      device=x.device, requires_grad=True)
    y = causal_toeplitz_dense(x64, w64, b64)
    gx, gw, gb = torch.autograd.grad(y, (x64, w64, b64), grad_y.to(torch.float64),
                                     allow_unused=True)
    # With L == 0 nothing is used; autograd then reports None.
    gx = torch.zeros_like(x64) if gx is None else gx
    gw = torch.zeros_like(w64) if gw is None else gw
    gb = torch.zeros_like(b64) if gb is None else gb
    return gx, gw, gb
