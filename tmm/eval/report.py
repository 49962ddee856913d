"""The table of an lm-eval run (``scripts/evaluate.py``): one row per task
(and group) and metric, from the dict ``lm_eval.simple_evaluate`` returns.
Needs no lm-eval itself.

    rows = tmm.eval.report.rows(results)          # [{"task", "metric", "filter", "value", "stderr", "n_shot", "samples"}]
    text = tmm.eval.report.markdown(rows, title="tmm-paper-20m, step 200000")
"""
from __future__ import annotations

import math

from ..tables import markdown_table

__all__ = ["rows", "markdown", "json_summary"]


def _number(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def rows(results: dict) -> list:
    """One dict per (task or group, metric, filter), in the harness's order: groups' rows first."""
    out = []
    n_shot = results.get("n-shot", {}) or {}
    samples = results.get("n-samples", {}) or {}
    seen = set()
    for column in ("groups", "results"):
        for task, metrics in (results.get(column) or {}).items():
            if (task, column) in seen:
                continue
            seen.add((task, column))
            for key, value in sorted(metrics.items()):
                if "," not in key or "_stderr," in key or _number(value) is None:
                    continue
                metric, filt = key.split(",", 1)
                stderr = _number(metrics.get(f"{metric}_stderr,{filt}"))
                count = samples.get(task, {})
                out.append({"task": task, "group": column == "groups", "metric": metric, "filter": filt,
                            "value": _number(value), "stderr": stderr, "n_shot": n_shot.get(task),
                            "samples": count.get("effective") if isinstance(count, dict) else None})
    return out


def _fmt(v, digits=4):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}"


def markdown(table_rows: list, title: str | None = None) -> str:
    """A markdown table of :func:`rows` (value ± stderr)."""
    head = ["task", "metric", "filter", "n-shot", "samples", "value", "± stderr"]
    cells = [[f"**{r['task']}**" if r["group"] else r["task"], r["metric"], r["filter"],
              "" if r["n_shot"] is None else r["n_shot"], "" if r["samples"] is None else r["samples"],
              _fmt(r["value"]), _fmt(r["stderr"])] for r in table_rows]
    lines = [f"## {title}", ""] if title else []
    return "\n".join(lines + [markdown_table(head, cells, left=len(head))]) + "\n"


def json_summary(results: dict, extra: dict | None = None) -> dict:
    """What evaluate.py writes as JSON: the rows, the harness's per-task results and configs, no samples."""
    keep = ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples",
            "config", "git_hash", "date", "total_evaluation_time_seconds")
    return {**(extra or {}), "rows": rows(results), "lm_eval": {k: results[k] for k in keep if k in results}}
