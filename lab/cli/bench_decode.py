"""Decoding benchmark (lab/bench/decode.py): prefill time and per-token
decode latency against context length for the four architectures at matched
size (d = 512, 4 layers), TMM's and Hyena's cached decoder vs the fast exact
one (FutureFill) vs recomputing the full forward; tokens/s for a 1024-token
generation; and TMM generating 8192 tokens with both exact methods (same
tokens required).

    scripts/bench_decode.py                       # everything (~15 min on 2 cores)
    scripts/bench_decode.py --contexts 512,4096 --archs tmm --gen-long 0

Writes results.json, table.md and latency.png to --out (default
bench/results/decode-<timestamp>/), each atomically; prints the tables.
"""
import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine

import torch  # noqa: E402

from lab import REPO  # noqa: E402
from lab.bench import decode  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default="tmm,transformer,hyena,mamba2")
    p.add_argument("--contexts", default="512,1024,2048,4096,8192,16384")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--steps", type=int, default=16, help="decode steps timed per context (median)")
    p.add_argument("--recompute-max", type=int, default=4096, help="largest context timed with recompute")
    p.add_argument("--max-prefill-s", type=float, default=30.0,
                   help="skip longer contexts of a model once its prefill took this long")
    p.add_argument("--gen", type=int, default=1024, help="tokens generated for the tokens/s column")
    p.add_argument("--gen-long", type=int, default=8192, help="TMM cached vs fast on this many tokens (0: skip)")
    p.add_argument("--long-batches", default="1,8", help="batch sizes of the --gen-long comparison")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.archs = [a for a in args.archs.split(",") if a]
    for a in args.archs:
        if a not in decode.ARCH_EXTRA:
            p.error(f"--archs: unknown architecture {a!r}; expected some of {', '.join(decode.ARCH_EXTRA)}")
    args.long_batches = [int(b) for b in args.long_batches.split(",") if b]
    args.contexts = sorted(int(c) for c in args.contexts.split(",") if c)
    if not args.contexts or args.contexts[0] < 1:
        p.error(f"--contexts: expected positive integers, got {args.contexts}")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("decode-%Y%m%d-%H%M%S"))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    results = decode.run(vars(args), Path(args.out))
    print(decode.tables(results))
    print(f"\nwrote {args.out}/results.json, table.md, latency.png")
    return 0

