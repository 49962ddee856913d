"""What the operator benchmark (lab.bench.ops) reports: the target verdicts,
the markdown table, the plot, and the files table.md / plot.png next to
results.json.

The targets checked (a PASS/MISS list):

  1. fwd+bwd: ours >= 3x faster than the fft composition for L >= 1024, G = 1
  2. ours never slower than the best alternative that ran (any cell)
  3. ours' peak memory <= 1/3 of the fft composition's (any cell; alloc and
     rss verdicts listed separately)
  4. ours' fwd+bwd time grows <= 2.5x per doubling of L from 1024 to 16384
     (per (G, K); measured lengths that are not one doubling apart are
     compared per doubling: (t2/t1) ** (1 / log2(L2/L1)))
"""
from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tmm import testing
from tmm.files import atomic_write_text
from tmm.tables import markdown_table
from .provenance import BUSY_CORES
from .report import LiveJson, pyplot, save_plot

__all__ = ["MODE_LABEL", "evaluate_targets", "make_table", "format_targets", "make_plot", "finish"]

MiB = float(1 << 20)
MODE_LABEL = {"fwd": "fwd", "fwdbwd": "fwd+bwd"}  # how tables, plots and the progress bar name each mode


def _index(cells: List[Dict[str, Any]]) -> Dict[Tuple, Dict[str, Any]]:
    return {(c["mode"], c["G"], c["K"], c["L"], c["impl"]): c for c in cells}


def _ok(c: Optional[Dict[str, Any]]) -> bool:
    return c is not None and c.get("status") == "ok"


def _rows(cells):
    return sorted({(c["mode"], c["G"], c["K"], c["L"]) for c in cells},
                  key=lambda r: (0 if r[0] == "fwd" else 1, r[1], r[2], r[3]))


def _verdict(name: str, items: List[Tuple[bool, str, float]], worst_is_min: bool, unit: str) -> Dict[str, Any]:
    if not items:
        return {"target": name, "result": "n/a", "detail": "no measured cells"}
    n_pass = sum(1 for ok, _, _ in items if ok)
    worst = (min if worst_is_min else max)(items, key=lambda t: t[2])
    out = {"target": name, "result": "PASS" if n_pass == len(items) else "MISS",
           "detail": f"{n_pass}/{len(items)} cells; worst {worst[2]:.2f}{unit} at {worst[1]}"}
    misses = [f"{where} {val:.2f}{unit}" for ok, where, val in items if not ok]
    if misses:
        out["misses"] = misses
    return out


