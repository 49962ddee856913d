"""A finished job's results, and their aggregation over seeds.

A :class:`JobResult` maps each model's label (its config's stem, so the
suite's labels, not the comparison's) to a :class:`ModelResult`: its summary
row and its evaluation rows. :func:`over_seeds` pools one label across the
jobs of several seeds into a :class:`Pooled` (mean and range).
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Optional

from tmm.train import flops_per_token

__all__ = ["ModelResult", "JobResult", "Pooled", "read_compare_job", "over_seeds", "value_at", "steps_to",
           "speed_share"]


@dataclasses.dataclass
class ModelResult:
    label: str
    params: int
    status: str  # done, stopped, diverged, interrupted
    final_acc: Optional[float]
    final_eval_loss: Optional[float]
    steps_to_learned: Optional[int]  # first evaluation at >= 0.9 accuracy
    rows: list  # evaluation rows: step, tokens, flops_est, eval_loss, eval_acc (and eval_bpb for lm)
    peak_mem_mib: Optional[float] = None  # measured while training (lab.bench.memory.PeakMemory); None: not measured
    seed: Optional[int] = None  # the job's seed: runs of one seed saw the same batches (paired)

    @property
    def final_bpb(self) -> Optional[float]:
        return self.rows[-1].get("eval_bpb") if self.rows else None


JobResult = dict  # label -> ModelResult


def read_compare_job(out: Path) -> JobResult:
    """The results of the comparison in ``out`` (summary.json, metrics.jsonl
    and config.json). Each row's ``flops_est`` is recomputed from its tokens
    with the current estimate (tmm.train.flops_per_token), so that jobs
    finished before a fix of the formula compare on the same footing."""
    out = Path(out)
    summary = json.loads((out / "summary.json").read_text())
    record = json.loads((out / "config.json").read_text())
    seed = record.get("args", {}).get("seed")
    per_token = {m["config_name"]: flops_per_token(m["config"], m["params"], record["task"]["seq_len"])
                 for m in record["models"]}
    rows = {}
    with open(out / "metrics.jsonl") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if row["config"] in per_token:
                    row["flops_est"] = per_token[row["config"]] * row["tokens"]
                rows.setdefault(row["config"], []).append(row)
    res = {}
    for s in summary["runs"]:
        label = s["config"]
        res[label] = ModelResult(label, s["params"], s["status"], s["final_acc"], s["final_eval_loss"],
                                 s["steps_to_learned"], sorted(rows.get(label, []), key=lambda r: r["step"]),
                                 s.get("peak_mem_mib"), seed)
    return res


@dataclasses.dataclass
class Pooled:
    """One model over seeds: per-seed values and their mean / min / max."""
    label: str
    params: int
    runs: list  # ModelResult per seed

    def by_seed(self) -> dict:
        """seed -> ModelResult (runs without a seed keyed by their position)."""
        return {r.seed if r.seed is not None else i: r for i, r in enumerate(self.runs)}

    def values(self, key) -> list:
        return [v for v in (getattr(r, key) for r in self.runs) if v is not None and math.isfinite(v)]

    def mean(self, key) -> Optional[float]:
        vals = self.values(key)
        return sum(vals) / len(vals) if vals else None

    def range(self, key) -> Optional[tuple]:
        vals = self.values(key)
        return (min(vals), max(vals)) if vals else None

    @property
    def reached(self) -> int:
        """Seeds whose run reached 0.9 accuracy."""
        return sum(r.steps_to_learned is not None for r in self.runs)

    @property
    def statuses(self) -> list:
        return [r.status for r in self.runs]


def over_seeds(jobs: list) -> dict:
    """label -> Pooled over the JobResults ``jobs`` (one per seed), in the first job's order."""
    jobs = [j for j in jobs if j]
    pooled = {}
    for job in jobs:
        for label, r in job.items():
            pooled.setdefault(label, Pooled(label, r.params, [])).runs.append(r)
    return pooled


def value_at(rows: list, x_key: str, y_key: str, x: float) -> Optional[float]:
    """``y_key`` at ``x`` of ``x_key``, linearly interpolated between the
    evaluation rows; None where the rows do not reach ``x``."""
    pts = [(r[x_key], r[y_key]) for r in rows if r.get(y_key) is not None]
    if not pts or x > pts[-1][0] or x < pts[0][0]:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[0][1]


def steps_to(run, threshold: float) -> Optional[int]:
    """The first evaluation step of ``run`` (a ModelResult) at >= ``threshold`` accuracy; None if never."""
    return next((r["step"] for r in run.rows if (r.get("eval_acc") or 0.0) >= threshold), None)


def speed_share(a, b, threshold: float) -> Optional[float]:
    """``a``'s share of the two runs' speeds to ``threshold`` accuracy, speed being 1 / steps to it and 0 for a run
    that never got there: 0.5 when as fast, 0.4 when ``a`` takes 1.5x ``b``'s steps, 1 when only ``a`` got
    there, 0 when only ``b`` did; None when neither did. Bounded, so that runs which learn and runs which do not
    compare on one scale."""
    sa, sb = steps_to(a, threshold), steps_to(b, threshold)
    if sa is None or sb is None:
        return None if sa is None and sb is None else float(sb is None)
    return sb / (sa + sb)  # = (1 / sa) / (1 / sa + 1 / sb)
