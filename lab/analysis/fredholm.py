"""Winding number and Fredholm index of Toeplitz symbols.

Convention
----------
A TMM mixer applies, per head (and per channel offset of the kernel
variant), the causal Toeplitz matrix ``T[t, s] = w[t - s]`` (``t >= s``,
lower triangular) to a column of inputs *from the left*::

    y = T x,    y[t] = sum_{s <= t} w[t - s] x[s]

so ``w[k]`` is the weight of the input k steps back (lag k). Its symbol, as
in the paper, is

    phi(z) = sum_k w_k z^(-k),   on the unit circle z = e^{i theta},
    phi(e^{i theta_m}) = sum_k w_k e^{-i k theta_m}  (= the DFT of w),
    theta_m = 2 pi m / M,  m = 0..M-1.

``winding`` is the winding number of the closed curve ``theta -> phi(e^{i
theta})``, theta going once round from 0 to 2 pi (counter-clockwise in z),
about 0: the unwrapped phase change divided by 2 pi.

``index`` is the Fredholm index of the Toeplitz operator ``T`` on
one-sided sequences (l^2(N)) with these taps, dim ker T - dim coker T.
Gohberg's theorem says index T = -wind(a) for the generating function of the
matrix's diagonals, ``a(z) = sum_k w_k z^k`` (``T = (a_{t-s})``, Boettcher
and Silbermann's notation). The paper's ``phi`` is ``a`` with z replaced by
1/z, which runs the same curve backwards: ``wind(phi) = -wind(a)``. So, with
``y = T x`` (multiplication from the left):

    index = -wind(a) = +winding(phi) = winding.

Sanity cases: the one-step shift ``w = e_1`` (``y[t] = x[t-1]``) has
``phi(z) = z^-1``: winding -1 and index -1 (it is injective and its range
misses the first coordinate: dim ker 0, dim coker 1). ``w = e_2`` (``z^-2``):
winding -2, index -2. A kernel dominated by its lag-0 tap,
``|w_0| > sum_{k>0} |w_k|``, never winds (Rouche): index 0. Had the matrix
multiplied row vectors from the right (``y = x T``, i.e. the upper triangular
``T^T`` on columns), every index would change sign (the shift would be +1).

Equivalently, ``-index`` is the number of zeros of the polynomial
``a(z) = sum_k w_k z^k`` inside the unit disk (argument principle), the
"non-minimum-phase" zeros of the filter: index 0 means the causal filter has
a stable causal inverse, index -m that it behaves, up to an invertible
factor, like a delay by m steps. A finite n x n section of ``T`` is square
and has index 0; the index describes the operator these taps define on
arbitrarily long sequences.

Robustness
----------
The index is defined only when phi does not vanish on the circle. The phase
is accumulated in float64 from M samples (default ``max(4096, 8 n)``), each
step wrapped into (-pi, pi]; this is exact as long as the true phase moves by
less than pi between neighbouring samples. When some step exceeds pi/2 the
sampling is refined (M x 4, up to 64 x the first M). ``min_modulus`` /
``max_modulus`` are the extremes of |phi| over the final samples (the true
minimum can only be lower); ``near_zero`` is set when ``min_modulus <=
rel_tol * max_modulus`` (default 1e-3) or when the steps stayed too coarse:
the numbers are still reported, but the winding number (and the Fredholm
property itself) is not to be trusted for that kernel.
"""
import math
import re

import numpy as np
import torch

from tmm.files import atomic_savefig

DEFAULT_REL_TOL = 1e-3
_MAX_STEP = math.pi / 2
_REFINE_FACTOR = 4
_MAX_REFINE = 64


def default_points(n):
    """The default number of samples on the circle for a length-n vector."""
    return max(4096, 8 * int(n))


def _as_vector(w):
    if not isinstance(w, torch.Tensor):
        w = torch.as_tensor(np.asarray(w))  # python floats stay float64
    w = w.detach().to("cpu")
    if w.is_complex():
        return w.to(torch.complex128)
    return w.to(torch.float64)


def symbol(w, points=None):
    """``phi(e^{i theta_m}) = sum_k w_k e^{-i k theta_m}``, ``theta_m = 2 pi
    m / points``, m = 0..points-1, as a complex128 tensor of shape
    ``w.shape[:-1] + (points,)`` (w: ``(..., n)``, real or complex).

    Computed with one FFT of w zero-padded to ``points`` (default
    ``max(4096, 8n)``); with fewer points than taps, w is first folded modulo
    ``points`` (exact: ``e^{-i k theta_m}`` has period ``points`` in k)."""
    w = _as_vector(w)
    if w.dim() == 0:
        w = w.reshape(1)
    n = w.shape[-1]
    m = default_points(n) if points is None else int(points)
    if m < 1:
        raise ValueError(f"symbol: points must be >= 1, got {points}")
    if n > m:
        folded = torch.zeros(w.shape[:-1] + (m,), dtype=w.dtype)
        folded.index_add_(w.dim() - 1, torch.arange(n) % m, w)
        w = folded
    return torch.fft.fft(w, n=m, dim=-1)


