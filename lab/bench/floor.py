"""The floor benchmark of the CPU op (``scripts/bench_ops.py --floor``):
tmm's causal Toeplitz against what the hardware can do, measured in one run.

    res = floor.run(FloorConfig(...), out_dir)

Per length L (B x L x C, float32, G = K = 1, torch's threads):
  - the FFT pair: one real-to-complex + complex-to-real transform pair over
    all B*C columns laid out contiguously in time, through FFTW (pyfftw,
    FFTW_MEASURE, the same threads; requirements-bench.txt) when it imports,
    else scipy.fft (pocketfft) and said so; at 2L, or where 2L has a prime
    factor above 7, at the fastest of the next 7-smooth, 5-smooth and
    power-of-two sizes >= 2L - 1. FFTW is GPL: the lab imports it, the
    library never does;
  - the transposes B x L x C -> B x C x L and back, timed (the faster of
    torch's strided copy and its blocked 2-D copy per batch entry, spread
    over the threads), and a memcpy of x for the memory bandwidth;
  - the practical floor, a route through FFTW on contiguous columns:
    fwd = pair + one transpose each way; fwd+bwd = 2.5 pairs (forward: x
    in, y out; backward: grad_y and x in, grad_x out) + two transposes each
    way (x and grad_y in, y and grad_x out; x kept time-major);
  - FFTW on the op's own layout (B x n x C, transforms along the strided
    axis), for reference;
  - tmm forward and forward+backward (autograd: grad of x and weight).
Ratios: fwd / floor (target <= 1.15), fwd+bwd / floor (target <= 1.25).
A length's calls are timed interleaved (time_interleaved: rounds that call
each once, in turn), so a busy moment of a shared machine falls on all of
them alike; the minimum over the rounds is what the tables show.

The smooth-L sweep (L from sweep_lo to sweep_hi in steps of sweep_step):
tmm forward with the transform-size rule (TMM_CPU_FFT_SIZE unset: the cost
model over sizes 4 * 2^a 3^b 5^c) and with powers of two only (pow2),
side by side, and the largest ratio between neighbouring lengths (a
power-of-two rule jumps ~2x past each power of two).

Outputs: results.json (rewritten as it grows), table.md, plot.png.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from . import provenance
from tmm.files import atomic_write_text
from tmm.tables import markdown_table
from .provenance import CPU_LOAD
from .report import LiveJson, pyplot, save_plot
from .timing import time_calls, timed

__all__ = ["FloorConfig", "run", "fft_pair", "fftw_size_candidates", "transposes", "size_rule"]

FWD_TARGET = 1.15  # x the forward's floor
FWDBWD_TARGET = 1.25  # x the forward+backward's floor
PAIRS_FWDBWD = 2.5  # FFT pairs of a forward+backward
TRANSPOSES_FWDBWD = 2  # transposes each way of a forward+backward


@dataclasses.dataclass
class FloorConfig:
    lengths: List[int] = dataclasses.field(
        default_factory=lambda: [256, 512, 1024, 1025, 2048, 2049, 4096, 4097, 8192, 16384, 32768, 65536])
    batch: int = 4
    channels: int = 512
    repeats: int = 5
    warmup: int = 1
    cell_budget: float = 20.0  # seconds per timed cell
    strided: bool = True  # also FFTW on the op's own layout
    sweep: bool = True
    sweep_lo: int = 1000
    sweep_hi: int = 5000
    sweep_step: int = 100
    sweep_batch: int = 4
    sweep_channels: int = 256
    sizes: List[int] = dataclasses.field(default_factory=list)  # forced sizes to time (calibration)
    floor_lib: str = "auto"  # auto (fftw if importable), fftw, scipy
    planner: str = "FFTW_MEASURE"
    plan_limit_s: float = 20.0  # FFTW planning time per plan
    seed: int = 0


@contextlib.contextmanager
def size_rule(rule: Optional[str]):
    """TMM_CPU_FFT_SIZE set to `rule` (None: unset) inside the block."""
    old = os.environ.get("TMM_CPU_FFT_SIZE")
    if rule is None:
        os.environ.pop("TMM_CPU_FFT_SIZE", None)
    else:
        os.environ["TMM_CPU_FFT_SIZE"] = rule
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TMM_CPU_FFT_SIZE", None)
        else:
            os.environ["TMM_CPU_FFT_SIZE"] = old


def floor_library(name: str) -> str:
    if name not in ("auto", "fftw", "scipy"):
        raise ValueError(f"floor_lib {name!r}: use auto, fftw or scipy")
    if name in ("auto", "fftw"):
        try:
            import pyfftw  # noqa: F401
            return "fftw"
        except ImportError:
            if name == "fftw":
                raise
    import scipy.fft  # noqa: F401
    return "scipy"


def _smooth(n: int, primes) -> bool:
    for p in primes:
        while n % p == 0:
            n //= p
    return n == 1


def _next_smooth(n: int, primes, even: bool = False) -> int:
    while not (_smooth(n, primes) and (n % 2 == 0 or not even)):
        n += 1
    return n


def fftw_size_candidates(L: int) -> List[int]:
    """2L where its prime factors are at most 7 (FFTW's fast codelets), else
    the next 7-smooth size >= 2L - 1, the next even 5-smooth one and the next
    power of two: the sizes FFTW's best is among."""
    if _smooth(2 * L, (2, 3, 5, 7)):
        return [2 * L]
    need = max(2, 2 * L - 1)
    return sorted({_next_smooth(need, (2, 3, 5, 7)), _next_smooth(need, (2, 3, 5), even=True),
                   1 << (need - 1).bit_length()})


def fft_pair(lib: str, B: int, C: int, n: int, threads: int, planner: str = "FFTW_MEASURE",
             plan_limit_s: float = 20.0, strided: bool = False) -> Callable[[], Any]:
    """A call doing one r2c + c2r pair of size n over B*C float32 columns:
    contiguous in time ((B*C) x n), or with `strided` the op's own layout
    (B x n x C, the transforms along the middle axis). FFTW plans with
    `planner`, at most plan_limit_s seconds per plan."""
    import numpy as np

    rng = np.random.default_rng(0)
    shape, axis = ((B, n, C), 1) if strided else ((B * C, n), 1)
    spec_shape = (B, n // 2 + 1, C) if strided else (B * C, n // 2 + 1)
    if lib == "fftw":
        import pyfftw

        a = pyfftw.empty_aligned(shape, dtype="float32")
        spec = pyfftw.empty_aligned(spec_shape, dtype="complex64")
        back = pyfftw.empty_aligned(shape, dtype="float32")
        fwd = pyfftw.FFTW(a, spec, axes=(axis,), direction="FFTW_FORWARD", flags=(planner,), threads=threads,
                          planning_timelimit=plan_limit_s)
        inv = pyfftw.FFTW(spec, back, axes=(axis,), direction="FFTW_BACKWARD",
                          flags=(planner, "FFTW_DESTROY_INPUT"), threads=threads, planning_timelimit=plan_limit_s)
        a[:] = rng.standard_normal(shape, dtype=np.float32)

        def call():  # the plans alone: calling them would also scale the inverse by 1/n (another pass)
            fwd.execute()
            inv.execute()
        return call
    import scipy.fft

    a = rng.standard_normal(shape, dtype=np.float32)

    def call():
        return scipy.fft.irfft(scipy.fft.rfft(a, axis=axis, workers=threads), n=n, axis=axis, workers=threads)
    return call


def transposes(x: torch.Tensor, threads: int, out=None) -> Dict[str, Dict[str, Callable[[], Any]]]:
    """Calls copying x (B x L x C) into a B x C x L buffer ("in") and that
    buffer into a B x L x C one ("out"), two ways each: torch's strided copy
    of the whole ("copy") and its blocked 2-D transpose per batch entry, the
    entries spread over `threads` threads ("blocked"). `out`: the two
    buffers (B x C x L, B x L x C), else new ones."""
    from concurrent.futures import ThreadPoolExecutor

    xt, y = out if out is not None else (torch.empty(x.shape[0], x.shape[2], x.shape[1]), torch.empty_like(x))
    pool = ThreadPoolExecutor(max(1, threads))

    def blocked(dst, src):
        list(pool.map(lambda b: dst[b].copy_(src[b].t()), range(x.shape[0])))

    return {"in": {"copy": lambda: xt.copy_(x.transpose(1, 2)), "blocked": lambda: blocked(xt, x)},
            "out": {"copy": lambda: y.copy_(xt.transpose(1, 2)), "blocked": lambda: blocked(y, xt)}}


def _ms(t: Dict[str, Any]) -> Optional[float]:
    return t.get("min_ms") if t and t.get("status") == "ok" else None


def _time(call, cfg: FloorConfig) -> Dict[str, Any]:
    return time_calls(call, warmup=cfg.warmup, repeats=cfg.repeats, budget_s=cfg.cell_budget)


def _op_calls(B: int, L: int, C: int, seed: int):
    import tmm  # noqa: F401  (registers torch.ops.tmm)

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, C, generator=g)
    w = torch.randn(1, 1, L, generator=g) / L ** 0.5
    gy = torch.randn(B, L, C, generator=g)
    op = torch.ops.tmm.causal_toeplitz

    def fwd():
        return op(x, w, None)

    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()

    def fwdbwd():
        y = op(xg, wg, None)
        return torch.autograd.grad(y, (xg, wg), gy)
    return x, fwd, fwdbwd


def _best(timings: Dict[str, Dict[str, Any]]):
    """(key, ms) of the fastest timing that ran, or (None, None)."""
    ok = [(_ms(t), k) for k, t in timings.items() if _ms(t)]
    return (min(ok)[1], min(ok)[0]) if ok else (None, None)


def time_interleaved(calls: Dict[str, Callable[[], Any]], cfg: FloorConfig) -> Dict[str, Dict[str, Any]]:
    """Each call timed in rounds that visit every call once, in turn, after
    `warmup` such rounds: what one call pays for a busy moment of the machine
    the others pay in the same round, so their ratios hold better than those
    of cells timed one after the other. As many rounds as fit the budget of
    one cell per call (at least one), at most `repeats`; per call the
    time_calls record (min_ms, median_ms, times_s)."""
    warm = {k: [] for k in calls}
    for _ in range(max(1, cfg.warmup)):
        for k, call in calls.items():
            seconds, out = timed(call)
            del out
            warm[k].append(seconds)
    per_round = sum(min(v) for v in warm.values())
    rounds = max(1, min(cfg.repeats, int(cfg.cell_budget * len(calls) / max(per_round, 1e-9))))
    times = {k: [] for k in calls}
    load_start = CPU_LOAD.mark()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for k, call in calls.items():
                seconds, out = timed(call)
                del out
                times[k].append(seconds)
    finally:
        if gc_was_enabled:
            gc.enable()
    others = CPU_LOAD.others(load_start)
    return {k: {"status": "ok", "warmup_s": warm[k], "times_s": t, "repeats": len(t),
                "median_ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3, "mean_ms": statistics.fmean(t) * 1e3,
                "other_cpu_cores": others} for k, t in times.items()}


def measure_length(cfg: FloorConfig, L: int, lib: str, threads: int) -> Dict[str, Any]:
    B, C = cfg.batch, cfg.channels
    rec: Dict[str, Any] = {"L": L, "B": B, "C": C}
    x, fwd, fwdbwd = _op_calls(B, L, C, cfg.seed)
    dst = torch.empty_like(x)
    calls: Dict[str, Callable[[], Any]] = {"memcpy": lambda: dst.copy_(x)}
    for way, ways in transposes(x, threads).items():
        for how, call in ways.items():
            calls[f"transpose_{way}_{how}"] = call
    t0 = time.perf_counter()
    sizes = fftw_size_candidates(L)
    for n in sizes:
        calls[f"pair_{n}"] = fft_pair(lib, B, C, n, threads, cfg.planner, cfg.plan_limit_s)
    if cfg.strided:  # for reference, at the smallest candidate (7-smooth)
        calls["strided_pair"] = fft_pair(lib, B, C, sizes[0], threads, cfg.planner, cfg.plan_limit_s, strided=True)
    rec["plan_s"] = time.perf_counter() - t0
    calls["fwd"], calls["fwdbwd"] = fwd, fwdbwd
    t = time_interleaved(calls, cfg)
    del calls, dst
    nbytes = 2 * x.numel() * x.element_size()  # read + write
    rec["memcpy"] = t["memcpy"]
    rec["memcpy_gbs"] = nbytes / (_ms(t["memcpy"]) * 1e-3) / 1e9
    for way in ("in", "out"):
        rec[f"transpose_{way}"] = {how: t[f"transpose_{way}_{how}"] for how in ("copy", "blocked")}
    t_in, t_out = (_best(rec[f"transpose_{w}"])[1] for w in ("in", "out"))
    rec["transposes_ms"] = t_in + t_out
    rec["transpose_gbs"] = 2 * nbytes / (rec["transposes_ms"] * 1e-3) / 1e9
    rec["pairs"] = {str(n): t[f"pair_{n}"] for n in sizes}
    best_n, pair_ms = _best(rec["pairs"])
    rec["n"], rec["pair_ms"] = int(best_n), pair_ms
    if cfg.strided:
        rec["strided_pair"] = t["strided_pair"]
        rec["strided_n"] = sizes[0]
    rec["fwd"], rec["fwdbwd"] = t["fwd"], t["fwdbwd"]
    f, fb, tr = _ms(rec["fwd"]), _ms(rec["fwdbwd"]), rec["transposes_ms"]
    rec["floor_fwd_ms"] = pair_ms + tr
    rec["floor_fwdbwd_ms"] = PAIRS_FWDBWD * pair_ms + TRANSPOSES_FWDBWD * tr
    rec["fwd_vs_floor"] = f / rec["floor_fwd_ms"]
    rec["fwdbwd_vs_floor"] = fb / rec["floor_fwdbwd_ms"]
    return rec


def measure_sweep(cfg: FloorConfig) -> List[Dict[str, Any]]:
    rows = []
    for L in range(cfg.sweep_lo, cfg.sweep_hi + 1, cfg.sweep_step):
        _, fwd, _ = _op_calls(cfg.sweep_batch, L, cfg.sweep_channels, cfg.seed)
        rec: Dict[str, Any] = {"L": L}
        for key, rule in (("auto", None), ("pow2", "pow2")):
            with size_rule(rule):
                rec[key] = _time(fwd, cfg)
        rows.append(rec)
    return rows


# Sizes for the cost model's calibration (fft_size.cpp): every pass mix.
CALIBRATION_SIZES = [512, 640, 720, 768, 800, 960, 1024, 1080, 1200, 1280, 1440, 1500, 1600, 1800, 1920, 2000, 2048,
                     2160, 2400, 2560, 2880, 3000, 3072, 3200, 3600, 3840, 4000, 4096, 4320, 4800, 5120, 5760, 6000,
                     6144, 6400, 7200, 7680, 8000, 8192, 8640, 9000, 9600, 10240]


def passes_of(n: int) -> Dict[str, int]:
    """LaneFft's passes after the first radix-4 one (fft.h): radix 4s, 5s, 3s, a last 2."""
    rest, c = n // 4, {2: 0, 3: 0, 5: 0}
    for p in (2, 3, 5):
        while rest % p == 0:
            rest //= p
            c[p] += 1
    if rest != 1 or n % 4:
        raise ValueError(f"{n} is not 4 * 2^a 3^b 5^c")
    return {"r4": c[2] // 2, "r2": c[2] % 2, "r3": c[3], "r5": c[5]}


def measure_sizes(cfg: FloorConfig, sizes: List[int]) -> Dict[str, Any]:
    """Forward at L = n/2 with the size forced to n, per n; the per-row
    costs fitted by least squares (ms / (B*C/32 tiles * n) against the pass
    counts), relative to a radix-4 pass: the constants of fft_size.cpp."""
    import numpy as np

    import tmm

    rows = []
    for n in sizes:
        _, fwd, _ = _op_calls(cfg.sweep_batch, n // 2, cfg.sweep_channels, cfg.seed)
        with size_rule(str(n)), tmm.ops.path("fft"):
            t = _time(fwd, cfg)
        rows.append({"n": n, **passes_of(n), "fwd": t})
    ok = [r for r in rows if _ms(r["fwd"])]
    tiles = cfg.sweep_batch * max(1, cfg.sweep_channels // 32)
    A = np.array([[1.0, r["r4"], r["r2"], r["r3"], r["r5"]] for r in ok])
    y = np.array([_ms(r["fwd"]) / (tiles * r["n"]) for r in ok])
    fit = None
    if len(ok) >= 5:
        coef = np.linalg.lstsq(A, y, rcond=None)[0]
        fit = {k: float(v / coef[1]) for k, v in zip(("fixed", "r4", "r2", "r3", "r5"), coef)}
        fit["ns_per_row_r4"] = float(coef[1] * 1e6)
    return {"rows": rows, "fit": fit}


def _jumps(rows: List[Dict[str, Any]], key: str) -> Optional[float]:
    ms = [_ms(r[key]) for r in rows]
    steps = [b / a for a, b in zip(ms, ms[1:]) if a and b]
    return max(steps) if steps else None


def _f(v: Optional[float], fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def tables(res: Dict[str, Any]) -> str:
    env = res["env"]
    lines = [f"CPU: {env.get('cpu_model')} ({env.get('cpu_count')} cores, tmm variant {res.get('tmm_capability')}); "
             f"B={res['config']['batch']} C={res['config']['channels']} float32 G=K=1, {env.get('threads')} threads; "
             f"floor: {res['floor_lib']}" + (f" {res['config']['planner']}" if res["floor_lib"] == "fftw" else "")
             + "; min of the timed calls", ""]
    head = ["L", "pair n", "pair ms", "transposes ms", "transpose GB/s", "memcpy GB/s", "strided pair ms",
            "fwd ms", "fwd / floor", "fwd+bwd ms", "fwd+bwd / floor"]
    rows = []
    for r in res["lengths"]:
        rows.append([r["L"], r.get("n") or "-", _f(r.get("pair_ms")), _f(r.get("transposes_ms")),
                     _f(r.get("transpose_gbs"), "{:.1f}"), _f(r.get("memcpy_gbs"), "{:.1f}"),
                     _f(_ms(r.get("strided_pair"))), _f(_ms(r["fwd"])), _f(r["fwd_vs_floor"]), _f(_ms(r["fwdbwd"])),
                     _f(r["fwdbwd_vs_floor"])])
    lines.append(markdown_table(head, rows))
    v = res["verdicts"]
    lines += ["", f"floor: fwd = pair + transposes (one each way), fwd+bwd = {PAIRS_FWDBWD} pairs + "
              f"{TRANSPOSES_FWDBWD} transposes each way. fwd <= {FWD_TARGET}x floor: "
              f"{'met' if v['fwd_met'] else 'missed'} (worst {_f(v['fwd_worst'])}x); fwd+bwd <= {FWDBWD_TARGET}x "
              f"floor: {'met' if v['fwdbwd_met'] else 'missed'} (worst {_f(v['fwdbwd_worst'])}x)"]
    if res.get("sizes"):
        fit = res["sizes"]["fit"]
        lines += ["", "Forced transform sizes (forward, L = n/2, sweep B and C): ms and the passes after the first", ""]
        lines.append(markdown_table(["n", "r4", "r5", "r3", "r2", "fwd ms", "ms per 1000 rows"],
                                    [[r["n"], r["r4"], r["r5"], r["r3"], r["r2"], _f(_ms(r["fwd"])),
                                      _f(_ms(r["fwd"]) * 1000 / r["n"] if _ms(r["fwd"]) else None, "{:.3f}")]
                                     for r in res["sizes"]["rows"]]))
        if fit:
            lines += ["", "fitted per-row costs relative to a radix-4 pass: " +
                      ", ".join(f"{k} {v:.2f}" for k, v in fit.items() if k != "ns_per_row_r4")]
    if res.get("sweep"):
        c = res["config"]
        lines += ["", f"Smooth-L sweep: forward, B={c['sweep_batch']} C={c['sweep_channels']}, "
                  "ms with the size rule (auto) and with powers of two only (pow2)", ""]
        srows = [[r["L"], _f(_ms(r["auto"])), _f(_ms(r["pow2"])),
                  _f(_ms(r["pow2"]) / _ms(r["auto"]) if _ms(r["pow2"]) and _ms(r["auto"]) else None)]
                 for r in res["sweep"]]
        lines.append(markdown_table(["L", "auto ms", "pow2 ms", "pow2/auto"], srows))
        lines += ["", f"largest step between neighbouring L: auto {_f(res['sweep_jump_auto'])}x, "
                  f"pow2 {_f(res['sweep_jump_pow2'])}x"]
    return "\n".join(lines)


def plot(res: Dict[str, Any], path: Path) -> Optional[str]:
    plt = pyplot()
    if plt is None:
        return "no plot: matplotlib is missing"
    fig, axes = plt.subplots(1, 2 if res.get("sweep") else 1, figsize=(12 if res.get("sweep") else 6, 4.5),
                             squeeze=False)
    ax = axes[0][0]
    Ls = [r["L"] for r in res["lengths"]]
    for label, value, dashed in (("floor fwd", lambda r: r.get("floor_fwd_ms"), True),
                                 ("floor fwd+bwd", lambda r: r.get("floor_fwdbwd_ms"), True),
                                 ("tmm fwd", lambda r: _ms(r["fwd"]), False),
                                 ("tmm fwd+bwd", lambda r: _ms(r["fwdbwd"]), False),
                                 ("FFTW pair, strided layout", lambda r: _ms(r.get("strided_pair")), True)):
        ax.plot(Ls, [value(r) or float("nan") for r in res["lengths"]], marker="o", label=label,
                linestyle="--" if dashed else "-")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("L")
    ax.set_ylabel("ms (min)")
    ax.set_title(f"floor ({res['floor_lib']}) vs tmm")
    ax.legend(fontsize=8)
    if res.get("sweep"):
        ax = axes[0][1]
        Ls = [r["L"] for r in res["sweep"]]
        for key in ("auto", "pow2"):
            ax.plot(Ls, [_ms(r[key]) or float("nan") for r in res["sweep"]], marker=".", label=f"tmm fwd, {key} sizes")
        ax.set_xlabel("L")
        ax.set_ylabel("ms (min)")
        ax.set_title("smooth-L sweep")
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_plot(fig, path)
    return None


def run(cfg: FloorConfig, out_dir: Path, progress: bool = True, do_plot: bool = True, repo=None) -> Dict[str, Any]:
    import tmm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = floor_library(cfg.floor_lib)
    threads = torch.get_num_threads()
    live = LiveJson(out_dir / "results.json", {
        "schema": "tmm.bench_floor/2", "config": dataclasses.asdict(cfg), "env": provenance.environment("cpu"),
        "git": provenance.git(repo), "floor_lib": lib, "tmm_capability": tmm.ops.cpu_capability()})
    t_start = time.perf_counter()
    with size_rule(None):
        for L in cfg.lengths:
            rec = measure_length(cfg, L, lib, threads)
            live.add("lengths", rec)
            if progress:
                print(f"floor L={L}: pair {_f(rec['pair_ms'])} ms (n={rec['n']}), transposes "
                      f"{_f(rec.get('transposes_ms'))} ms, fwd {_f(_ms(rec['fwd']))} ms ({_f(rec['fwd_vs_floor'])}x "
                      f"floor), fwd+bwd {_f(_ms(rec['fwdbwd']))} ms ({_f(rec['fwdbwd_vs_floor'])}x floor)", flush=True)
    recs = live.data.get("lengths", [])
    fw = [r["fwd_vs_floor"] for r in recs if r["fwd_vs_floor"]]
    fb = [r["fwdbwd_vs_floor"] for r in recs if r["fwdbwd_vs_floor"]]
    live.set("verdicts", {"fwd_worst": max(fw) if fw else None, "fwd_met": bool(fw) and max(fw) <= FWD_TARGET,
                          "fwdbwd_worst": max(fb) if fb else None,
                          "fwdbwd_met": bool(fb) and max(fb) <= FWDBWD_TARGET})
    if cfg.sizes:
        live.set("sizes", measure_sizes(cfg, cfg.sizes))
        if progress:
            print(f"size calibration: {live.data['sizes']['fit']}", flush=True)
    if cfg.sweep:
        sweep = measure_sweep(cfg)
        live.set("sweep", sweep)
        live.set("sweep_jump_auto", _jumps(sweep, "auto"))
        live.set("sweep_jump_pow2", _jumps(sweep, "pow2"))
    live.set("wall_s", time.perf_counter() - t_start)
    live.finish()
    table = tables(live.data)
    atomic_write_text(out_dir / "table.md", table + "\n")
    note = plot(live.data, out_dir / "plot.png") if do_plot else None
    return {"results": live.data, "table": table, "plot_note": note}
