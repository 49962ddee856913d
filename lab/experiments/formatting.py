"""Numbers as the drivers' tables show them ("-" for what is missing); the
tables themselves are tmm.tables'."""
from __future__ import annotations

import math

__all__ = ["fmt_int", "fmt_num", "fmt_flops", "fmt_any"]


def fmt_int(n):
    return f"{n:,}"


def fmt_num(x, nd=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{nd}f}"


def fmt_flops(x):
    if x is None:
        return "-"
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


def fmt_any(x, nd=3):
    """An int with thousands separators, a float with nd decimals, None as "-"."""
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{nd}f}"
