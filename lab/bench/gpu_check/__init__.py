"""The one-shot GPU check (scripts/gpu_check.sh; docs/cuda.md, "The GPU
check"): on a machine with a GPU it checks and benchmarks the CUDA op in one
call; with device "cpu" (the CPU mode, run in CI) the same code runs against
the CPU op.

run() makes gpu_check.json in the output folder, rewritten after every record
(a kill at any point leaves a readable partial file, "complete": false), in
sections, each skipped once the deadline leaves it too little time:

  tests      what the caller's ``run_tests`` returns: scripts/gpu_check.py
             passes the repository's op tests, by pytest on the device, each
             kernel path forced (pytest_run.py)
  graphs     CUDA graphs through torch.compile(mode="reduce-overhead") vs
             eager, per path (device_checks.py)
  zoo        one training step of each zoo model, float32 and bf16 autocast,
             vs the CPU (zoo_step.py)
  bandwidth  the copy bandwidth (the ceiling for the benchmark's bytes/s)
  bench      the operator benchmark (lab.bench.ops, i.e. bench_ops with
             --device) on the device's grid, per dtype, into bench-<dtype>/

report() then adds what the shell script ran around it (steps.tsv: the
preflight, the build, the check and sanitizer steps with their exit status;
sanitizer.log) and writes the verdict and tables (summary.py) to table.md.
"""
from __future__ import annotations

import contextlib
import json
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

import torch

from ..ops import OpsBenchConfig
from ..provenance import environment, git
from tmm.files import atomic_write_json, atomic_write_text
from ..report import LiveJson
from . import summary
from .device_checks import copy_bandwidth, graphs_check, sanitize_case
from .zoo_step import zoo_steps

__all__ = ["SECTIONS", "PATHS", "grid", "run", "run_sanitize_case", "report"]

SCHEMA = "tmm.gpu_check/2"
SECTIONS = ("tests", "graphs", "zoo", "bandwidth", "bench")
PATHS = {"cuda": ("cufft", "fused"), "cpu": ("direct", "fft")}
# Seconds each section needs at least: the tests stop early enough to leave
# these to the sections after them; a section with less left is skipped.
NEEDS = {"cuda": {"tests": 30, "graphs": 15, "zoo": 15, "bandwidth": 5, "bench": 45},
         "cpu": {"tests": 10, "graphs": 10, "zoo": 5, "bandwidth": 2, "bench": 10}}
FINISH_S = 10  # the benchmark stops this long before its deadline: its table and plot are still to write
FUSED_MAX_L = 4096  # cuda/fused_fft.cuh: n = next_pow2(2L-1) <= 8192; longer L falls back to cufft


def grid(device_type: str, dtype: str) -> OpsBenchConfig:
    """The benchmark grid of the check: the issue's GPU grid, or a tiny one on the CPU."""
    if device_type == "cuda":
        return OpsBenchConfig(lengths=[1024, 4096, 16384, 65536], batch=8, channels=1024, gk=[(1, 1), (1024, 1)],
                              dtype=dtype, device="cuda", repeats=10, warmup=2, cell_budget=3.0,
                              dense_max_gib=8.0, dense_max_len=16384, paths=list(PATHS["cuda"]),
                              max_len={"ours_fused": FUSED_MAX_L})
    return OpsBenchConfig(lengths=[32, 96], batch=2, channels=16, gk=[(4, 2)], dtype=dtype, device="cpu",
                          repeats=3, warmup=1, cell_budget=2.0, paths=list(PATHS["cpu"]))


def _native(lib: Optional[str]):
    """(tmm.ops.path or None, why not): the package's native module, or
    libtmm_torch loaded by path (the op only: no tmm.ops, no models)."""
    import tmm

    if tmm._native_error is None:
        return tmm.ops.path, None
    if not lib:
        raise SystemExit(f"gpu_check: tmm._C is not built and no --lib was given ({tmm._native_error})")
    torch.ops.load_library(lib)
    return None, str(tmm._native_error)


def _log(t0: float, text: str) -> None:
    print(f"[gpu_check.py {time.time() - t0:5.0f}s] {text}", flush=True)


