"""Where the CPU kernel's direct (time-domain) path stops beating its FFT
path (scripts/bench_crossover.py): forward+backward of
tmm.ops.causal_toeplitz with each CPU path forced (tmm.ops.path), side by
side, over short lengths and the tile layouts that matter: one group per
tile (G=1), one channel per group (G=C), and the kernel variant (K=8)."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from tmm import testing
from .ops import make_call
from tmm.progress import Progress
from tmm.tables import markdown_table
from .timing import time_calls

__all__ = ["measure", "table"]


def measure(lengths: Sequence[int], batch: int, channels: int, repeats: int,
            progress: bool = True) -> Dict[str, Any]:
    """{"rows": [{G, K, L, direct_ms, fft_ms}], "direct_up_to": {"G=..,K=..": the
    largest L at which direct was faster (0: never)}}; median of `repeats`
    timed calls after one untimed."""
    import tmm.ops

    layouts = [(1, 1), (channels, 1), (1, 8)]
    rows: List[Dict[str, Any]] = []
    best: Dict[str, int] = {}
    with Progress(len(lengths) * len(layouts), desc="crossover", unit="cell", enabled=progress) as bar:
        for G, K in layouts:
            best[f"G={G},K={K}"] = 0
            for L in lengths:
                inp = testing.make_inputs(batch, L, channels, G, K, seed=L)
                ms = {}
                for path in ("direct", "fft"):
                    with tmm.ops.path(path):
                        t = time_calls(make_call(tmm.ops.causal_toeplitz, "fwdbwd", inp), "cpu",
                                       warmup=1, repeats=repeats)
                    ms[path] = t["median_ms"]
                if ms["direct"] < ms["fft"]:
                    best[f"G={G},K={K}"] = L
                rows.append({"G": G, "K": K, "L": L, "direct_ms": ms["direct"], "fft_ms": ms["fft"]})
                bar.update(1, cell=f"G={G} K={K} L={L}")
    return {"rows": rows, "direct_up_to": best}


def table(result: Dict[str, Any]) -> str:
    rows = [[r["G"], r["K"], r["L"], f"{r['direct_ms']:.3f}", f"{r['fft_ms']:.3f}",
             f"{r['fft_ms'] / r['direct_ms']:.2f}"] for r in result["rows"]]
    text = markdown_table(["G", "K", "L", "direct ms", "fft ms", "fft/direct"], rows, left=3)
    summary = [f"- {k}: direct faster up to L = {v}" for k, v in result["direct_up_to"].items()]
    return text + "\n\n" + "\n".join(summary)
