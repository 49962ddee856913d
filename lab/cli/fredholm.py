"""Operator-index analysis of a TMM checkpoint: the winding number of every
layer's and head's Toeplitz symbol and the Fredholm index it gives
(lab.experiments.operator_index; the convention is stated there and in
docs/experiments.md).

Usage (from the repository root; the extension must be built):

    python scripts/fredholm.py CHECKPOINT_DIR [--out DIR]
    python scripts/fredholm.py --demo                 # models/tmm-tiny.json, untrained
    python scripts/fredholm.py --config tmm-cpu-small # any config, untrained

Prints a table (layer, head, tap, winding, index, min|phi|, max|phi|) and a
count of the indices, and writes ``fredholm.json`` (the config, the
convention, every row) and ``fredholm.png`` (the symbol curves, one panel per
layer) to ``--out`` (default ``CHECKPOINT_DIR/fredholm``, or
``results/fredholm-<config>`` without a checkpoint), each atomically.
A one-step shift has index -1, a lag-0-dominated kernel index 0; untrained
(Kaiming) vectors give indices near -n/2.
"""
import argparse
import sys
from pathlib import Path

import torch

from lab import REPO
from lab.analysis.fredholm import DEFAULT_REL_TOL
from lab.experiments.errors import SettingsError
from lab.experiments.operator_index import analyse, default_out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("checkpoint", nargs="?", help="a checkpoint directory (config.json + model.safetensors)")
    ap.add_argument("--demo", action="store_true", help="analyse models/tmm-tiny.json, untrained")
    ap.add_argument("--config", help="analyse this config (a name in models/ or a JSON path), untrained")
    ap.add_argument("--seed", type=int, default=0, help="init seed with --demo/--config (default 0)")
    ap.add_argument("--out", help="output folder (default CHECKPOINT/fredholm or results/fredholm-<config>)")
    ap.add_argument("--points", type=int, default=None, help="samples on the circle (default max(4096, 8 n), refined)")
    ap.add_argument("--rel-tol", type=float, default=DEFAULT_REL_TOL,
                    help="flag near_zero when min|phi| <= rel_tol * max|phi| (default %(default)g)")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    args = ap.parse_args(argv)

    sources = sum(x is not None and x is not False for x in (args.checkpoint, args.config, args.demo or None))
    if sources != 1:
        ap.error("give exactly one of CHECKPOINT_DIR, --demo, --config")
    torch.set_num_threads(min(torch.get_num_threads(), 4))
    config = "tmm-tiny" if args.demo else args.config
    try:
        report = analyse(checkpoint=args.checkpoint, config=config if args.checkpoint is None else None,
                         seed=args.seed, points=args.points, rel_tol=args.rel_tol)
    except SettingsError as e:
        sys.exit(f"fredholm.py: {e}")
    print(report.header)
    print(report.table)
    print(report.counts_line)
    out = Path(args.out) if args.out else default_out(report, args.checkpoint, REPO / "results")
    for path in report.write(out, plot=not args.no_plot):
        print(f"wrote {path}")
    return 0

