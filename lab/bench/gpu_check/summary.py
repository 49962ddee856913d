"""The check's verdict: failures, what did not run, the exit status, and
the summary and tables printed last (table.md).

Exit status:
  0  everything ran and passed;
  1  a kernel is wrong: a test or check failed, or compute-sanitizer found errors;
  2  could not run: the preflight or the build failed, or no check ran;
  3  partially run: a deadline, timeout or missing piece left parts unchecked,
     and nothing that ran failed.
Performance targets are reported (PASS/MISS) and do not change the status.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..ops_report import format_targets, make_table
from tmm.tables import markdown_table

__all__ = ["EXIT_OK", "EXIT_WRONG", "EXIT_NOT_RUN", "EXIT_PARTIAL", "sanitizer_verdict", "failures", "not_run",
           "exit_status", "summary"]

EXIT_OK, EXIT_WRONG, EXIT_NOT_RUN, EXIT_PARTIAL = 0, 1, 2, 3
VERDICT = {EXIT_OK: "PASS", EXIT_WRONG: "KERNEL WRONG", EXIT_NOT_RUN: "COULD NOT RUN", EXIT_PARTIAL: "PARTIAL"}
RECORD_SECTIONS = ("graphs", "zoo")


def sanitizer_verdict(log: str, rc: Optional[str]) -> Dict[str, Any]:
    """compute-sanitizer's result from its log and exit status (rc: a number,
    "skipped", or "cpu" where the CPU mode ran the case unsanitized)."""
    m = re.findall(r"ERROR SUMMARY: (\d+) error", log)
    if rc == "cpu":
        status = "cpu" if "sanitize case done" in log else "error"
        text = "not applicable (CPU mode: the case ran without compute-sanitizer)" if status == "cpu" else \
            "the sanitizer case failed on the CPU"
    elif m and int(m[-1]) > 0:
        status, text = "fail", f"FAIL: {m[-1]} errors (sanitizer.log)"
    elif m and rc == "0" and "sanitize case done" in log:
        status, text = "pass", "pass (0 errors)"
    elif rc in ("124", "137"):
        status, text = "timeout", "timed out (inconclusive)"
    elif rc in (None, "skipped"):
        status, text = "skipped", "not run: " + (log.strip().splitlines()[-1][:200] if log.strip() else "skipped")
    else:
        last = log.strip().splitlines()[-1][:200] if log.strip() else ""
        status, text = "error", f"could not run (rc {rc}): {last}"
    return {"status": status, "verdict": text, "rc": rc, "log_tail": log[-3000:]}


def failures(data: Dict[str, Any]) -> List[str]:
    out = []
    for r in (data.get("tests") or {}).get("records", []):
        if r.get("outcome") == "failed":
            last = (r.get("message") or "").strip().splitlines()[-1:] or [""]
            out.append(f"test {r['test']} ({r.get('when')}): {last[0]}")
    for section in RECORD_SECTIONS:
        for r in data.get(section, []):
            if r.get("ok") is False:
                brief = {k: v for k, v in r.items() if k not in ("trace",)}
                out.append(f"{section}: {brief}")
    for dtype, b in (data.get("bench") or {}).items():
        for c in b.get("checks", []):
            if not c.get("ok"):
                out.append(f"bench check {dtype} G={c.get('G')} K={c.get('K')} L={c.get('L')}: ours vs fft mismatch "
                           f"{ {k: c.get(k) for k in ('y', 'grad_x', 'grad_weight', 'grad_bias', 'error') if k in c} }")
    if (data.get("sanitizer") or {}).get("status") == "fail":
        out.append(f"compute-sanitizer: {data['sanitizer']['verdict']}")
    return out


def not_run(data: Dict[str, Any]) -> List[str]:
    """What was meant to run and did not (deadline, timeout, a step that failed to start)."""
    out = [f"section {s['section']}: {s['reason']}" for s in data.get("skipped_sections", [])]
    out += [f"section {e['section']} raised {e['error']}" for e in data.get("errors", [])]
    t = data.get("tests")
    if t:
        n = sum(1 for r in t.get("records", []) if r.get("outcome") == "skipped" and r.get("message") == "deadline")
        if n:
            out.append(f"{n} tests skipped for the deadline")
        if t.get("killed"):
            out.append("pytest killed at the deadline")
        elif t.get("rc") not in (0, 1, 5):  # 1: some test failed (listed), 5: none collected
            out.append(f"pytest exited with status {t.get('rc')} (pytest.log)")
        if t.get("rc") == 5 or not t.get("records"):
            out.append("no op test ran")
    for s in RECORD_SECTIONS:
        n = sum(1 for r in data.get(s, []) if r.get("skipped"))
        if n:
            out.append(f"{n} {s} records skipped for the deadline")
    for dtype, b in (data.get("bench") or {}).items():
        n = sum(1 for c in b.get("cells", []) if c.get("reason") == "deadline")
        if n:
            out.append(f"{n} bench cells ({dtype}) skipped for the deadline")
        if not b.get("complete"):
            out.append(f"bench {dtype} did not finish")
    for step in data.get("steps", []):
        if step["name"] == "preflight" and step["rc"] != "0":
            missing = [ln.strip() for ln in data.get("preflight", []) if "MISSING" in ln or "Error" in ln
                       or "available False" in ln]
            out.append("preflight: the check cannot run here: " + ("; ".join(missing) or "see preflight.txt"))
        elif step["name"] == "build" and step["rc"] != "0":
            out.append(f"build failed (rc {step['rc']}; build.log)")
        elif step["rc"] in ("124", "137"):
            out.append(f"step {step['name']} timed out after {step['seconds']} s")
        elif step["name"] == "check" and step["rc"] not in ("0", "1", "3"):
            out.append(f"step check: exit status {step['rc']} (check.log)")
    if data.get("sanitizer", {}).get("status") in ("timeout", "error", "skipped"):
        out.append(f"compute-sanitizer: {data['sanitizer']['verdict']}")
    if data.get("complete") is False:
        out.append("the check process did not finish (killed, or it crashed: check.log)")
    if data.get("native_missing"):
        out.append(f"tmm._C not built: no op tests, no zoo step, no forced paths ({data['native_missing']})")
    return out


def exit_status(data: Dict[str, Any]) -> int:
    if failures(data):
        return EXIT_WRONG
    steps = {s["name"]: s["rc"] for s in data.get("steps", [])}
    ran_any = bool((data.get("tests") or {}).get("records")) or any(data.get(s) for s in RECORD_SECTIONS) \
        or bool(data.get("bench")) or bool(data.get("copy_bandwidth"))
    if steps.get("preflight", "0") != "0" or steps.get("build", "0") != "0" or not ran_any:
        return EXIT_NOT_RUN
    return EXIT_PARTIAL if not_run(data) else EXIT_OK


def gpu_targets(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The GPU targets: fwd+bwd bf16 ours >= 5x the torch.fft composition for
    L <= 16K and >= 2x beyond; the fused forward >= 50% of the copy bandwidth."""
    bf16 = (data.get("bench") or {}).get("bfloat16", {}).get("cells", [])
    idx = {(c["mode"], c["G"], c["L"], c["impl"]): c for c in bf16 if c.get("status") == "ok"}
    speed = []
    for (mode, G, L, impl), c in sorted(idx.items()):
        f = idx.get((mode, G, L, "fft"))
        if impl == "ours" and mode == "fwdbwd" and f:
            r, need = f["median_ms"] / c["median_ms"], (5.0 if L <= 16384 else 2.0)
            speed.append((r >= need, f"G={G} L={L}: fft/ours {r:.2f}x (need {need:g}x)"))
    copy_bw = (data.get("copy_bandwidth") or {}).get("bytes_per_s")
    band = []
    for dtype, b in (data.get("bench") or {}).items():
        for c in b.get("cells", []):
            if copy_bw and c.get("status") == "ok" and c["impl"] == "ours_fused" and c["mode"] == "fwd":
                frac = c["bytes"] / (c["median_ms"] * 1e-3) / copy_bw
                band.append((frac >= 0.5, f"{dtype} G={c['G']} L={c['L']}: {100 * frac:.0f}% of copy bandwidth"))
    out = []
    for name, items in (("fwd+bwd bf16: ours >= 5x the torch.fft composition for L <= 16K, >= 2x beyond", speed),
                        ("fused forward >= 50% of the measured copy bandwidth (read x, write y)", band)):
        result = "PASS" if items and all(p for p, _ in items) else ("MISS" if items else "n/a")
        out.append({"target": name, "result": result, "detail": "; ".join(d for _, d in items) or "no measured cells"})
    return out


