#!/usr/bin/env python3
"""The Python half of scripts/gpu_check.sh: correctness and benchmark of the
CUDA causal_toeplitz ops on one GPU (issue 3).

    gpu_check.py --lib LIBTMM_TORCH --out DIR [--deadline EPOCH]   checks + benchmark
    gpu_check.py --lib LIBTMM_TORCH --sanitize                      a small case (compute-sanitizer)
    gpu_check.py --out DIR --report [--sanitizer-rc RC ...]         merge, print the table last

The library is loaded with torch.ops.load_library and the references from
tmm/ops/reference.py by path, so no Python module needs to be built.

Correctness (each check is a record in gpu_check.json; failures are listed):
  * y and the three gradients of torch.ops.tmm.causal_toeplitz on CUDA, per
    path (TMM_CUDA_ALGORITHM = auto, cufft, fused) and dtype (float64,
    float32, bfloat16, float16), against the float64 torch.fft reference and
    against the CPU op on the same inputs: odd lengths, every (G, K, bias)
    combination, non-contiguous x and grad_y, partial output masks, empty
    shapes, and outputs allocated after the caching allocator was filled
    with NaN (an unwritten element shows up as NaN).
  * torch.autograd.gradcheck (float64), torch.library.opcheck on CUDA tensors
    (both ops), torch.compile(mode="reduce-overhead") (CUDA graphs) equal to
    eager, forward and backward.
Benchmark: forward (no_grad) and forward+backward (all three gradients),
median of CUDA-event-timed calls; ours (auto, and each path forced) vs the
torch.fft composition vs the dense masked matmul; L in {1024, 4096, 16384,
65536}, B=8, C=1024, K=1, G in {1, 1024}, bfloat16 and float32; the copy
bandwidth measured in the same run; achieved bytes/s counted on the bytes
the op must move (fwd: read x, write y; fwd+bwd: also read grad_y and x,
write grad_x; plus weight and bias).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
GiB = float(1 << 30)

# Normwise relative error allowed against the float64 reference (inputs are
# the same rounded values, so this is compute + output rounding).
TOL = {"float64": 1e-10, "float32": 1e-5, "bfloat16": 1e-2, "float16": 3e-3}
PATHS = ("auto", "cufft", "fused")
FUSED_MAX_L = 4096  # cuda/fused_fft.cuh: n = next_pow2(2L-1) <= 8192
DEVICE = "cuda"  # a dry run of this script's logic can set "cpu"


def write_json(path: Path, data: Dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def load_reference():
    spec = importlib.util.spec_from_file_location("tmm_reference", REPO / "tmm" / "ops" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def algorithm(name: str):
    old = os.environ.get("TMM_CUDA_ALGORITHM")
    os.environ["TMM_CUDA_ALGORITHM"] = name
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TMM_CUDA_ALGORITHM", None)
        else:
            os.environ["TMM_CUDA_ALGORITHM"] = old


def poison_allocator(torch) -> None:
    """Fill cached blocks of several sizes with NaN, then free them."""
    keep = [torch.full((n,), float("nan"), device=DEVICE) for n in (1 << 8, 1 << 12, 1 << 16, 1 << 20, 1 << 23)]
    del keep


def rel_err(torch, a, ref) -> float:
    a64, r64 = a.detach().to("cpu", torch.float64), ref.detach().to("cpu", torch.float64)
    if a64.shape != r64.shape:
        return math.inf
    if not torch.isfinite(a64).all():
        return math.inf
    den = r64.norm().item()
    return (a64 - r64).norm().item() / (den if den > 0 else 1.0)


# ---------------------------------------------------------------- correctness
def sync(torch) -> None:
    if DEVICE == "cuda":
        sync(torch)


def make_inputs(torch, B, L, C, G, K, N, dtype, bias, layout, device=None):
    device = device or DEVICE
    g = torch.Generator(device="cpu").manual_seed(B * 1000003 + L * 101 + C * 7 + G * 3 + K)
    if layout == "x_transposed":  # x: a B x L x C view of B x C x L storage
        x = torch.randn(B, C, L, generator=g).to(dtype).to(device).transpose(1, 2)
    else:
        x = torch.randn(B, L, C, generator=g).to(dtype).to(device)
    w = (torch.randn(G, K, N, generator=g) / math.sqrt(max(L, 1))).to(dtype).to(device)
    b = torch.randn(G, N, generator=g).to(dtype).to(device) if bias else None
    if layout == "gy_strided":  # grad_y with channel stride 2
        gy = torch.randn(B, L, 2 * C, generator=g).to(dtype).to(device)[:, :, ::2]
    else:
        gy = torch.randn(B, L, C, generator=g).to(dtype).to(device)
    return x, w, b, gy


def forward_backward(torch, op, x, w, b, gy):
    leaves = [t.detach().requires_grad_(True) for t in (x, w)] + (
        [b.detach().requires_grad_(True)] if b is not None else [])
    y = op(leaves[0], leaves[1], leaves[2] if b is not None else None)
    grads = torch.autograd.grad(y, leaves, gy, allow_unused=True)
    return [y.detach()] + [gr for gr in grads]


def check_correctness(torch, ref, deadline: float, results: Dict[str, Any]) -> None:
    op = torch.ops.tmm.causal_toeplitz
    records: List[Dict[str, Any]] = results.setdefault("correctness", [])
    lengths = [1, 2, 97, 129, 1025, 4128]
    configs = [(8, 1, 1), (8, 1, 3), (12, 3, 2), (12, 12, 1), (33, 3, 4), (64, 64, 1), (48, 2, 24)]
    dtypes = [("float32", torch.float32), ("bfloat16", torch.bfloat16), ("float16", torch.float16),
              ("float64", torch.float64)]
    layouts = ["contiguous", "x_transposed", "gy_strided"]
    shapes = []
    for L in lengths:
        for (C, G, K) in configs:
            for bias in (False, True):
                shapes.append((L, C, G, K, bias, len(shapes)))
    # float32 and bfloat16 over every shape first: a deadline drops float16/float64 cases first.
    for group in (dtypes[:2], dtypes[2:]):
        for (L, C, G, K, bias, case) in shapes:
            layout = layouts[case % 3]
            B = 3 if layout == "x_transposed" else 2
            N = L + (case % 3)
            for dname, dtype in group:
                if time.time() > deadline:
                    results["correctness_truncated"] = True
                    return
                x, w, b, gy = make_inputs(torch, B, L, C, G, K, N, dtype, bias, layout)
                # float64 reference (torch.fft composition, autograd) on the same rounded values
                want = forward_backward(torch, ref.causal_toeplitz_fft, x.double(), w.double(),
                                        b.double() if b is not None else None, gy.double())
                cpu = forward_backward(torch, op, x.cpu(), w.cpu(), b.cpu() if b is not None else None,
                                       gy.cpu())
                paths = ["auto"] if dname == "float64" else list(PATHS)
                if L > FUSED_MAX_L and "fused" in paths:
                    paths.remove("fused")  # would fall back to cufft
                for path in paths:
                    rec = dict(L=L, C=C, G=G, K=K, N=N, B=B, bias=bias, layout=layout, dtype=dname, path=path)
                    try:
                        poison_allocator(torch)
                        with algorithm(path):
                            got = forward_backward(torch, op, x, w, b, gy)
                        sync(torch)
                        names = ["y", "grad_x", "grad_weight", "grad_bias"][: len(got)]
                        errs = {n: rel_err(torch, g_, r_) for n, g_, r_ in zip(names, got, want)}
                        errs_cpu = {n: rel_err(torch, g_, c_) for n, g_, c_ in zip(names, got, cpu)}
                        tol = TOL[dname]
                        rec.update(err_ref=errs, err_cpu=errs_cpu,
                                   ok=all(e <= tol for e in errs.values())
                                   and all(e <= 2 * tol for e in errs_cpu.values()))
                    except Exception as e:  # noqa: BLE001
                        rec.update(ok=False, error=f"{type(e).__name__}: {e}")
                    records.append(rec)
                # partial masks through the backward op, against the full result
                if dname == "float32" and L in (97, 1025):
                    for path in ("cufft", "fused"):
                        for mask in ([True, False, False], [False, True, False], [False, False, True]):
                            rec = dict(L=L, C=C, G=G, K=K, N=N, B=B, dtype=dname, path=path, mask=mask)
                            try:
                                poison_allocator(torch)
                                with algorithm(path):
                                    gx, gw, gb = torch.ops.tmm.causal_toeplitz_backward(gy, x, w, mask)
                                sync(torch)
                                outs = [gx, gw, gb]
                                errs = {}
                                for i, name in enumerate(("grad_x", "grad_weight", "grad_bias")):
                                    if mask[i]:
                                        if name == "grad_bias" and b is None:
                                            full = gy.double().sum(0).view(L, G, C // G).sum(-1).t()
                                            full = torch.nn.functional.pad(full, (0, N - L))
                                        else:
                                            full = want[1 + i]
                                        errs[name] = rel_err(torch, outs[i], full)
                                    else:
                                        errs[name + "_empty"] = 0.0 if outs[i].numel() == 0 else math.inf
                                rec.update(err_ref=errs, ok=all(e <= TOL[dname] for e in errs.values()))
                            except Exception as e:  # noqa: BLE001
                                rec.update(ok=False, error=f"{type(e).__name__}: {e}")
                            records.append(rec)
    # empty shapes
    for (B, L, C, G, K, N) in [(0, 5, 4, 2, 1, 5), (2, 0, 4, 2, 2, 3), (2, 5, 0, 1, 1, 5)]:
        rec = dict(B=B, L=L, C=C, G=G, K=K, N=N, dtype="float32", path="auto", empty=True)
        try:
            x, w, b, gy = make_inputs(torch, B, L, C, G, max(K, 1), N, torch.float32, True, "contiguous")
            got = forward_backward(torch, op, x, w, b, gy)
            sync(torch)
            rec.update(ok=tuple(got[0].shape) == (B, L, C) and all(
                gr is not None and gr.abs().sum().item() == 0 for gr in got[1:]))
        except Exception as e:  # noqa: BLE001
            rec.update(ok=False, error=f"{type(e).__name__}: {e}")
        records.append(rec)


def check_gradcheck(torch, results: Dict[str, Any]) -> None:
    op = torch.ops.tmm.causal_toeplitz
    out = results.setdefault("gradcheck", [])
    for (B, L, C, G, K, N) in [(2, 7, 6, 2, 2, 9), (1, 33, 4, 1, 3, 33), (2, 5, 3, 3, 1, 5)]:
        rec = dict(B=B, L=L, C=C, G=G, K=K, N=N)
        try:
            x, w, b, _ = make_inputs(torch, B, L, C, G, K, N, torch.float64, True, "contiguous")
            args = tuple(t.detach().requires_grad_(True) for t in (x, w, b))
            rec["ok"] = bool(torch.autograd.gradcheck(lambda a, c, d: op(a, c, d), args, eps=1e-6, atol=1e-7))
        except Exception as e:  # noqa: BLE001
            rec.update(ok=False, error=f"{type(e).__name__}: {e}")
        out.append(rec)


def check_opcheck(torch, results: Dict[str, Any]) -> None:
    out = results.setdefault("opcheck", [])
    x, w, b, gy = make_inputs(torch, 2, 37, 12, 3, 2, 40, torch.float32, True, "contiguous")
    cases = [
        ("causal_toeplitz", torch.ops.tmm.causal_toeplitz.default,
         (x.requires_grad_(True), w.requires_grad_(True), b.requires_grad_(True))),
        ("causal_toeplitz(no bias)", torch.ops.tmm.causal_toeplitz.default, (x, w, None)),
        ("causal_toeplitz_backward", torch.ops.tmm.causal_toeplitz_backward.default,
         (gy, x.detach(), w.detach(), [True, True, True])),
    ]
    for name, opo, args in cases:
        rec: Dict[str, Any] = dict(op=name)
        try:
            res = torch.library.opcheck(opo, args)
            rec.update(ok=all(v == "SUCCESS" for v in res.values()), result=res)
        except Exception as e:  # noqa: BLE001
            rec.update(ok=False, error=f"{type(e).__name__}: {e}")
        out.append(rec)


def check_compile(torch, results: Dict[str, Any]) -> None:
    op = torch.ops.tmm.causal_toeplitz
    out = results.setdefault("compile", [])
    for path in ("cufft", "fused"):
        rec: Dict[str, Any] = dict(mode="reduce-overhead", path=path)
        try:
            with algorithm(path):
                x, w, b, gy = make_inputs(torch, 2, 300, 32, 4, 2, 300, torch.float32, True, "contiguous")

                def f(x_, w_, b_):
                    return op(x_, w_, b_) * 2.0 + 1.0

                torch._dynamo.reset()
                cf = torch.compile(f, mode="reduce-overhead", fullgraph=True)
                want = f(x, w, b)
                fwd_errs = []
                for _ in range(4):  # warm-up, record, replays
                    fwd_errs.append(rel_err(torch, cf(x, w, b), want))
                # forward + backward through the compiled graph (cudagraph trees)
                leaves = [t.detach().requires_grad_(True) for t in (x, w, b)]
                y = f(*leaves)
                eager = torch.autograd.grad(y, leaves, gy)
                bwd_errs = []
                for _ in range(3):
                    lv = [t.detach().requires_grad_(True) for t in (x, w, b)]
                    yc = cf(*lv)
                    got = torch.autograd.grad(yc, lv, gy)
                    bwd_errs.append(max(rel_err(torch, a, e) for a, e in zip(got, eager)))
                sync(torch)
            rec.update(fwd_errs=fwd_errs, bwd_errs=bwd_errs,
                       ok=max(fwd_errs) <= 1e-6 and max(bwd_errs) <= 1e-6)
        except Exception as e:  # noqa: BLE001
            rec.update(ok=False, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
        out.append(rec)


# ---------------------------------------------------------------- benchmark
def time_ms(torch, fn: Callable[[], Any], warmup: int, reps: int, budget_s: float) -> Dict[str, Any]:
    for _ in range(warmup):
        fn()
    sync(torch)
    times = []
    t_end = time.time() + budget_s
    for i in range(reps):
        if DEVICE == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        else:
            t = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t))
        if i >= 2 and time.time() > t_end:
            break
    return dict(median_ms=statistics.median(times), min_ms=min(times), reps=len(times))


def copy_bandwidth(torch) -> Dict[str, Any]:
    n = (2 << 30) // 4
    a = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    b = torch.empty_like(a)
    t = time_ms(torch, lambda: b.copy_(a), 3, 20, 5.0)
    bw = 2 * a.numel() * 4 / (t["median_ms"] * 1e-3)
    del a, b
    return dict(bytes_moved=2 * n * 4, median_ms=t["median_ms"], bytes_per_s=bw)


def run_benchmark(torch, ref, deadline: float, results: Dict[str, Any], B: int = 8, C: int = 1024,
                  lengths=(1024, 4096, 16384, 65536)) -> None:
    op = torch.ops.tmm.causal_toeplitz
    cells: List[Dict[str, Any]] = results.setdefault("bench", [])
    K = 1
    impls = {
        "ours": ("auto", op), "ours_cufft": ("cufft", op), "ours_fused": ("fused", op),
        "fft": (None, ref.causal_toeplitz_fft), "dense": (None, ref.causal_toeplitz_dense),
    }
    for L in lengths:
        for dname, dtype in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
            for G in (1, C):
                g = torch.Generator(device=DEVICE).manual_seed(L + G)
                x = torch.randn(B, L, C, device=DEVICE, generator=g).to(dtype)
                w = (torch.randn(G, K, L, device=DEVICE, generator=g) / math.sqrt(L)).to(dtype)
                b = torch.randn(G, L, device=DEVICE, generator=g).to(dtype)
                gy = torch.randn(B, L, C, device=DEVICE, generator=g).to(dtype)
                xs, ws, bs = (t.detach().requires_grad_(True) for t in (x, w, b))
                item = x.element_size()
                wbytes = (w.numel() + b.numel()) * item
                for mode in ("fwd", "fwdbwd"):
                    nbytes = (2 if mode == "fwd" else 5) * B * L * C * item + (2 if mode == "fwd" else 3) * wbytes
                    for name, (path, fn) in impls.items():
                        cell = dict(mode=mode, dtype=dname, B=B, C=C, K=K, G=G, L=L, impl=name, bytes=nbytes)
                        if name == "ours_fused" and L > FUSED_MAX_L:
                            continue
                        dense_bytes = G * K * L * L * 4
                        if name == "dense" and (dense_bytes > 8 * GiB or L > 16384):
                            cell.update(status="skipped", reason="dense too large")
                            cells.append(cell)
                            continue
                        left = deadline - time.time()
                        if left < 5:
                            cell.update(status="skipped", reason="deadline")
                            cells.append(cell)
                            continue
                        if mode == "fwd":
                            def call(fn=fn):
                                with torch.no_grad():
                                    return fn(x, w, b)
                        else:
                            def call(fn=fn):
                                y = fn(xs, ws, bs)
                                return torch.autograd.grad(y, (xs, ws, bs), gy)
                        try:
                            ctx = algorithm(path) if path else contextlib.nullcontext()
                            with ctx:
                                t = time_ms(torch, call, 2, 15, min(4.0, left / 4))
                            cell.update(status="ok", **t, bytes_per_s=nbytes / (t["median_ms"] * 1e-3))
                        except Exception as e:  # noqa: BLE001
                            cell.update(status="error", error=f"{type(e).__name__}: {str(e)[:300]}")
                        if name in ("fft", "dense") and DEVICE == "cuda":
                            torch.cuda.empty_cache()
                        cells.append(cell)
                del x, w, b, gy, xs, ws, bs
                if DEVICE == "cuda":
                    torch.cuda.empty_cache()


# ---------------------------------------------------------------- report
def index(cells):
    return {(c["mode"], c["dtype"], c["G"], c["L"], c["impl"]): c for c in cells}


def ok(c):
    return c is not None and c.get("status") == "ok"


def evaluate_targets(results: Dict[str, Any]) -> List[Dict[str, Any]]:
    cells = results.get("bench", [])
    idx = index(cells)
    copy_bw = (results.get("copy_bandwidth") or {}).get("bytes_per_s")
    targets = []

    def add(name, items):
        targets.append(dict(target=name, result=("PASS" if items and all(p for p, _ in items) else
                                                  ("MISS" if items else "n/a")),
                            items=[d for _, d in items]))

    items = []
    for (mode, dtype, G, L, impl), c in sorted(idx.items()):
        if impl != "ours" or mode != "fwdbwd" or dtype != "bfloat16" or not ok(c):
            continue
        f = idx.get((mode, dtype, G, L, "fft"))
        if ok(f):
            r = f["median_ms"] / c["median_ms"]
            need = 5.0 if L <= 16384 else 2.0
            items.append((r >= need, f"G={G} L={L}: fft/ours {r:.2f}x (need {need:g}x)"))
    add("fwd+bwd bf16: >= 5x the torch.fft composition for L <= 16K, >= 2x at 64K", items)

    items = []
    if copy_bw:
        for (mode, dtype, G, L, impl), c in sorted(idx.items()):
            if impl == "ours_fused" and mode == "fwd" and ok(c):
                frac = c["bytes_per_s"] / copy_bw
                items.append((frac >= 0.5, f"{dtype} G={G} L={L}: {100 * frac:.0f}% of copy bandwidth"))
    add("fused forward >= 50% of the measured copy bandwidth (read x, write y)", items)
    return targets


def failures(results: Dict[str, Any]) -> List[str]:
    out = []
    for section in ("correctness", "gradcheck", "opcheck", "compile"):
        for rec in results.get(section, []):
            if not rec.get("ok"):
                brief = {k: v for k, v in rec.items() if k not in ("trace", "result")}
                out.append(f"{section}: {brief}")
    return out


def make_table(results: Dict[str, Any]) -> str:
    idx = index(results.get("bench", []))
    copy_bw = (results.get("copy_bandwidth") or {}).get("bytes_per_s")
    rows = sorted({k[:4] for k in idx}, key=lambda r: (r[0] != "fwd", r[1], r[2], r[3]))
    head = ["mode", "dtype", "G", "L", "ours", "cufft", "fused", "fft", "dense", "fft/ours", "ours GB/s", "% copy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 4 + ["---:"] * (len(head) - 4)) + "|"]

    def ms(c):
        if c is None:
            return "-"
        if ok(c):
            return f"{c['median_ms']:.3g}"
        return c.get("status", "?")

    for r in rows:
        cs = {i: idx.get(r + (i,)) for i in ("ours", "ours_cufft", "ours_fused", "fft", "dense")}
        o, f = cs["ours"], cs["fft"]
        ratio = f"{f['median_ms'] / o['median_ms']:.2f}x" if ok(o) and ok(f) else "-"
        gbs = f"{o['bytes_per_s'] / 1e9:.4g}" if ok(o) else "-"
        pct = f"{100 * o['bytes_per_s'] / copy_bw:.0f}%" if ok(o) and copy_bw else "-"
        lines.append("| " + " | ".join([("fwd" if r[0] == "fwd" else "fwd+bwd"), r[1], str(r[2]), str(r[3]),
                                         ms(o), ms(cs["ours_cufft"]), ms(cs["ours_fused"]), ms(f), ms(cs["dense"]),
                                         ratio, gbs, pct]) + " |")
    return "\n".join(lines) + "\n"


def summary(results: Dict[str, Any]) -> str:
    env = results.get("env", {})
    cb = results.get("copy_bandwidth") or {}
    corr = results.get("correctness", [])
    n_ok = sum(1 for r in corr if r.get("ok"))
    worst = {}
    for r in corr:
        for k, v in (r.get("err_ref") or {}).items():
            if k.endswith("_empty"):
                continue
            key = (r.get("dtype"), k)
            worst[key] = max(worst.get(key, 0.0), v)
    lines = [f"# tmm causal_toeplitz CUDA check: {env.get('gpu', '?')}, torch {env.get('torch', '?')}, "
             f"CUDA {env.get('cuda', '?')}",
             "",
             f"copy bandwidth (read+write): {cb.get('bytes_per_s', 0) / 1e12:.2f} TB/s",
             f"correctness: {n_ok}/{len(corr)} checks ok"
             + (" (truncated by the deadline)" if results.get("correctness_truncated") else ""),
             "worst relative error vs float64 reference: " + ", ".join(
                 f"{d}/{k} {v:.1e}" for (d, k), v in sorted(worst.items(), key=str)),
             "gradcheck: " + ", ".join("ok" if r.get("ok") else "FAIL" for r in results.get("gradcheck", [])),
             "opcheck: " + ", ".join(f"{r['op']} {'ok' if r.get('ok') else 'FAIL'}"
                                     for r in results.get("opcheck", [])),
             "torch.compile reduce-overhead: " + ", ".join(f"{r['path']} {'ok' if r.get('ok') else 'FAIL'}"
                                                           for r in results.get("compile", [])),
             f"compute-sanitizer memcheck: {results.get('sanitizer', {}).get('verdict', 'not run')}",
             ""]
    fails = failures(results)
    if fails:
        lines.append(f"FAILURES ({len(fails)}):")
        lines += ["  " + f[:400] for f in fails[:30]]
        lines.append("")
    lines.append("targets:")
    for t in evaluate_targets(results):
        lines.append(f"  {t['result']:4s} {t['target']}")
        lines += [f"         {d}" for d in t["items"]]
    lines.append("")
    lines.append("time: median ms of CUDA-event-timed calls; ours = TMM_CUDA_ALGORITHM auto; "
                 "cufft / fused = that path forced; B=8 C=1024 K=1")
    return "\n".join(lines) + "\n"


def sanitize_case(torch) -> None:
    op = torch.ops.tmm.causal_toeplitz
    for path in ("cufft", "fused"):
        for dtype in (torch.float32, torch.bfloat16):
            for (B, L, C, G, K, N) in [(2, 100, 24, 4, 3, 101), (1, 37, 16, 16, 1, 37), (2, 1025, 8, 1, 2, 1025)]:
                x, w, b, gy = make_inputs(torch, B, L, C, G, K, N, dtype, True, "x_transposed")
                with algorithm(path):
                    forward_backward(torch, op, x, w, b, gy)
                    torch.ops.tmm.causal_toeplitz_backward(gy, x, w, [False, True, False])
    sync(torch)
    print("sanitize cases done")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", help="path of libtmm_torch.so")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/tmm_gpu_check"))
    p.add_argument("--deadline", type=float, default=None, help="epoch seconds to finish by")
    p.add_argument("--sanitize", action="store_true")
    p.add_argument("--report", action="store_true")
    p.add_argument("--sanitizer-rc", default="skipped")
    p.add_argument("--sanitizer-log", default=None)
    p.add_argument("--wall-s", type=float, default=None)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jpath = out / "gpu_check.json"

    if args.report:
        results = json.loads(jpath.read_text()) if jpath.exists() else {}
        log = Path(args.sanitizer_log).read_text(errors="replace") if args.sanitizer_log and Path(
            args.sanitizer_log).exists() else ""
        verdict = "not run"
        if "ERROR SUMMARY: 0 errors" in log and args.sanitizer_rc == "0":
            verdict = "pass (0 errors)"
        elif "ERROR SUMMARY:" in log:
            verdict = "FAIL: " + log[log.rfind("ERROR SUMMARY:"):].splitlines()[0]
        elif args.sanitizer_rc == "124":
            verdict = "timed out (inconclusive)"
        elif args.sanitizer_rc != "skipped" or log:
            verdict = f"unavailable (rc {args.sanitizer_rc}): {log.strip().splitlines()[-1][:200] if log.strip() else ''}"
        results["sanitizer"] = dict(rc=args.sanitizer_rc, verdict=verdict, log_tail=log[-3000:])
        results["wall_s"] = args.wall_s
        results["targets"] = evaluate_targets(results)
        write_json(jpath, results)
        text = summary(results) + "\n" + make_table(results)
        (out / "table.md").write_text(text)
        print(text, end="")
        return 1 if failures(results) or verdict.startswith("FAIL") else 0

    import torch

    if not torch.cuda.is_available():
        print("gpu_check: torch.cuda is not available", file=sys.stderr)
        return 2
    torch.ops.load_library(args.lib)
    if args.sanitize:
        sanitize_case(torch)
        return 0

    ref = load_reference()
    deadline = args.deadline or (time.time() + 360)
    results: Dict[str, Any] = dict(
        schema="tmm.gpu_check/1",
        env=dict(torch=torch.__version__, cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(),
                 capability=list(torch.cuda.get_device_capability()), python=platform.python_version(),
                 lib=args.lib, host=platform.node()))
    t0 = time.time()

    def section(name, fn, *a):
        s = time.time()
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001
            results.setdefault(name, []).append(dict(ok=False, error=f"{type(e).__name__}: {e}",
                                                     trace=traceback.format_exc()[-2000:]))
        results.setdefault("section_s", {})[name] = round(time.time() - s, 1)
        write_json(jpath, results)
        print(f"[gpu_check.py {time.time() - t0:5.0f}s] {name} done", file=sys.stderr)

    try:
        results["copy_bandwidth"] = copy_bandwidth(torch)
    except Exception as e:  # noqa: BLE001
        results["copy_bandwidth"] = dict(error=f"{type(e).__name__}: {e}")
    # Budget: correctness <= 90 s, leaving ~50 s for gradcheck/opcheck/compile and >= 100 s for the benchmark.
    section("correctness", check_correctness, torch, ref, min(deadline - 150, time.time() + 90), results)
    section("gradcheck", check_gradcheck, torch, results)
    section("opcheck", check_opcheck, torch, results)
    section("compile", check_compile, torch, results)
    section("bench", run_benchmark, torch, ref, deadline, results)
    fails = failures(results)
    print(f"gpu_check.py: {len(fails)} failed checks; results in {jpath}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
