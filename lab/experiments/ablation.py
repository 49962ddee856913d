"""The TMM ablation (the paper's claim 4): TMM variants that differ only in
the mixer, compared on one task by the comparison driver.

    from lab.experiments.ablation import run_ablation
    result = run_ablation(steps=300, time_budget_min=6, out="results/ablation-copy")
    result = run_ablation(["heads4", "flat"], task="lm", steps=200)

On the command line: ``python scripts/compare.py --ablation [heads4,flat,...]``.
The variants (``models/ablation/tmm-<variant>.json``) are
:data:`~lab.experiments.model_configs.ABLATION_VARIANTS`, looked up by
:func:`~lab.experiments.model_configs.ablation_configs`.
"""
from __future__ import annotations

from .compare import CompareResult, CompareSettings, run_comparison

__all__ = ["run_ablation"]


def run_ablation(variants=None, **settings) -> CompareResult:
    """The comparison of ``variants`` (default: every documented one); ``settings``
    are the other fields of :class:`~lab.experiments.compare.CompareSettings`
    (task, steps, ...) and ``run_comparison``'s keywords (results_root, log_prefix, command, repo)."""
    run_keys = {"results_root", "log_prefix", "command", "repo"}
    run_opts = {k: settings.pop(k) for k in list(settings) if k in run_keys}
    return run_comparison(CompareSettings(ablation=variants or "all", **settings), **run_opts)
