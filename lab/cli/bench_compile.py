"""A training step of a small drop-in model (tmm.nn.SequenceModel with
ToeplitzMixer), eager vs torch.compile(fullgraph=True) (lab/bench/compile.py):
the compilation (first step), then the median of --steps timed steps after
--warmup untimed ones, for each mode.

    scripts/bench_compile.py                          # d 256, 4 layers, batch 8 x 256 tokens, inductor
    scripts/bench_compile.py --d-model 128 --seq 512 --steps 50
    scripts/bench_compile.py --smoke                  # tiny sizes, aot_eager: a check that it runs, not a measurement

Writes results.json and table.md to --out (default
bench/results/compile-<timestamp>/), each atomically; prints the table.
"""
import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine

import torch  # noqa: E402

from lab import REPO  # noqa: E402
from lab.bench import compile as bench  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes and the aot_eager backend (seconds)")
    for key in ("d_model", "n_layers", "heads", "vocab", "seq", "batch", "steps", "warmup", "seed"):
        p.add_argument("--" + key.replace("_", "-"), type=int, default=None,
                       help=f"default {bench.DEFAULTS[key]} (--smoke: {bench.SMOKE[key]})")
    p.add_argument("--backend", default=None, help=f"torch.compile backend (default {bench.DEFAULTS['backend']})")
    p.add_argument("--mode", default=None, help="torch.compile mode (default none; e.g. max-autotune)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    cfg = dict(bench.SMOKE if args.smoke else bench.DEFAULTS)
    cfg.update({k: v for k, v in vars(args).items() if k in cfg and v is not None})
    for key in ("d_model", "n_layers", "heads", "vocab", "seq", "batch", "steps"):
        if cfg[key] < 1:
            p.error(f"--{key.replace('_', '-')}: expected a positive integer, got {cfg[key]}")
    if cfg["warmup"] < 0:
        p.error(f"--warmup: expected an integer >= 0, got {cfg['warmup']}")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("compile-%Y%m%d-%H%M%S"))
    return args, cfg


def main(argv=None) -> int:
    args, cfg = parse_args(argv)
    torch.set_num_threads(args.threads)
    results = bench.run(cfg, Path(args.out), repo=REPO)
    print(bench.table(results))
    print(f"wrote {args.out}/results.json, table.md")
    return 0