def _bandwidth_table(cells: List[Dict[str, Any]], copy_bw: Optional[float]) -> str:
    """Achieved bytes/s of ours per path (the op's minimal traffic over its time)."""
    impls = [i for i in ("ours", "ours_cufft", "ours_fused", "ours_direct", "ours_fft") if any(c["impl"] == i for c in cells)]
    rows: Dict[Tuple, Dict[str, Any]] = {}
    for c in cells:
        if c["impl"] in impls and c.get("status") == "ok":
            rows.setdefault((c["mode"], c["G"], c["K"], c["L"]), {})[c["impl"]] = c["bytes"] / (c["median_ms"] * 1e-3)
    head = ["mode", "G", "K", "L"] + [f"{i.replace('_', ':')} GB/s" for i in impls] + (["best % copy"] if copy_bw else [])
    body = []
    for key in sorted(rows, key=lambda k: (k[0] != "fwd", k[1:])):
        vals = rows[key]
        row = list(key) + [f"{vals[i] / 1e9:.4g}" if i in vals else "-" for i in impls]
        if copy_bw:
            row.append(f"{100 * max(vals.values()) / copy_bw:.0f}%")
        body.append(row)
    return markdown_table(head, body, left=4)


def _line(records: List[Dict[str, Any]], label) -> str:
    return ", ".join(f"{label(r)} " + ("ok" if r.get("ok") else "skipped" if r.get("skipped") else "FAIL")
                     for r in records) or "not run"


