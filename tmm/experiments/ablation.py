"""The TMM ablation (the paper's claim 4): TMM variants that differ only in
the mixer, compared on one task by the comparison driver.

    from tmm.experiments.ablation import run_ablation
    result = run_ablation(steps=300, time_budget_min=6, out="results/ablation-copy")
    result = run_ablation(["heads4", "flat"], task="lm", steps=200)

On the command line: ``python scripts/compare.py --ablation [heads4,flat,...]``.

A variant is a config ``models/ablation/tmm-<variant>.json``: the
``tmm-cpu-small`` block (d = 128, 6 layers) with one change of the mixer.
:data:`VARIANTS` is the documented set, in the order of docs/experiments.md;
any other file there is a variant too (by its name without ``tmm-``).
"""
from __future__ import annotations

from pathlib import Path

import tmm.models

from .compare import CompareResult, CompareSettings, run_comparison
from .errors import SettingsError

__all__ = ["VARIANTS", "available", "variant_configs", "run_ablation"]

VARIANTS = ("heads4", "flat", "heads16", "kernel8", "expanded", "frozen", "masked")


def _folder() -> Path:
    folder = tmm.models.models_dir()
    return (folder / "ablation") if folder is not None else Path("models") / "ablation"


def available() -> list:
    """The variants models/ablation/ holds: the documented ones first, in their order, then the others."""
    found = sorted(p.stem[len("tmm-"):] for p in _folder().glob("tmm-*.json"))
    return [v for v in VARIANTS if v in found] + [v for v in found if v not in VARIANTS]


def variant_configs(variants=None) -> list:
    """The config paths of ``variants`` (names, a comma-separated string, or
    None / "all": :data:`VARIANTS`)."""
    if variants is None or variants == "all":
        variants = VARIANTS
    elif isinstance(variants, str):
        variants = [v.strip() for v in variants.split(",") if v.strip()]
    have = available()
    unknown = [v for v in variants if v not in have]
    if unknown or not variants:
        raise SettingsError(f"--ablation: no variant {', '.join(unknown) or '(none given)'} in {_folder()} "
                            f"(variants: {', '.join(have)})")
    return [str(_folder() / f"tmm-{v}.json") for v in variants]


def run_ablation(variants=None, **settings) -> CompareResult:
    """The comparison of ``variants`` (default :data:`VARIANTS`); ``settings``
    are the other fields of :class:`~tmm.experiments.compare.CompareSettings`
    (task, steps, ...) and ``run_comparison``'s keywords (results_root, log_prefix)."""
    run_keys = {"results_root", "log_prefix", "command"}
    run_opts = {k: settings.pop(k) for k in list(settings) if k in run_keys}
    return run_comparison(CompareSettings(ablation=variants or "all", **settings), **run_opts)
