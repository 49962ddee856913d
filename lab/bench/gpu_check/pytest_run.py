"""The GPU check's tests section (lab.cli.gpu_check passes run_pytest to
lab.bench.gpu_check.run): the repository's own op tests (tests/python), run
by pytest on the check's device, read back as records.

pytest runs in a subprocess with --device (tests/python/conftest.py), which
also forces each kernel path of that device and fills the CUDA caching
allocator with NaN before each test; --records makes it append one JSON line
per test outcome as it happens, so a run killed by the deadline still leaves
every finished test; --deadline makes it skip the tests it could not start
in time ("deadline"), which marks the check partial rather than failed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

__all__ = ["DEFAULT_TESTS", "CPU_MODE_TESTS", "run_pytest", "read_records"]

DEFAULT_TESTS = ("tests/python/test_causal_toeplitz.py",)
# The CPU mode's share (the suite runs the whole file on the CPU anyway):
# both paths on every shape in float32 and bfloat16, the edge sizes, the
# backward op's masks and gradcheck.
CPU_MODE_TESTS = (DEFAULT_TESTS[0], "-k", "forced_path and (float32 or bfloat16 or edge_sizes) "
                                          "or backward_op_masks or gradcheck")
PER_TEST_TIMEOUT_S = 120  # pytest-timeout, where installed: one hung test does not take the whole budget


def read_records(path: Path) -> List[Dict[str, Any]]:
    """The JSON lines of a --records file; a last line cut by a kill is dropped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def run_pytest(tests: Sequence[str], device: str, repo: Path, out_dir: Path, deadline: float,
               extra: Sequence[str] = ()) -> Dict[str, Any]:
    """pytest on `tests` (files or node ids, relative to the checkout
    `repo`) until `deadline` (seconds since the epoch), its files in
    `out_dir`. Returns the command, its exit status, whether it was killed,
    and the per-test records."""
    records = out_dir / "tests.jsonl"
    records.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *tests, "--device", device, "--records", str(records),
           "--deadline", f"{deadline:.0f}", f"--junitxml={out_dir / 'junit.xml'}", "-q", "-rfE",
           "-p", "no:cacheprovider", *extra]
    if importlib.util.find_spec("pytest_timeout") is not None:
        cmd.append(f"--timeout={PER_TEST_TIMEOUT_S}")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p))
    # pytest stops starting tests at the deadline; the one running then may
    # take up to its own timeout, and is killed after a short grace.
    limit = max(1.0, deadline - time.time() + 20)
    started = time.time()
    with open(out_dir / "pytest.log", "w") as log:
        try:
            rc = subprocess.run(cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=limit).returncode
            killed = False
        except subprocess.TimeoutExpired:
            rc, killed = None, True
    recs = read_records(records)
    counts: Dict[str, int] = {}
    for r in recs:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    tail = (out_dir / "pytest.log").read_text(errors="replace").splitlines()[-15:]
    return {"command": cmd, "rc": rc, "killed": killed, "seconds": round(time.time() - started, 1),
            "counts": counts, "records": recs, "log_tail": tail}
