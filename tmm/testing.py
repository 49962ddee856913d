"""What every test, check and benchmark of the causal Toeplitz op compares
against, in one place: the pure-PyTorch references (the semantics, shapes and
dtype behaviour of ``torch.ops.tmm.causal_toeplitz``, differentiable, 16-bit
computed in float32), the inputs, the error metric and the project's one
tolerance table (docs/ops.md: Definition, Accuracy). Pure Python and torch:
importable without the native build, so the GPU check uses it too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, Mapping, NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

__all__ = [
    "TOLERANCE", "tolerance", "rel_err", "assert_close", "step_tolerance", "grad_errors", "assert_grads_close",
    "causal_toeplitz_dense", "causal_toeplitz_fft", "causal_toeplitz_backward_reference",
    "Inputs", "LAYOUTS", "make_inputs", "poison_cuda_allocator",
]

# ---------------------------------------------------------------------------
# The tolerance table and the error metric

_TOLERANCE_FILE = Path(__file__).with_name("tolerances.json")


def _load_tolerances() -> Dict[torch.dtype, float]:
    try:
        table = json.loads(_TOLERANCE_FILE.read_text())
    except (OSError, ValueError) as e:
        raise ImportError(f"tmm.testing: cannot read the tolerance table {_TOLERANCE_FILE}: {e}") from e
    out = {}
    for name, value in table.items():
        if name.startswith("_"):
            continue  # "_doc"
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype) or not isinstance(value, (int, float)) or value <= 0:
            raise ImportError(f"tmm.testing: {_TOLERANCE_FILE}: entry {name!r}: {value!r} is not "
                              "a positive tolerance of a torch dtype")
        out[dtype] = float(value)
    return out


# max|actual - expected| / max|expected| allowed, per result dtype, against a
# float64 reference computed from the same (rounded) inputs: float32 compute
# inside the op plus the final rounding (half an ulp of float16 is 2^-11 of
# the value, of bfloat16 2^-8).
TOLERANCE: Dict[torch.dtype, float] = _load_tolerances()


def tolerance(dtype: Union[torch.dtype, str]) -> float:
    """The table's entry for a dtype or its name ("bfloat16")."""
    key = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if key not in TOLERANCE:
        raise KeyError(f"tolerance: no entry for dtype {dtype!r} in {_TOLERANCE_FILE.name} "
                       f"(it has {', '.join(str(d).replace('torch.', '') for d in TOLERANCE)})")
    return TOLERANCE[key]


