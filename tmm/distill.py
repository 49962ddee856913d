"""Distillation of TMM's and Hyena's long kernels into small state-space
models, for constant-memory decoding (``method="distilled"``), thin over the
C++ core (csrc/include/tmm/models/distill.h): each kernel keeps its first
``window`` taps exact and fits the tail with ``order`` damped modes.
docs/decoding.md is the manual (the fit, what holds and fails, the costs).

    d = tmm.distill.distill(model, order=16, window=16)   # fits and attaches
    tmm.distill.save(d, checkpoint_dir)                   # distilled.{json,safetensors}
"""
import os

from . import _C

_DEFAULTS = dict(steps=200, lr=1e-2, hankel_rows=256, max_radius=1 - 1e-6)

Distillation = _C._Distillation


def _options(steps, lr, hankel_rows, max_radius):
    return dict(steps=int(steps), lr=float(lr), hankel_rows=int(hankel_rows), max_radius=float(max_radius))


def distill(model, order=16, window=0, *, steps=_DEFAULTS["steps"], lr=_DEFAULTS["lr"],
            hankel_rows=_DEFAULTS["hankel_rows"], max_radius=_DEFAULTS["max_radius"], attach=True):
    """Fits every long kernel of ``model`` (a tmm.models TMM or Hyena) with
    ``order`` modes after ``window`` exact taps; attaches the result to the
    model (``method="distilled"`` decodes with it) unless ``attach=False``.
    Returns the Distillation: ``.order``, ``.window``, ``.names()``,
    ``.kernel(name)`` (taps, direct, lambda, residue, error, length),
    ``.materialize(name, n)``."""
    with model.engine() as engine:
        d = _C._distill(engine, int(order), int(window), **_options(steps, lr, hankel_rows, max_radius))
    if attach:  # fitted to this model's kernels: nothing to check
        model._distillation = d
    return d


def attach(model, distillation):
    """Makes ``model`` decode ``method="distilled"`` with ``distillation``
    (None: detach); checked against the model's kernels."""
    previous, model._distillation = model._distillation, distillation
    try:
        with model.engine():  # checks it
            pass
    except RuntimeError:
        model._distillation = previous
        raise


def of(model):
    """The distillation attached to ``model``, or None."""
    return model._distillation


def fit_modal(kernels, order, *, steps=_DEFAULTS["steps"], lr=_DEFAULTS["lr"],
              hankel_rows=_DEFAULTS["hankel_rows"], max_radius=_DEFAULTS["max_radius"]):
    """Fits each row of ``kernels`` (... x n, real) with ``order`` modes.
    Returns a dict: lambda, residue (... x order complex128), error (relative
    L2), abs_error (... float64)."""
    lam, res, err, abs_err = _C._fit_modal(kernels, int(order), **_options(steps, lr, hankel_rows, max_radius))
    return {"lambda": lam, "residue": res, "error": err, "abs_error": abs_err}


def modal_kernel(lam, residue, n):
    """sum_i Re(residue_i lam_i^t) for t < n: ... x n float64."""
    return _C._modal_kernel(lam, residue, int(n))


def save(distillation, directory):
    """Writes directory/distilled.json and directory/distilled.safetensors
    (beside a checkpoint, so ``tmm generate --method distilled`` serves it)."""
    _C._save_distillation(distillation, os.fspath(directory))


def load(directory):
    """The distillation saved in ``directory``."""
    return _C._load_distillation(os.fspath(directory))


def saved(directory):
    """Whether ``directory`` holds a saved distillation."""
    return _C._has_distillation(os.fspath(directory))


__all__ = ["Distillation", "distill", "attach", "of", "fit_modal", "modal_kernel", "save", "load", "saved"]
