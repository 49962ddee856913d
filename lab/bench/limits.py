"""Resource limits (scripts/resource_limits.py): the longest sequence each
model handles in this machine's memory, and what happens past it.

For each architecture at the benchmark size (d = 512, 4 layers, byte vocab)
and each mode (inference: forward without autograd; training: forward +
backward, batch 1), peak resident memory is measured in a fresh process
(``python -m lab.bench.limits ARCH MODE LENGTH LIMIT_GIB``) at growing
lengths; the last two points give bytes per token, and so the longest
sequence that fits in `memory_gib`. The prediction is then checked under an
address-space limit of `check_gib`: a length at 60% of the predicted limit
must run, one at twice the limit must fail with a clear out-of-memory error
(not a crash or a hang) within `timeout` seconds.
"""
from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from typing import Any, Dict, List

from .memory import reset_peak_rss, status_kib
from tmm.progress import Progress
from tmm.tables import markdown_table

__all__ = ["ARCHS", "measure", "run", "table"]

ARCHS = {"tmm": {}, "transformer": {"n_heads": 8}, "hyena": {}, "mamba2": {}}


def child(arch: str, mode: str, length: int, limit_gib: float) -> None:
    """One measurement in this (fresh) process; prints one JSON line."""
    import torch

    import tmm.models

    torch.manual_seed(0)
    model = tmm.models.build({"arch": arch, "vocab_size": 256, "d_model": 512, "n_layers": 4, "max_len": length,
                              **ARCHS[arch]})
    ids = torch.randint(0, 256, (1, length))
    if limit_gib:
        # The address space in use now plus the allowance: libraries map far
        # more virtual memory than they touch, so an absolute limit would not
        # mean anything.
        allowed = status_kib("VmSize") * 1024 + int(limit_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (allowed, allowed))
    reset_peak_rss()
    base = status_kib("VmRSS")
    start = time.perf_counter()
    try:
        if mode == "training":
            model(ids, labels=ids).loss.backward()
        else:
            with torch.no_grad():
                model(ids)
        out: Dict[str, Any] = {"ok": True}
    except (RuntimeError, MemoryError) as e:
        out = {"ok": False, "error": str(e).splitlines()[0][:300]}
    out.update(seconds=time.perf_counter() - start, peak_bytes=(status_kib("VmHWM") - base) * 1024)
    print(json.dumps(out))


def measure(arch: str, mode: str, length: int, limit_gib=None, timeout: float = 600) -> Dict[str, Any]:
    """child() in a fresh process: its JSON line, or what went wrong (a hang, a crash)."""
    cmd = [sys.executable, "-m", "lab.bench.limits", arch, mode, str(length), str(limit_gib or 0)]
    # The child imports from where this process does (a script's checkout on sys.path included).
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no result within {timeout} s (a hang)", "timeout": True}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"ok": False, "error": f"exit status {r.returncode}: {r.stderr.strip()[-300:]}", "crash": True}
    return json.loads(lines[-1])


def limits(arch: str, mode: str, points: List, cfg: Dict[str, Any]) -> Dict[str, Any]:
    row: Dict[str, Any] = {"arch": arch, "mode": mode, "points": points}
    if len(points) < 2:
        row["error"] = "fewer than two lengths ran"
        return row
    (n0, m0, t0), (n1, m1, t1) = points[-2], points[-1]
    per_token = max((m1 - m0) / (n1 - n0), 1.0)
    fixed = m1 - per_token * n1
    row["bytes_per_token"] = per_token
    row["max_length"] = int((cfg["memory_gib"] * 2**30 - fixed) / per_token)
    # The time there, from the growth of time with length between the last two points.
    exponent = math.log(max(t1, 1e-6) / max(t0, 1e-6)) / math.log(n1 / n0)
    row["seconds_at_max"] = t1 * (row["max_length"] / n1) ** max(exponent, 1.0)
    # Check the prediction and the failure under a small limit.
    fits = int((cfg["check_gib"] * 2**30 - fixed) / per_token)
    if fits > 64:
        ok = measure(arch, mode, int(0.6 * fits), cfg["check_gib"], cfg["timeout"])
        past = measure(arch, mode, 2 * fits, cfg["check_gib"], cfg["timeout"])
        row["check"] = {"limit_gib": cfg["check_gib"], "predicted": fits, "at_60pct": ok, "at_200pct": past,
                        "passed": ok["ok"] and not past["ok"] and "memory" in past.get("error", "").lower()}
        if ok["ok"] and past.get("timeout"):
            # Quadratic time (attention) reaches the timeout before the memory runs out.
            row["check"]["time_bound"] = True
    return row


def run(cfg: Dict[str, Any], progress: bool = True) -> List[Dict[str, Any]]:
    """cfg: archs, modes, lengths, max_run_s, memory_gib, check_gib, timeout. One row per (arch, mode)."""
    rows = []
    with Progress(len(cfg["archs"]) * len(cfg["modes"]), desc="limits", enabled=progress) as bar:
        for arch in cfg["archs"]:
            for mode in cfg["modes"]:
                points = []
                for n in cfg["lengths"]:
                    r = measure(arch, mode, n, timeout=cfg["timeout"])
                    if not r["ok"]:
                        break
                    points.append((n, r["peak_bytes"], r["seconds"]))
                    bar.update(0, model=arch, mode=mode, length=n)
                    if r["seconds"] > cfg["max_run_s"]:
                        break
                rows.append(limits(arch, mode, points, cfg))
                bar.update(1, model=arch, mode=mode)
    return rows


def table(rows: List[Dict[str, Any]], cfg: Dict[str, Any]) -> str:
    out = []
    for r in rows:
        if "error" in r:
            out.append([r["arch"], r["mode"], "-", "-", "-", "-", r["error"]])
            continue
        c = r.get("check")
        check = "-" if c is None else ("passed" if c["passed"] else "time-bound" if c.get("time_bound") else "FAILED")
        err = "-" if c is None else c["at_200pct"].get("error", "ran (no error)")
        if c and c.get("time_bound"):
            err = f"still computing after {cfg['timeout']:g} s: time runs out before memory"
        out.append([r["arch"], r["mode"], f"{r['bytes_per_token'] / 1024:.1f}", f"{r['max_length']:,}",
                    f"{r['seconds_at_max']:.0f} s", check, err[:90]])
    head = ["model", "mode", "KiB per token", "longest sequence", "time there",
            f"check under {cfg['check_gib']:g} GiB", "error past the limit"]
    return (f"## Longest sequence in {cfg['memory_gib']:g} GiB (batch 1, d = 512, 4 layers)\n\n"
            + markdown_table(head, out, align="llrrrll"))


if __name__ == "__main__":  # the fresh process of measure()
    child(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