def rel_err(actual: Tensor, expected: Tensor) -> float:
    """max|actual - expected| / max|expected| in float64 (the absolute error
    where expected is all zero; 0 for empty tensors; inf where actual has a
    non-finite entry). Shapes must match."""
    if tuple(actual.shape) != tuple(expected.shape):
        raise ValueError(f"rel_err: actual has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if expected.numel() == 0:
        return 0.0
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if not torch.isfinite(a).all():
        return math.inf
    scale = e.abs().max().item()
    diff = (a - e).abs().max().item()
    return diff / scale if scale > 0 else diff


def assert_close(actual: Tensor, expected: Tensor, dtype: Optional[torch.dtype] = None, what: str = "",
                 tol: Optional[float] = None) -> float:
    """rel_err(actual, expected) <= the tolerance of ``dtype`` (the dtype the
    op computed in; default actual's), or ``tol``. Returns the error."""
    dtype = actual.dtype if dtype is None else dtype
    tol = tolerance(dtype) if tol is None else tol
    err = rel_err(actual, expected)
    if not err <= tol:
        finite = "" if math.isfinite(err) else " (the result has non-finite entries)"
        raise AssertionError(f"{what or 'result'}: relative error {err:.3e} > {tol:.1e} ({dtype}){finite}")
    return err


# ---------------------------------------------------------------------------
# Whole training steps under autocast


def step_tolerance(dtype: Union[torch.dtype, str]) -> float:
    """The table's row for a whole training step under autocast in ``dtype``
    against the float32 step ("_autocast_step_<dtype>": a step chains many
    roundings, embedding to head and back, so it is not the one-op row)."""
    name = str(dtype).removeprefix("torch.")
    table = json.loads(_TOLERANCE_FILE.read_text())
    if "_autocast_step_" + name not in table:
        raise KeyError(f"step_tolerance: no entry _autocast_step_{name} in {_TOLERANCE_FILE.name}")
    return float(table["_autocast_step_" + name])


def grad_errors(actual: Mapping[str, Tensor], expected: Mapping[str, Tensor], tol: float) -> Dict[str, float]:
    """The error of each named gradient against its own scale:
    max|a - e| / max(max|e|, tol * S), S the largest max|e| of them all.

    Each tensor is judged on its own, so a small gradient (a bias, a norm, a
    filter) cannot hide behind a large one. The floor tol * S is for the
    gradients that are tiny beside the others (~0 or 100x below, as Hyena's
    filter MLP): a reduced-precision step's rounding errors are set by the
    magnitudes flowing through the whole step, not by each result's own
    size, so such a gradient is allowed an absolute error of tol^2 * S (in
    bfloat16, 1e-3 of the largest gradient), and a wholly wrong one is still
    caught once its scale is above that. Names must match; a non-finite
    actual is inf."""
    if set(actual) != set(expected):
        raise ValueError(f"grad_errors: names differ: only actual {sorted(set(actual) - set(expected))}, "
                         f"only expected {sorted(set(expected) - set(actual))}")
    scales = {n: e.detach().abs().max().item() if e.numel() else 0.0 for n, e in expected.items()}
    floor = tol * max(scales.values(), default=0.0)
    out = {}
    for n, e in expected.items():
        scale = max(scales[n], floor)
        # rel_err's checks and metric, then its scale swapped for the floored one
        err = rel_err(actual[n], e)
        out[n] = err if scales[n] == scale or not math.isfinite(err) else err * (scales[n] or 1.0) / scale
    return out


def assert_grads_close(actual: Mapping[str, Tensor], expected: Mapping[str, Tensor], tol: float,
                       what: str = "gradients") -> Dict[str, float]:
    """grad_errors(...) <= tol for every name; the message lists the worst.
    Returns the errors."""
    errs = grad_errors(actual, expected, tol)
    bad = sorted((n for n, e in errs.items() if not e <= tol), key=lambda n: -errs[n])
    if bad:
        raise AssertionError(f"{what}: {len(bad)} of {len(errs)} above {tol:.1e} (each against its own scale): "
                             + ", ".join(f"{n} {errs[n]:.3e}" for n in bad[:5]))
    return errs


# ---------------------------------------------------------------------------
# References


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _split(x: Tensor, weight: Tensor) -> Tuple[Tensor, Tensor]:
    """Check shapes; return x as (B, L, G, Cg) and weight cropped to (G, K, L),
    both in the compute dtype."""
    if x.dim() != 3 or weight.dim() != 3:
        raise ValueError(f"reference: x must be B x L x C and weight G x K x N, got x {tuple(x.shape)} "
                         f"and weight {tuple(weight.shape)}")
    B, L, C = x.shape
    G, K, N = weight.shape
    if not (N >= L and G >= 1 and C % G == 0 and 1 <= K <= C // G):
        raise ValueError(f"reference: need N >= L, C % G == 0 and 1 <= K <= C/G; got x {tuple(x.shape)}, "
                         f"weight {tuple(weight.shape)}")
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
        if tuple(bias.shape) != (G, weight.shape[2]):
            raise ValueError(f"reference: bias must be G x N = {(G, weight.shape[2])}, got {tuple(bias.shape)}")
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


def causal_toeplitz_backward_reference(grad_y: Tensor, x: Tensor, weight: Tensor,
                                       fft: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
    """(grad_x, grad_weight (G, K, N), grad_bias (G, N)) by autograd through
    the dense reference (the fft one with ``fft=True``, for long sequences),
    all computed and returned in float64. Taps and bias entries past L get
    zero gradient."""
    x64 = x.detach().to(torch.float64).requires_grad_(True)
    w64 = weight.detach().to(torch.float64).requires_grad_(True)
    b64 = torch.zeros(weight.shape[0], weight.shape[2], dtype=torch.float64,
                      device=x.device, requires_grad=True)
    y = (causal_toeplitz_fft if fft else causal_toeplitz_dense)(x64, w64, b64)
    gx, gw, gb = torch.autograd.grad(y, (x64, w64, b64), grad_y.to(torch.float64), allow_unused=True)
    # With L == 0 nothing is used; autograd then reports None.
    gx = torch.zeros_like(x64) if gx is None else gx
    gw = torch.zeros_like(w64) if gw is None else gw
    gb = torch.zeros_like(b64) if gb is None else gb
    return gx, gw, gb


# ---------------------------------------------------------------------------
# Inputs

LAYOUTS = ("contiguous", "transposed", "sliced")


class Inputs(NamedTuple):
    x: Tensor  # B x L x C
    weight: Tensor  # G x K x N
    bias: Optional[Tensor]  # G x N
    grad_y: Tensor  # B x L x C, laid out like x


def make_inputs(B: int, L: int, C: int, G: int, K: int, N: Optional[int] = None, *,
                dtype: torch.dtype = torch.float32, device: Union[str, torch.device] = "cpu",
                bias: bool = True, layout: str = "contiguous", seed: Optional[int] = None) -> Inputs:
    """Random inputs of order-one output (weight ~ N(0, 1/(K L))), drawn in
    float64 on the CPU and then rounded and moved, so every device and path
    sees the same values. N defaults to L. ``seed``: a generator of its own
    (else torch's global one). ``layout`` of x and grad_y: "contiguous",
    "transposed" (the transpose of a B x C x L tensor) or "sliced" (every
    other element of a larger tensor, offset by one)."""
    if layout not in LAYOUTS:
        raise ValueError(f"make_inputs: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    N = L if N is None else N
    gen = None if seed is None else torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=gen).to(device=device, dtype=dtype)

    def sequence():  # B x L x C in the asked layout (made on the device, then viewed)
        if layout == "transposed":
            return rand(B, C, L).transpose(1, 2)
        if layout == "sliced":
            return rand(B + 1, 2 * L + 1, 2 * C)[1:, 1::2, ::2]
        return rand(B, L, C)

    x = sequence()
    w = (torch.randn(G, K, N, dtype=torch.float64, generator=gen) / math.sqrt(K * max(L, 1))).to(
        device=device, dtype=dtype)
    b = rand(G, N) if bias else None
    return Inputs(x, w, b, sequence())


def poison_cuda_allocator(device: Union[str, torch.device, None] = None) -> None:
    """Fill blocks of torch's CUDA caching allocator with NaN and free them,
    so that an output element a kernel forgets to write reads NaN (rel_err:
    inf) instead of a lucky zero. Sizes from 1 KiB to 32 MiB."""
    keep = [torch.full((n,), math.nan, device=device or "cuda") for n in (1 << 8, 1 << 12, 1 << 16, 1 << 20, 1 << 23)]
    del keep
