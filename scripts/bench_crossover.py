#!/usr/bin/env python3
"""Where the CPU kernel's direct (time-domain) path stops beating its FFT path.

Times forward+backward of tmm.ops.causal_toeplitz with each CPU path forced
(tmm.ops.cpu_algorithm), side by side, over short lengths and the tile
layouts that matter: one group per tile (G=1), one channel per group (G=C),
and the kernel variant (K=8). Prints a table and the largest length at which
the direct path is still faster per layout, and writes JSON next to it.

    python scripts/bench_crossover.py [--lengths 8,16,...] [--out DIR]
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ops import atomic_write, make_call  # noqa: E402

import tmm  # noqa: E402


def median_ms(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="8,16,24,32,48,64,96,128,192,256")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--channels", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", default=f"bench/results/crossover-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lengths = [int(v) for v in args.lengths.split(",")]
    layouts = [(1, 1), (args.channels, 1), (1, 8)]
    rows, best = [], {}
    total, done = len(lengths) * len(layouts), 0
    for G, K in layouts:
        best[f"G={G},K={K}"] = 0
        for L in lengths:
            gen = torch.Generator().manual_seed(L)
            inp = {
                "x": torch.randn(args.batch, L, args.channels, generator=gen),
                "weight": torch.randn(G, K, L, generator=gen) * (2.0 / L) ** 0.5,
                "bias": torch.zeros(G, L),
                "grad_y": torch.randn(args.batch, L, args.channels, generator=gen),
            }
            ms = {}
            for algo in ("direct", "fft"):
                with tmm.ops.cpu_algorithm(algo):
                    ms[algo] = median_ms(make_call(tmm.ops.causal_toeplitz, "fwdbwd", inp), args.repeats)
            if ms["direct"] < ms["fft"]:
                best[f"G={G},K={K}"] = L
            rows.append({"G": G, "K": K, "L": L, "direct_ms": ms["direct"], "fft_ms": ms["fft"]})
            done += 1
            print(f"\r[{done}/{total}] G={G} K={K} L={L}        ", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    table = ["| G | K | L | direct ms | fft ms | fft/direct |", "|---|---|---|---:|---:|---:|"]
    table += [f"| {r['G']} | {r['K']} | {r['L']} | {r['direct_ms']:.3f} | {r['fft_ms']:.3f} | "
              f"{r['fft_ms'] / r['direct_ms']:.2f} |" for r in rows]
    summary = [f"- {k}: direct faster up to L = {v}" for k, v in best.items()]
    text = "\n".join(table + [""] + summary)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"batch": args.batch, "channels": args.channels, "threads": args.threads,
            "torch": torch.__version__, "current_crossover": tmm._C.direct_crossover_length}
    atomic_write(out / "crossover.json", json.dumps({"config": meta, "rows": rows, "direct_up_to": best}, indent=2).encode())
    atomic_write(out / "crossover.md", (text + "\n").encode())
    print(text)
    print(f"\nwritten to {out}/crossover.{{json,md}} (fwd+bwd, float32, B={args.batch}, C={args.channels}, "
          f"{args.threads} threads; crossover in use: L * K <= {meta['current_crossover']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
