"""The zoo's speed under two checkouts of tmm, side by side (lab/bench/revisions.py):
a training step of each zoo model, eager and compiled, and greedy tokens/s.

    scripts/bench_revisions.py --checkout before=../tmm-before --checkout after=.
    scripts/bench_revisions.py --checkout a=/path/one --checkout b=/path/two --configs tmm-cpu-small --rounds 5

Each checkout is a tree with tmm built in place (scripts/test.sh builds one).
Writes results.json and table.md to --out (default
bench/results/revisions-<timestamp>/), each atomically; prints the table.
"""
import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine

from lab import REPO  # noqa: E402
from lab.bench import revisions  # noqa: E402


def parse_args(argv=None):
    d = revisions.DEFAULTS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkout", action="append", default=[], metavar="LABEL=PATH",
                   help="a checkout with tmm built in place, twice: the first is the baseline")
    p.add_argument("--configs", default=",".join(d["configs"]), help="zoo config names, comma-separated")
    for name in ("batch", "seq", "steps", "warmup", "rounds", "prompt", "new_tokens", "threads"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=d[name])
    p.add_argument("--compile-backend", default=d["compile_backend"])
    p.add_argument("--smoke", action="store_true", help="tiny models, seconds: the code path, not a measurement")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    pairs = [c.partition("=") for c in args.checkout]
    if len(pairs) != 2 or any(not label or not sep or not path for label, sep, path in pairs):
        p.error(f"--checkout: expected two LABEL=PATH, got {args.checkout}")
    args.checkouts = {label: Path(path).resolve() for label, _, path in pairs}
    for label, path in args.checkouts.items():
        if not (path / "tmm" / "__init__.py").is_file():
            p.error(f"--checkout {label}={path}: no tmm/ package there")
    args.configs = [c for c in args.configs.split(",") if c]
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("revisions-%Y%m%d-%H%M%S"))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = dict(revisions.SMOKE) if args.smoke else {k: v for k, v in vars(args).items() if k in revisions.DEFAULTS}
    results = revisions.run(cfg, args.checkouts, Path(args.out))
    print(revisions.table(results))
    print(f"\nwrote {args.out}/results.json, table.md")
    return 0
