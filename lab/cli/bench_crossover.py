"""Where the CPU kernel's direct (time-domain) path stops beating its FFT path
(lab/bench/crossover.py): prints a table and the largest length at which the
direct path is still faster per layout, and writes JSON next to it.

    python scripts/bench_crossover.py [--lengths 8,16,...] [--out DIR]
"""
import argparse
import time
from pathlib import Path

import torch

import tmm
from lab.bench import crossover
from tmm.files import atomic_write_json, atomic_write_text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="8,16,24,32,48,64,96,128,192,256")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--channels", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", default=f"bench/results/crossover-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = crossover.measure([int(v) for v in args.lengths.split(",")], args.batch, args.channels, args.repeats)
    text = crossover.table(result)
    out = Path(args.out)
    meta = {"batch": args.batch, "channels": args.channels, "threads": args.threads,
            "torch": torch.__version__, "current_crossover": tmm._C.direct_crossover_length}
    atomic_write_json(out / "crossover.json", {"config": meta, **result})
    atomic_write_text(out / "crossover.md", text + "\n")
    print(text)
    print(f"\nwritten to {out}/crossover.{{json,md}} (fwd+bwd, float32, B={args.batch}, C={args.channels}, "
          f"{args.threads} threads; crossover in use: L * K <= {meta['current_crossover']})")
    return 0