def _phase_steps(phi):
    """Wrapped phase increments between neighbouring samples, closing the loop."""
    ang = torch.angle(phi)
    d = torch.roll(ang, -1, dims=-1) - ang
    return torch.remainder(d + math.pi, 2 * math.pi) - math.pi


def winding_number(w, points=None, rel_tol=DEFAULT_REL_TOL, refine=True):
    """Winding number of the symbol of ``w`` (1-D, length n) about 0, and the
    Fredholm index under the module's convention (``y = T x``,
    ``T[t, s] = w[t - s]``: ``index = winding``).

    Returns a dict:

    - ``winding`` (int): round(total unwrapped phase change / 2 pi) of
      ``phi(e^{i theta})``, theta from 0 to 2 pi. ``w = e_1`` gives -1.
    - ``index`` (int): the Fredholm index, equal to ``winding`` here.
    - ``winding_exact`` (float): the phase change / 2 pi before rounding
      (far from an integer only when the symbol passes through zero).
    - ``min_modulus``, ``max_modulus`` (float): min and max of |phi| over
      the samples.
    - ``near_zero`` (bool): ``min_modulus <= rel_tol * max_modulus``, or the
      sampling stayed too coarse to follow the phase; the winding number is
      then unreliable (still reported).
    - ``points`` (int): samples used (after refinement);
      ``max_phase_step`` (float): the largest phase step between samples.
    - ``n`` (int): the number of taps.
    """
    w = _as_vector(w)
    if w.dim() != 1:
        raise ValueError(f"winding_number: expected a 1-D vector, got shape {tuple(w.shape)}")
    n = w.numel()
    if n == 0:
        raise ValueError("winding_number: empty vector")
    m = default_points(n) if points is None else int(points)
    m_cap = m * _MAX_REFINE
    while True:
        phi = symbol(w, m)
        steps = _phase_steps(phi)
        max_step = float(steps.abs().max())
        if not refine or max_step <= _MAX_STEP or m * _REFINE_FACTOR > m_cap:
            break
        m *= _REFINE_FACTOR
    modulus = phi.abs()
    min_mod, max_mod = float(modulus.min()), float(modulus.max())
    total = float(steps.sum())
    winding_exact = total / (2 * math.pi)
    winding = int(round(winding_exact))
    near_zero = bool(max_mod == 0.0 or min_mod <= rel_tol * max_mod or max_step > _MAX_STEP)
    return {
        "winding": winding,
        "index": winding,
        "winding_exact": winding_exact,
        "min_modulus": min_mod,
        "max_modulus": max_mod,
        "near_zero": near_zero,
        "points": m,
        "max_phase_step": max_step,
        "n": n,
    }


# The state-dict names of a TMM's Toeplitz vectors (group 1: the layer, group 2: the parameter).
MIXER_KEY = re.compile(r"^blocks\.(\d+)\.mixer\.(weight2?)$")


