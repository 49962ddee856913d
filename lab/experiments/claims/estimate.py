"""The suite's cost before it runs, and the step-time table.

:func:`plan_table` adds up a dry run's jobs (training runs, tokens,
estimated FLOPs); :func:`time_plan` times a few training steps of every
distinct model of the plan on the device (lab.experiments.budget.time_steps)
and multiplies by the planned steps: the estimated training time, and the
step-time table that docs/experiments.md reports beside the curves (measured
on an idle machine, apart from the runs).
"""
from __future__ import annotations

import json

import tmm.tasks

from ..budget import time_steps
from tmm.tables import markdown_table
from ..formatting import fmt_flops
from ..model_configs import fit_to_task
from ..task_options import parse_task_options
from .models import ModelSpec

__all__ = ["plan_table", "time_plan"]


def _claim(job) -> str:
    return job.path.split("/", 1)[0]  # a job's path starts with its claim


def plan_table(plan: list, seconds: dict = None) -> str:
    """Per claim: jobs, training runs, tokens, estimated FLOPs, and with
    ``seconds`` (claim -> timed training seconds, :func:`time_plan`) hours."""
    per = {}
    for job in plan:
        row = per.setdefault(_claim(job), [0, 0, 0, 0.0])
        row[0] += 1
        row[1] += len(job.models)
        row[2] += job.tokens * len(job.models)
        row[3] += job.flops_est
    rows = [[k, str(v[0]), str(v[1]), f"{v[2]:,}", fmt_flops(v[3]) if v[3] else "-"] for k, v in per.items()]
    total = [sum(v[i] for v in per.values()) for i in range(4)]
    rows.append(["total", str(total[0]), str(total[1]), f"{total[2]:,}", fmt_flops(total[3])])
    header = ["claim", "jobs", "training runs", "tokens", "est. FLOPs"]
    if seconds is not None:
        hours = [seconds.get(k, 0.0) / 3600 for k in per] + [sum(seconds.values()) / 3600]
        rows = [row + [f"{h:.2f}" if h else "-"] for row, h in zip(rows, hours)]
        header.append("est. hours")
    return markdown_table(header, rows)


def _model_configs(job):
    """(label, fitted config, task) of each model of a planned compare job."""
    rec = job.settings
    task = tmm.tasks.make(rec["task"], **parse_task_options(rec["task_option"]))
    for m in rec["models"]:
        spec = ModelSpec(m["label"], m["base"], tuple(tuple(kv) for kv in m["overrides"]))
        yield spec.label, fit_to_task(spec.config(), task), task


def time_plan(plan: list, device="cpu", n=3, say=None) -> tuple:
    """(markdown step-time table, claim -> estimated training seconds):
    every distinct (config, task, batch) timed once."""
    timed, seconds, rows = {}, {}, []
    for job in plan:
        if job.kind != "compare":
            continue
        batch = job.settings["batch_size"]
        for label, cfg, task in _model_configs(job):
            key = (json.dumps(cfg, sort_keys=True), json.dumps(task.options, sort_keys=True), batch)
            if key not in timed:
                if say:
                    say(f"timing {label} ({task.name}, sequence {task.seq_len}, batch {batch})")
                timed[key] = time_steps(cfg, task, batch, seed=0, n=n, device=device)
                tokens_s = batch * task.seq_len / timed[key]
                rows.append([label, f"{task.name} {task.seq_len}", str(batch), f"{timed[key] * 1e3:.1f}",
                             f"{tokens_s:,.0f}"])
            seconds[_claim(job)] = seconds.get(_claim(job), 0.0) + timed[key] * job.steps
    table = markdown_table(["model", "task, sequence", "batch", "ms / step", "tokens / s"], rows, left=2)
    return table, seconds
