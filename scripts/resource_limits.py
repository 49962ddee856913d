#!/usr/bin/env python3
"""Resource limits: the longest sequence each model handles in this
machine's memory, and what happens past it.

For each architecture at the benchmark size (d = 512, 4 layers, byte vocab)
and each mode (inference: forward without autograd; training: forward +
backward, batch 1), peak resident memory is measured in a fresh process at
growing lengths; the last two points give bytes per token, and so the
longest sequence that fits in --memory-gib (default: 90% of this machine's
RAM). The prediction is then checked under an address-space limit of
--check-gib (so the check does not need the whole machine): a length at 60%
of the predicted limit must run, one at twice the limit must fail with a
clear out-of-memory error (not a crash or a hang) within --timeout seconds.

    scripts/resource_limits.py                     # ~10 min on 2 cores
    scripts/resource_limits.py --archs tmm --lengths 1024,4096

Writes results.json and table.md to --out (default
bench/results/limits-<timestamp>/) and prints the table.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARCHS = {"tmm": {}, "transformer": {"n_heads": 8}, "hyena": {}, "mamba2": {}}


def _status_kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def child(arch, mode, length, limit_gib):
    """Runs one measurement in this (fresh) process; prints one JSON line."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.path.insert(0, str(REPO))
    import torch

    import tmm.models as M

    torch.manual_seed(0)
    model = M.build({"arch": arch, "vocab_size": 256, "d_model": 512, "n_layers": 4, "max_len": length,
                     **ARCHS[arch]})
    ids = torch.randint(0, 256, (1, length))
    if limit_gib:
        # The address space in use now plus the allowance: libraries map far
        # more virtual memory than they touch, so an absolute limit would not
        # mean anything.
        allowed = _status_kib("VmSize") * 1024 + int(limit_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (allowed, allowed))
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = _status_kib("VmRSS")
    start = time.perf_counter()
    try:
        if mode == "training":
            model(ids, labels=ids).loss.backward()
        else:
            with torch.no_grad():
                model(ids)
        out = {"ok": True}
    except (RuntimeError, MemoryError) as e:
        out = {"ok": False, "error": str(e).splitlines()[0][:300]}
    out.update(seconds=time.perf_counter() - start, peak_bytes=(_status_kib("VmHWM") - base) * 1024)
    print(json.dumps(out))


def measure(arch, mode, length, limit_gib=None, timeout=600):
    cmd = [sys.executable, __file__, "--child", arch, mode, str(length), str(limit_gib or 0)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no result within {timeout} s (a hang)", "timeout": True}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"ok": False, "error": f"exit status {r.returncode}: {r.stderr.strip()[-300:]}", "crash": True}
    return json.loads(lines[-1])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default=",".join(ARCHS))
    p.add_argument("--modes", default="inference,training")
    p.add_argument("--lengths", default="1024,2048,4096,8192")
    p.add_argument("--max-run-s", type=float, default=60.0, help="stop growing a model once a run takes this long")
    ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    p.add_argument("--memory-gib", type=float, default=round(0.9 * ram_gib, 1))
    p.add_argument("--check-gib", type=float, default=2.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--out", default=None)
    p.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return args
    args.archs = [a for a in args.archs.split(",") if a]
    bad = [a for a in args.archs if a not in ARCHS]
    if bad:
        p.error(f"--archs: unknown {bad}; expected some of {list(ARCHS)}")
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("inference", "training") for m in args.modes):
        p.error(f"--modes: expected inference and/or training, got {args.modes}")
    args.lengths = sorted(int(n) for n in args.lengths.split(","))
    if len(args.lengths) < 2:
        p.error("--lengths: need at least two lengths to fit bytes per token")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("limits-%Y%m%d-%H%M%S"))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        arch, mode, length, limit = args.child
        return child(arch, mode, int(length), float(limit))
    sys.path.insert(0, str(REPO))
    from tmm.files import atomic_write_json, atomic_write_text
    from tmm.bench.progress import Progress

    rows = []
    bar = Progress(len(args.archs) * len(args.modes), "limits")
    for arch in args.archs:
        for mode in args.modes:
            points = []
            for n in args.lengths:
                r = measure(arch, mode, n, timeout=args.timeout)
                if not r["ok"]:
                    break
                points.append((n, r["peak_bytes"], r["seconds"]))
                bar.update(0, model=arch, mode=mode, length=n)
                if r["seconds"] > args.max_run_s:
                    break
            rows.append(limits(arch, mode, points, args))
            bar.update(1, model=arch, mode=mode)
    bar.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = table(rows, args)
    print(text)
    atomic_write_json(out / "results.json", {"config": {k: v for k, v in vars(args).items() if k != "child"},
                                             "rows": rows})
    atomic_write_text(out / "table.md", text)
    print(f"\nwrote {out}/results.json, table.md")


def limits(arch, mode, points, args):
    row = {"arch": arch, "mode": mode, "points": points}
    if len(points) < 2:
        row["error"] = "fewer than two lengths ran"
        return row
    (n0, m0, t0), (n1, m1, t1) = points[-2], points[-1]
    per_token = max((m1 - m0) / (n1 - n0), 1.0)
    fixed = m1 - per_token * n1
    row["bytes_per_token"] = per_token
    row["max_length"] = int((args.memory_gib * 2**30 - fixed) / per_token)
    # The time there, from the growth of time with length between the last two points.
    import math

    exponent = math.log(max(t1, 1e-6) / max(t0, 1e-6)) / math.log(n1 / n0)
    row["seconds_at_max"] = t1 * (row["max_length"] / n1) ** max(exponent, 1.0)
    # Check the prediction and the failure under a small limit.
    fits = int((args.check_gib * 2**30 - fixed) / per_token)
    if fits > 64:
        ok = measure(arch, mode, int(0.6 * fits), args.check_gib, args.timeout)
        past = measure(arch, mode, 2 * fits, args.check_gib, args.timeout)
        row["check"] = {"limit_gib": args.check_gib, "predicted": fits, "at_60pct": ok, "at_200pct": past,
                        "passed": ok["ok"] and not past["ok"] and "memory" in past.get("error", "").lower()}
        if ok["ok"] and past.get("timeout"):
            # Quadratic time (attention) reaches --timeout before the memory runs out.
            row["check"]["time_bound"] = True
    return row


def table(rows, args):
    lines = [f"## Longest sequence in {args.memory_gib:g} GiB (batch 1, d = 512, 4 layers)", "",
             "| model | mode | KiB per token | longest sequence | time there | check under "
             f"{args.check_gib:g} GiB | error past the limit |", "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['arch']} | {r['mode']} | - | - | - | - | {r['error']} |")
            continue
        c = r.get("check")
        check = "-" if c is None else ("passed" if c["passed"] else "time-bound" if c.get("time_bound") else "FAILED")
        err = "-" if c is None else c["at_200pct"].get("error", "ran (no error)")
        if c and c.get("time_bound"):
            err = f"still computing after {args.timeout:g} s: time runs out before memory"
        lines.append(f"| {r['arch']} | {r['mode']} | {r['bytes_per_token'] / 1024:.1f} | {r['max_length']:,} | "
                     f"{r['seconds_at_max']:.0f} s | {check} | {err[:90]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