def run(device: str, out: Path, deadline: float, sections: Sequence[str] = SECTIONS, lib: Optional[str] = None,
        dtypes: Sequence[str] = (), run_tests: Optional[Callable[[Path, float], Dict[str, Any]]] = None,
        repo=None) -> int:
    """The checks into out/gpu_check.json. ``run_tests(out, deadline)`` is
    the tests section (its record: rc, killed, counts, per-test records;
    None: the section is skipped); ``repo`` the checkout whose git revision
    is recorded. Returns summary.exit_status of what ran."""
    t0 = time.time()
    dev = torch.device(device).type
    out.mkdir(parents=True, exist_ok=True)
    force, native_missing = _native(lib)
    paths = PATHS[dev] if force else ("auto",)
    force = force or (lambda name: contextlib.nullcontext())
    dtypes = list(dtypes) or (["bfloat16", "float32"] if dev == "cuda" else ["float32"])
    live = LiveJson(out / "gpu_check.json", {"schema": SCHEMA, "device": device, "deadline": deadline,
                                             "sections": list(sections), "env": environment(device),
                                             "git": git(repo)})
    if native_missing:
        live.set("native_missing", native_missing)
    todo = [s for s in SECTIONS if s in sections]
    for i, name in enumerate(todo):
        later = sum(NEEDS[dev][s] for s in todo[i + 1:])
        if deadline - later - time.time() < NEEDS[dev][name]:
            live.add("skipped_sections", {"section": name, "reason": "deadline"})
            live.set("truncated", True)
            _log(t0, f"{name}: skipped (deadline)")
            continue
        _log(t0, f"{name} ...")
        start = time.time()
        try:
            _SECTION[name](live, device, out, deadline - later, force, paths, run_tests, dtypes, native_missing)
        except Exception as e:  # noqa: BLE001 - recorded; the other sections still run
            live.add("errors", {"section": name, "error": f"{type(e).__name__}: {e}"[:1000],
                                "trace": traceback.format_exc()[-3000:]})
        live.data.setdefault("section_s", {})[name] = round(time.time() - start, 1)
        live.flush()
        _log(t0, f"{name} done")
    live.finish()
    return summary.exit_status(live.data)


def _tests(live, device, out, deadline, force, paths, run_tests, dtypes, native_missing):
    if native_missing or run_tests is None:
        reason = "tmm._C not built" if native_missing else "no test runner given"
        live.add("skipped_sections", {"section": "tests", "reason": reason})
        return
    live.set("tests", run_tests(out, deadline))


def _graphs(live, device, out, deadline, force, paths, run_tests, dtypes, native_missing):
    for rec in graphs_check(device, paths, force, deadline):
        live.add("graphs", rec)


def _zoo(live, device, out, deadline, force, paths, run_tests, dtypes, native_missing):
    if native_missing:
        live.add("skipped_sections", {"section": "zoo", "reason": "tmm._C not built"})
        return
    for rec in zoo_steps(device, deadline):
        live.add("zoo", rec)


def _bandwidth(live, device, out, deadline, force, paths, run_tests, dtypes, native_missing):
    live.set("copy_bandwidth", copy_bandwidth(device))


def _bench(live, device, out, deadline, force, paths, run_tests, dtypes, native_missing):
    from .. import ops

    bench = live.data.setdefault("bench", {})
    for dtype in dtypes:
        cfg = grid(torch.device(device).type, dtype)
        cfg.deadline = deadline - FINISH_S
        if native_missing:
            cfg.paths = []
        bench[dtype] = ops.run(cfg, out / f"bench-{dtype}", progress=False)["results"]
        live.flush()


_SECTION: Dict[str, Callable] = {"tests": _tests, "graphs": _graphs, "zoo": _zoo, "bandwidth": _bandwidth,
                                 "bench": _bench}


def run_sanitize_case(device: str, lib: Optional[str] = None) -> int:
    force, missing = _native(lib)
    calls = sanitize_case(device, PATHS[torch.device(device).type] if force else ("auto",),
                          force or (lambda name: contextlib.nullcontext()))
    print(f"sanitize case done ({calls} calls on {device})", flush=True)
    return 0


def _steps(path: Path):
    """steps.tsv (written by gpu_check.sh): name, exit status, seconds, note."""
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            name, rc, seconds, *note = line.split("\t") + [""]
            out.append({"name": name, "rc": rc, "seconds": seconds, "note": note[0].strip()})
    return out


def report(out: Path) -> int:
    """The final gpu_check.json and table.md from what the run left in `out`;
    prints the summary; returns the exit status."""
    jpath = out / "gpu_check.json"
    try:
        data: Dict[str, Any] = json.loads(jpath.read_text())
    except (OSError, ValueError) as e:
        data = {"schema": SCHEMA, "read_error": f"{jpath}: {e}"}
    data["steps"] = _steps(out / "steps.tsv")
    rc = next((s["rc"] for s in data["steps"] if s["name"] == "sanitizer"), "skipped")
    log = (out / "sanitizer.log").read_text(errors="replace") if (out / "sanitizer.log").exists() else ""
    data["sanitizer"] = summary.sanitizer_verdict(log, rc)
    pre = out / "preflight.txt"
    data["preflight"] = pre.read_text(errors="replace").splitlines() if pre.exists() else []
    status = summary.exit_status(data)
    data["exit_status"], data["verdict"] = status, summary.VERDICT[status]
    data["failures"], data["not_run"] = summary.failures(data), summary.not_run(data)
    atomic_write_json(jpath, data)
    text = summary.summary(data)
    atomic_write_text(out / "table.md", text)
    print(text, end="")
    print(f"gpu_check exit status: {status} ({summary.VERDICT[status]})")  # the shell script reads this line
    return status
