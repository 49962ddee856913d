"""The zoo's speed under two checkouts of tmm, side by side in one run
(scripts/bench_revisions.py; the table in docs/benchmarks.md): a training
step of each zoo model (forward, next-token loss, backward, AdamW), eager
and torch.compile'd, and greedy generation's tokens per second.

Each measurement is a child process importing tmm from one checkout (an
in-place build), so that two revisions of the library run the same timing
code; the rounds alternate between the checkouts (interleaved, as this
machine is noisy) and each cell is the median over rounds of the median
step. The child code (revisions_child.py) uses only the public API both
revisions have.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from tmm.files import atomic_write_json, atomic_write_text
from tmm.progress import Progress
from tmm.tables import markdown_table

from .provenance import environment, git

__all__ = ["DEFAULTS", "SMOKE", "run", "table"]

DEFAULTS: Dict[str, Any] = dict(configs=["tmm-cpu-small", "transformer-cpu-small", "hyena-cpu-small",
                                         "mamba2-cpu-small"], batch=8, seq=256, steps=5, warmup=2, rounds=3,
                                compile_backend="inductor", prompt=32, new_tokens=64, threads=2)
# CPU smoke mode: tiny models, seconds (tests/python/test_bench.py); not a measurement.
SMOKE: Dict[str, Any] = dict(DEFAULTS, configs=["tmm-tiny", "mamba2-tiny"], batch=2, seq=16, steps=1, warmup=1,
                             rounds=1, compile_backend="aot_eager", prompt=4, new_tokens=4, threads=1)


def _measure(checkout: Path, spec: Dict[str, Any]) -> Dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(checkout), OMP_NUM_THREADS=str(spec["threads"]))
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import revisions_child as c; print(json.dumps(c.child(json.loads(sys.argv[1]))))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], capture_output=True, text=True, env=env,
                       cwd=str(checkout))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"bench_revisions: {checkout} {spec['config']}: exit {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(lines[-1])


def run(cfg: Dict[str, Any], checkouts: Dict[str, Path], out: Path, progress: bool = True) -> Dict[str, Any]:
    """Times every config under each checkout ({label: path}), rounds
    interleaved; writes results.json and table.md to `out`."""
    cfg = {**DEFAULTS, **cfg}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    samples: Dict[str, Dict[str, List[Dict[str, float]]]] = {c: {k: [] for k in checkouts} for c in cfg["configs"]}
    bar = Progress(total=cfg["rounds"] * len(cfg["configs"]) * len(checkouts), desc="bench_revisions", unit="run",
                   enabled=progress)
    try:
        for r in range(cfg["rounds"]):
            for config in cfg["configs"]:
                labels = list(checkouts) if r % 2 == 0 else list(reversed(checkouts))  # alternate who goes first
                for label in labels:
                    spec = {k: cfg[k] for k in ("batch", "seq", "steps", "warmup", "compile_backend", "prompt",
                                                "new_tokens", "threads")}
                    samples[config][label].append(_measure(Path(checkouts[label]), {**spec, "config": config}))
                    bar.update(1)
    finally:
        bar.close()
    cells = {c: {label: {k: statistics.median(s[k] for s in runs) for k in runs[0]}
                 for label, runs in per.items()} for c, per in samples.items()}
    results = {"config": cfg, "env": environment("cpu"), "checkouts": {k: git(Path(v)) for k, v in checkouts.items()},
               "cells": cells, "samples": samples}
    atomic_write_json(out / "results.json", results)
    atomic_write_text(out / "table.md", table(results) + "\n")
    return results


def table(results: Dict[str, Any]) -> str:
    """One row per config: each checkout's step times and tokens/s, and the
    ratios of the last checkout to the first (< 1 faster for steps, > 1
    faster for tokens/s)."""
    labels = list(results["checkouts"])
    a, b = labels[0], labels[-1]
    rows = []
    for config, per in results["cells"].items():
        row = [config]
        for key, fmt in (("eager_step_ms", "{:.1f}"), ("compiled_step_ms", "{:.1f}"), ("generate_tok_s", "{:.0f}")):
            row += [fmt.format(per[a][key]), fmt.format(per[b][key]), f"{per[b][key] / per[a][key]:.3f}"]
        rows.append(row)
    head = ["config"]
    for what in ("eager step ms", "compiled step ms", "greedy tokens/s"):
        head += [f"{what} {a}", f"{what} {b}", f"{b}/{a}"]
    return markdown_table(head, rows)