def evaluate_targets(cells: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    idx = _index(cells)
    rows = sorted({(c["mode"], c["G"], c["K"], c["L"]) for c in cells})
    targets = []

    items = []  # 1. fwd+bwd speed-up >= 3x over fft, L >= 1024, G == 1
    for mode, G, K, L in rows:
        o, f = idx.get((mode, G, K, L, "ours")), idx.get((mode, G, K, L, "fft"))
        if mode == "fwdbwd" and G == 1 and L >= 1024 and _ok(o) and _ok(f):
            r = f["median_ms"] / o["median_ms"]
            items.append((r >= 3.0, f"G={G} K={K} L={L}", r))
    targets.append(_verdict("fwd+bwd ours >= 3x faster than fft (L >= 1024, G = 1)", items, True, "x"))

    items = []  # 2. never slower than the best alternative
    for mode, G, K, L in rows:
        o = idx.get((mode, G, K, L, "ours"))
        alts = [a for a in (idx.get((mode, G, K, L, i)) for i in ("fft", "dense")) if _ok(a)]
        if _ok(o) and alts:
            r = min(a["median_ms"] for a in alts) / o["median_ms"]
            items.append((r >= 1.0, f"{MODE_LABEL[mode]} G={G} K={K} L={L}", r))
    targets.append(_verdict("ours never slower than the best alternative (best/ours >= 1)", items, True, "x"))

    for key, label in (("peak_alloc_bytes", "alloc"), ("peak_rss_bytes", "rss")):  # 3. memory
        items = []
        for mode, G, K, L in rows:
            o, f = idx.get((mode, G, K, L, "ours")), idx.get((mode, G, K, L, "fft"))
            if _ok(o) and _ok(f) and o.get(key) is not None and f.get(key):
                r = o[key] / f[key]
                items.append((r <= 1.0 / 3.0, f"{MODE_LABEL[mode]} G={G} K={K} L={L}", r))
        if items or label == "alloc":
            targets.append(_verdict(f"peak memory ({label}) ours <= 1/3 of fft (ours/fft)", items, False, ""))

    items = []  # 4. growth per doubling of L in [1024, 16384], fwd+bwd
    for G, K in sorted({(g, k) for m, g, k, _ in rows if m == "fwdbwd"}):
        pts = sorted((L, idx[("fwdbwd", G, K, L, "ours")]["median_ms"]) for m, g, k, L in rows
                     if m == "fwdbwd" and (g, k) == (G, K) and 1024 <= L <= 16384
                     and _ok(idx.get(("fwdbwd", G, K, L, "ours"))))
        for (l1, t1), (l2, t2) in zip(pts, pts[1:]):
            per_doubling = (t2 / t1) ** (1.0 / math.log2(l2 / l1))
            items.append((per_doubling <= 2.5, f"G={G} K={K} L={l1}->{l2}", per_doubling))
    targets.append(_verdict("fwd+bwd ours time growth per doubling of L (1024..16384) <= 2.5x", items, False, "x"))
    return targets


def _fmt_ms(c: Optional[Dict[str, Any]]) -> str:
    if c is None:
        return "-"
    if c.get("status") == "ok":
        busy = (c.get("other_cpu_cores") or 0) > BUSY_CORES
        return f"{c['median_ms']:.3g} ({c['min_ms']:.3g})" + ("*" if busy else "")
    if c.get("status") == "skipped":
        reason = c.get("reason", "")
        short = reason.split(" (")[0] if reason.startswith("time") else reason
        short = "invalid" if reason.startswith("invalid") else short
        return f"skipped ({short})" if short else "skipped"
    return "error"


def _ratio(a: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]) -> str:
    """a's median / b's median."""
    if _ok(a) and _ok(b) and b["median_ms"] > 0:
        return f"{a['median_ms'] / b['median_ms']:.2f}x"
    return "-"


def _mib(c: Optional[Dict[str, Any]]) -> str:
    if _ok(c) and c.get("peak_alloc_bytes") is not None:
        return f"{c['peak_alloc_bytes'] / MiB:.2f}"
    return "-"


def make_table(cells: List[Dict[str, Any]]) -> str:
    """One row per (mode, G, K, L); a column per forced path of ours where
    the run had any ("ours:cufft ms")."""
    idx = _index(cells)
    forced = sorted({c["impl"][len("ours_"):] for c in cells if c["impl"].startswith("ours_")})
    head = (["mode", "G", "K", "L", "ours ms"] + [f"ours:{p} ms" for p in forced]
            + ["fft ms", "dense ms", "fft/ours", "dense/ours", "ours peak MiB", "fft peak MiB", "mem ratio"])
    rows = []
    for mode, G, K, L in _rows(cells):
        o, f, d = (idx.get((mode, G, K, L, i)) for i in ("ours", "fft", "dense"))
        mem = "-"
        if _ok(o) and _ok(f) and o.get("peak_alloc_bytes") is not None and f.get("peak_alloc_bytes"):
            mem = f"{o['peak_alloc_bytes'] / f['peak_alloc_bytes']:.2f}"
        rows.append([MODE_LABEL[mode], G, K, L, _fmt_ms(o)]
                    + [_fmt_ms(idx.get((mode, G, K, L, f"ours_{p}"))) for p in forced]
                    + [_fmt_ms(f), _fmt_ms(d), _ratio(f, o), _ratio(d, o), _mib(o), _mib(f), mem])
    return markdown_table(head, rows, left=4)


def format_targets(targets: List[Dict[str, Any]]) -> str:
    out = []
    for t in targets:
        out.append(f"- {t['result']:4s} {t['target']}: {t['detail']}")
        for m in t.get("misses", [])[:8]:
            out.append(f"    miss: {m}")
        if len(t.get("misses", [])) > 8:
            out.append(f"    ... {len(t['misses']) - 8} more in results.json")
    return "\n".join(out) + "\n"


