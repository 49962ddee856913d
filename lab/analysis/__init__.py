"""Analyses of trained models.

- :mod:`lab.analysis.fredholm`: the operator-index analysis: the winding
  number of each TMM layer's and head's Toeplitz symbol and the Fredholm index
  it gives (convention: ``y = T x`` with ``T[t, s] = w[t - s]``, so a one-step
  shift has index -1; see that module's docstring).

    from lab.analysis import analyse_model, plot_symbols, winding_number
    winding_number([0.0, 1.0])["index"]      # -1: the shift
    results = analyse_model(tmm.models.load("ckpt/"))
    plot_symbols(results, "symbols.png")
"""
from .fredholm import (
    DEFAULT_REL_TOL,
    analyse_model,
    default_points,
    plot_symbols,
    symbol,
    to_jsonable,
    winding_number,
)

__all__ = [
    "symbol",
    "winding_number",
    "analyse_model",
    "plot_symbols",
    "to_jsonable",
    "default_points",
    "DEFAULT_REL_TOL",
]
