"""Where a training step's time goes (lab/bench/step.py): a TMM and a Hyena
language model of the zoo at several lengths, the tokens per step held
equal, each step split into matmuls, the mixer op, norms, activations, the
loss, the optimizer and the rest.

    scripts/bench_step.py                                   # tmm-cpu-small, hyena-cpu-small; L 512, 4096, 16384; 16384 tokens
    scripts/bench_step.py --models tmm-cpu-small --lengths 1024,8192 --tokens 8192
    scripts/bench_step.py --tiny                            # tiny models and lengths: a check that it runs

Writes results.json and table.md to --out (default
bench/results/step-<timestamp>/), each atomically; prints the table.
"""
import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler, quiet on a CUDA build without a GPU
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine

import torch  # noqa: E402

from lab import REPO  # noqa: E402
from lab.bench import step  # noqa: E402


def _ints(text):
    return [int(t) for t in str(text).replace(",", " ").split()]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = step.StepConfig()
    p.add_argument("--models", default=",".join(d.models), help="zoo config names or JSON files, comma-separated")
    p.add_argument("--lengths", default=",".join(map(str, d.lengths)))
    p.add_argument("--tokens", type=int, default=d.tokens, help="tokens per step (batch = tokens // L)")
    p.add_argument("--steps", type=int, default=d.steps, help="timed steps per cell")
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tiny", action="store_true", help="tmm-tiny and hyena-tiny at L 16, 32: seconds (tests)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    cfg = step.StepConfig(models=[m for m in args.models.split(",") if m], lengths=_ints(args.lengths),
                          tokens=args.tokens, steps=args.steps, warmup=args.warmup)
    if args.tiny:
        cfg = step.StepConfig(models=["tmm-tiny", "hyena-tiny"], lengths=[16, 32], tokens=64, steps=1, warmup=1)
    if not cfg.models or not cfg.lengths or min(cfg.lengths) < 1 or cfg.tokens < 1 or cfg.steps < 1 or cfg.warmup < 0:
        p.error("expected models, lengths >= 1, --tokens >= 1, --steps >= 1 and --warmup >= 0")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("step-%Y%m%d-%H%M%S"))
    return args, cfg


def main(argv=None) -> int:
    args, cfg = parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        out = step.run(cfg, Path(args.out), repo=REPO)
    finally:
        torch.set_num_threads(threads)
    print(out["table"])
    print(f"\nresults: {args.out}/results.json, table.md")
    return 0
