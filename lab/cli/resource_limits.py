"""Resource limits (lab/bench/limits.py): the longest sequence each model
handles in this machine's memory, and what happens past it: peak resident
memory at growing lengths (each in a fresh process), bytes per token, the
longest sequence that fits in --memory-gib (default: 90% of this machine's
RAM), and a check of the prediction under an address-space limit of
--check-gib: 60% of the predicted length must run, twice it must fail with a
clear out-of-memory error (not a crash or a hang) within --timeout seconds.

    scripts/resource_limits.py                     # ~10 min on 2 cores
    scripts/resource_limits.py --archs tmm --lengths 1024,4096

Writes results.json and table.md to --out (default
bench/results/limits-<timestamp>/) and prints the table.
"""
import argparse
import os
import time
from pathlib import Path

from lab import REPO
from lab.bench import limits
from tmm.files import atomic_write_json, atomic_write_text


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default=",".join(limits.ARCHS))
    p.add_argument("--modes", default="inference,training")
    p.add_argument("--lengths", default="1024,2048,4096,8192")
    p.add_argument("--max-run-s", type=float, default=60.0, help="stop growing a model once a run takes this long")
    ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    p.add_argument("--memory-gib", type=float, default=round(0.9 * ram_gib, 1))
    p.add_argument("--check-gib", type=float, default=2.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.archs = [a for a in args.archs.split(",") if a]
    bad = [a for a in args.archs if a not in limits.ARCHS]
    if bad:
        p.error(f"--archs: unknown {bad}; expected some of {list(limits.ARCHS)}")
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("inference", "training") for m in args.modes):
        p.error(f"--modes: expected inference and/or training, got {args.modes}")
    args.lengths = sorted(int(n) for n in args.lengths.split(","))
    if len(args.lengths) < 2:
        p.error("--lengths: need at least two lengths to fit bytes per token")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("limits-%Y%m%d-%H%M%S"))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = vars(args)
    rows = limits.run(cfg)
    out = Path(args.out)
    text = limits.table(rows, cfg)
    print(text)
    atomic_write_json(out / "results.json", {"config": cfg, "rows": rows})
    atomic_write_text(out / "table.md", text)
    print(f"\nwrote {out}/results.json, table.md")
    return 0