def summary(data: Dict[str, Any]) -> str:
    env = data.get("env", {})
    status = exit_status(data)
    device = data.get("device", "?")
    where = env.get("cuda_device") or env.get("cpu_model", "?")
    lines = [f"# tmm GPU check ({device}): {where}, torch {env.get('torch', '?')}, CUDA {env.get('cuda') or '-'}: "
             f"{VERDICT[status]} (exit {status})", ""]
    steps = data.get("steps", [])
    if steps:
        lines.append("steps: " + ", ".join(f"{s['name']} rc {s['rc']} {s['seconds']} s" for s in steps))
    t = data.get("tests")
    if t:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(t.get("counts", {}).items())) or "no records"
        lines.append(f"op tests (pytest --device {device}, each kernel path forced): {counts} ({t.get('seconds')} s)")
        worst = [r for r in t.get("records", []) if r.get("outcome") == "passed"]
        if worst:
            lines.append(f"  slowest: {max(worst, key=lambda r: r['duration_s'])['test']}")
    lines.append("CUDA graphs (torch.compile reduce-overhead) vs eager: " + _line(data.get("graphs", []),
                                                                                lambda r: r["path"]))
    lines.append("zoo training step vs the CPU: " + _line(data.get("zoo", []), lambda r: f"{r['arch']} {r['mode']}"))
    cb = data.get("copy_bandwidth") or {}
    if "bytes_per_s" in cb:
        lines.append(f"copy bandwidth (read+write): {cb['bytes_per_s'] / 1e9:.1f} GB/s")
    lines.append(f"compute-sanitizer memcheck: {(data.get('sanitizer') or {}).get('verdict', 'not run')}")
    for dtype, b in (data.get("bench") or {}).items():
        checks = b.get("checks", [])
        lines.append(f"benchmark {dtype}: ours vs fft matches on {sum(1 for c in checks if c.get('ok'))}/{len(checks)} "
                     f"configs; {sum(1 for c in b.get('cells', []) if c.get('status') == 'ok')} cells timed")
    for title, items in (("FAILURES", failures(data)), ("NOT RUN", not_run(data))):
        if items:
            lines += ["", f"{title} ({len(items)}):"] + ["  " + i[:400] for i in items[:30]]
    lines += ["", "targets:"]
    for tg in gpu_targets(data):
        lines.append(f"  {tg['result']:4s} {tg['target']}: {tg['detail']}")
    for dtype, b in (data.get("bench") or {}).items():
        cfg = b.get("config", {})
        lines += ["", f"## benchmark, {dtype}, {device}: B={cfg.get('batch')} C={cfg.get('channels')}, "
                      "median (min) ms", "", make_table(b.get("cells", [])), "",
                  _bandwidth_table(b.get("cells", []), cb.get("bytes_per_s")), "",
                  format_targets(b.get("targets", [])).rstrip("\n")]
    return "\n".join(lines) + "\n"