def analyse_model(model, points=None, rel_tol=DEFAULT_REL_TOL):
    """Winding number and index of every Toeplitz vector of a TMM model.

    ``model``: a ``tmm.models`` TMM (``tmm.models.build`` / ``load``), or a
    state dict with its tensor names. Reads ``blocks.<i>.mixer.weight``
    (G x K x N: G heads, or 1 when flat; K channel offsets of the kernel
    variant; N = max_len) and, for the ``expanded`` mixer, the second
    Toeplitz layer ``blocks.<i>.mixer.weight2``. ``frozen`` vectors are
    buffers and are analysed too.

    Returns one dict per (layer, param, head, tap), ordered by layer: the
    keys of :func:`winding_number` plus ``layer``, ``param`` ("weight" or
    "weight2"), ``head`` (0 for the flat mixer), ``tap`` (the kernel
    variant's offset i = 0..K-1: the kernel that carries channel
    ``c - (K-1) + i`` into channel c; 0 otherwise) and ``w`` (the vector, a float64 CPU tensor,
    for :func:`plot_symbols`; :func:`to_jsonable` drops it). For the
    ``masked`` mixer (a full lower-triangular matrix, not Toeplitz: no
    symbol) it returns one dict per layer with ``skipped`` set to a note.
    """
    config = getattr(model, "config", None)
    if isinstance(config, dict):
        if config.get("arch") != "tmm":
            raise ValueError(
                f"analyse_model: only TMM models have explicit Toeplitz vectors (this is '{config.get('arch')}')"
            )
        mixer = config.get("mixer", "toeplitz")
    else:
        mixer = None
    state = model.state_dict() if hasattr(model, "state_dict") else dict(model)
    found = []
    for key, tensor in state.items():
        match = MIXER_KEY.match(key)
        if match:
            found.append((int(match.group(1)), match.group(2), tensor))
    if not found:
        raise ValueError("analyse_model: no 'blocks.<i>.mixer.weight' tensors (not a TMM model?)")
    found.sort(key=lambda item: (item[0], item[1]))

    results = []
    for layer, param, tensor in found:
        if mixer == "masked" or (mixer is None and tensor.dim() == 3 and tensor.shape[-1] == tensor.shape[-2] > 1):
            results.append({
                "layer": layer,
                "param": param,
                "skipped": "masked mixer: a full lower-triangular matrix per head, not Toeplitz (no symbol)",
            })
            continue
        if tensor.dim() != 3:
            raise ValueError(
                f"analyse_model: blocks.{layer}.mixer.{param} has shape {tuple(tensor.shape)}, expected G x K x N"
            )
        vectors = _as_vector(tensor)
        heads, taps, _ = vectors.shape
        for g in range(heads):
            for i in range(taps):
                w = vectors[g, i].clone()
                entry = {"layer": layer, "param": param, "head": g, "tap": i}
                entry.update(winding_number(w, points=points, rel_tol=rel_tol))
                entry["w"] = w
                results.append(entry)
    return results


def to_jsonable(results):
    """Copies of ``results`` without the tensors (``w``), for JSON."""
    return [{k: v for k, v in r.items() if not isinstance(v, torch.Tensor)} for r in results]


def plot_symbols(results, path, title=None, max_curves=16):
    """Plot the symbol curves ``phi(e^{i theta})`` in the complex plane: one
    panel per layer (and per param for the expanded mixer), one curve per
    head / tap (at most ``max_curves`` a panel), labelled with its index and
    marked "near 0" when flagged; the origin is marked with a cross. Needs
    the ``w`` of :func:`analyse_model`'s results. Written atomically
    (temporary file, then ``os.replace``) to ``path``; the format follows
    its extension (PNG by default). Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    panels = {}
    for r in results:
        if "skipped" in r:
            continue
        if not isinstance(r.get("w"), torch.Tensor):
            raise ValueError("plot_symbols: results lack the vectors 'w' (pass analyse_model's results)")
        panels.setdefault((r["layer"], r["param"]), []).append(r)
    if not panels:
        raise ValueError("plot_symbols: nothing to plot (every layer skipped?)")
    keys = sorted(panels)
    ncols = min(4, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 4.0 * nrows), squeeze=False)
    try:
        for ax in axes.flat[len(keys):]:
            ax.axis("off")
        for ax, key in zip(axes.flat, keys):
            layer, param = key
            multi_tap = any(r["tap"] for r in panels[key])
            for r in panels[key][:max_curves]:
                n = r["w"].numel()
                phi = symbol(r["w"], min(65536, max(2048, 64 * n)))
                phi = torch.cat([phi, phi[:1]])
                label = f"h{r['head']}" + (f" t{r['tap']}" if multi_tap else "") + f": index {r['index']}"
                if r["near_zero"]:
                    label += " (near 0)"
                ax.plot(phi.real.numpy(), phi.imag.numpy(), lw=0.8, label=label)
            ax.plot([0], [0], marker="+", color="black", markersize=12, mew=1.5)
            ax.axhline(0, color="0.85", lw=0.5, zorder=0)
            ax.axvline(0, color="0.85", lw=0.5, zorder=0)
            ax.set_aspect("equal", adjustable="datalim")
            ax.set_title(f"layer {layer}" + ("" if param == "weight" else f" ({param})"), fontsize=10)
            ax.set_xlabel(r"Re $\phi$")
            ax.set_ylabel(r"Im $\phi$")
            ax.legend(fontsize=7, loc="best")
        fig.suptitle(title or r"Toeplitz symbols $\phi(e^{i\theta}) = \sum_k w_k e^{-ik\theta}$", fontsize=11)
        fig.tight_layout()
        atomic_savefig(fig, path, dpi=120)
    finally:
        plt.close(fig)
    return path