def format_checks(checks: List[Dict[str, Any]], dtype: str) -> str:
    keys = ("y", "grad_x", "grad_weight", "grad_bias")
    bad = [c for c in checks if not c.get("ok")]
    text = f"correctness: ours vs fft matches on {len(checks) - len(bad)}/{len(checks)} configs"
    errs = [v for c in checks for k, v in c.items() if k in keys and isinstance(v, float)]
    if errs:
        text += f" (worst rel err {max(errs):.2e}, tol {testing.tolerance(dtype):g})"
    for c in bad:
        detail = c.get("error") or {k: c.get(k) for k in keys}
        text += f"\n  MISMATCH G={c['G']} K={c['K']} L={c['L']}: {detail}"
    return text


def make_plot(cells: List[Dict[str, Any]], path: Path, title: str) -> Optional[str]:
    """Time vs L per (G, K), log-log, one line per implementation, a row of
    panels per mode. Returns why there is no plot, or None."""
    plt = pyplot()
    if plt is None:
        return "no plot: matplotlib unavailable"
    ok = [c for c in cells if c.get("status") == "ok"]
    if not ok:
        return "no plot: no measured cells"
    modes = [m for m in ("fwdbwd", "fwd") if any(c["mode"] == m for c in ok)]
    gks = sorted({(c["G"], c["K"]) for c in cells})
    impls = list(dict.fromkeys(c["impl"] for c in cells))
    fig, axes = plt.subplots(len(modes), len(gks), figsize=(4.2 * len(gks), 3.6 * len(modes)), squeeze=False)
    styles = {"ours": ("tab:red", "o"), "fft": ("tab:blue", "s"), "dense": ("tab:gray", "^")}
    for r, mode in enumerate(modes):
        for c_, (G, K) in enumerate(gks):
            ax = axes[r][c_]
            for impl in impls:
                pts = sorted((c["L"], c["median_ms"]) for c in ok
                             if c["mode"] == mode and c["G"] == G and c["K"] == K and c["impl"] == impl)
                if pts:
                    color, marker = styles.get(impl, (None, "x"))
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=impl)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{MODE_LABEL[mode]}  G={G} K={K}", fontsize=10)
            ax.set_xlabel("L")
            if c_ == 0:
                ax.set_ylabel("median time (ms)")
            ax.grid(True, which="both", alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_plot(fig, path)
    return None


def finish(cfg, live: LiveJson, out_dir: Path, plot: bool = True) -> Dict[str, Any]:
    """Targets into results.json; table.md and plot.png written. Returns the
    texts the command line prints."""
    data = live.data
    others = data["env"].get("other_cpu_cores")
    is_cuda = str(cfg.device).startswith("cuda")
    busy = ""
    if others is not None and others > BUSY_CORES and not is_cuda:
        busy = (f"WARNING: other processes used {others:.2f} CPU cores on average during "
                f"this run (of {os.cpu_count()}); CPU timings are unreliable.\n")
    if any((c.get("other_cpu_cores") or 0) > BUSY_CORES for c in data["cells"]):
        busy += f"* = other processes used > {BUSY_CORES} cores during that cell's timed calls.\n"
    data["targets"] = evaluate_targets(data["cells"])
    table, targets = make_table(data["cells"]), format_targets(data["targets"])
    checks = format_checks(data["checks"], cfg.dtype)
    title = (f"tmm causal_toeplitz, B={cfg.batch} C={cfg.channels} {cfg.dtype} {cfg.device} "
             f"threads={data['env'].get('threads')}")
    plot_note = make_plot(data["cells"], out_dir / "plot.png", title) if plot else None
    env = data["env"]
    md = (f"# {title}\n\n{data['git']['revision'] or 'no git revision'}, torch {env['torch']}, "
          f"{env.get('cuda_device') or env.get('cpu_model', platform.machine())}; time: median (min) of the "
          f"timed calls in ms; peak: extra bytes allocated through torch's allocator.\n\n"
          f"{table}\n\n" + (f"{busy}\n" if busy else "") + f"## Targets\n\n{targets}\n{checks}\n")
    live.flush()
    atomic_write_text(out_dir / "table.md", md)
    return dict(results=data, table=table, targets=targets, checks=checks, busy=busy, plot_note=plot_note,
                markdown=md)
