#!/usr/bin/env python3
"""Operator-index analysis of a TMM checkpoint: the winding number of every
layer's and head's Toeplitz symbol and the Fredholm index it gives.

Usage (from the repository root; the extension must be built):

    python scripts/fredholm.py CHECKPOINT_DIR [--out DIR]
    python scripts/fredholm.py --demo                 # models/tmm-tiny.json, untrained
    python scripts/fredholm.py --config tmm-cpu-small # any config, untrained

Prints a table (layer, head, tap, winding, index, min|phi|, max|phi|) and a
count of the indices, and writes ``fredholm.json`` (the config, the
convention, every row) and ``fredholm.png`` (the symbol curves, one panel per
layer) to ``--out`` (default ``CHECKPOINT_DIR/fredholm``, or
``results/fredholm-<config>`` without a checkpoint), each atomically
(temporary file, then os.replace).

Convention (tmm.analysis.fredholm): the mixer computes y = T x with
T[t, s] = w[t - s] (lower triangular, from the left); the symbol is
phi(z) = sum_k w_k z^(-k); index = winding(phi) = -(number of zeros of
sum_k w_k z^k inside the unit disk). A one-step shift has winding -1 and
index -1; a kernel dominated by its lag-0 tap has index 0. Rows flagged
"near 0" have a symbol that (nearly) vanishes on the circle: their winding
number is reported but not reliable.

An untrained model's vectors are Kaiming-normal (i.i.d. Gaussian taps): such
random polynomials have about half their zeros inside the disk, so expect
indices near -n/2 before training.
"""
import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

import tmm.models  # noqa: E402
from tmm.analysis import fredholm  # noqa: E402

CONVENTION = (
    "y = T x with T[t, s] = w[t - s] (lower triangular, multiplying from the left); "
    "phi(z) = sum_k w_k z^(-k) on |z| = 1; winding = phase change of phi(e^{i theta}) over theta in [0, 2 pi] / 2 pi; "
    "Fredholm index = -winding(sum_k w_k z^k) = +winding(phi). One-step shift: winding -1, index -1."
)


def write_atomic(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        fredholm._chmod_default(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def format_table(results):
    lines = [
        f"{'layer':>5} {'param':>7} {'head':>4} {'tap':>3} {'winding':>7} {'index':>5} "
        f"{'min|phi|':>10} {'max|phi|':>10}  note"
    ]
    for r in results:
        if "skipped" in r:
            dash = "-"
            lines.append(
                f"{r['layer']:>5} {r['param']:>7} {dash:>4} {dash:>3} {dash:>7} {dash:>5} {dash:>10} {dash:>10}  "
                f"{r['skipped']}"
            )
            continue
        note = "near 0: winding unreliable" if r["near_zero"] else ""
        lines.append(
            f"{r['layer']:>5} {r['param']:>7} {r['head']:>4} {r['tap']:>3} {r['winding']:>7} {r['index']:>5} "
            f"{r['min_modulus']:>10.3e} {r['max_modulus']:>10.3e}  {note}"
        )
    return "\n".join(lines)


def summarise(results):
    rows = [r for r in results if "skipped" not in r]
    counts = collections.Counter(r["index"] for r in rows if not r["near_zero"])
    return {
        "vectors": len(rows),
        "near_zero": sum(r["near_zero"] for r in rows),
        "skipped_layers": sum("skipped" in r for r in results),
        "index_counts": {str(k): v for k, v in sorted(counts.items())},
        "shift_like": counts.get(-1, 0),
        "invertible_like": counts.get(0, 0),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("checkpoint", nargs="?", help="a checkpoint directory (config.json + model.safetensors)")
    ap.add_argument("--demo", action="store_true", help="analyse models/tmm-tiny.json, untrained")
    ap.add_argument("--config", help="analyse this config (a name in models/ or a JSON path), untrained")
    ap.add_argument("--seed", type=int, default=0, help="init seed with --demo/--config (default 0)")
    ap.add_argument("--out", help="output folder (default CHECKPOINT/fredholm or results/fredholm-<config>)")
    ap.add_argument("--points", type=int, default=None, help="samples on the circle (default max(4096, 8 n), refined)")
    ap.add_argument(
        "--rel-tol", type=float, default=fredholm.DEFAULT_REL_TOL,
        help="flag near_zero when min|phi| <= rel_tol * max|phi| (default %(default)g)",
    )
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    args = ap.parse_args(argv)

    sources = sum(x is not None and x is not False for x in (args.checkpoint, args.config, args.demo or None))
    if sources != 1:
        ap.error("give exactly one of CHECKPOINT_DIR, --demo, --config")
    torch.set_num_threads(min(torch.get_num_threads(), 4))

    if args.checkpoint is not None:
        model = tmm.models.load(args.checkpoint)
        source = {"checkpoint": os.path.abspath(args.checkpoint)}
        out = Path(args.out) if args.out else Path(args.checkpoint) / "fredholm"
        label = os.path.basename(os.path.normpath(args.checkpoint))
    else:
        config = "tmm-tiny" if args.demo else args.config
        torch.manual_seed(args.seed)
        model = tmm.models.build(config)
        source = {"config": config, "untrained": True, "seed": args.seed}
        label = "config" if config.lstrip().startswith("{") else Path(config).stem
        out = Path(args.out) if args.out else REPO_ROOT / "results" / f"fredholm-{label}"

    cfg = model.config
    if cfg.get("arch") != "tmm":
        sys.exit(f"fredholm.py: only TMM models have explicit Toeplitz vectors (this is '{cfg.get('arch')}')")
    results = fredholm.analyse_model(model, points=args.points, rel_tol=args.rel_tol)
    summary = summarise(results)

    print(f"# {label}: {cfg.get('n_layers')} layers, heads={cfg.get('heads')}, kernel={cfg.get('kernel')}, "
          f"mixer={cfg.get('mixer')}, n={cfg.get('max_len')}")
    print(f"# convention: {CONVENTION}")
    print(format_table(results))
    print(f"# index counts (excluding near-zero symbols): {summary['index_counts']}; "
          f"near-zero: {summary['near_zero']} of {summary['vectors']}")

    payload = {
        "source": source,
        "config": cfg,
        "convention": CONVENTION,
        "rel_tol": args.rel_tol,
        "summary": summary,
        "results": fredholm.to_jsonable(results),
    }
    json_path = out / "fredholm.json"
    write_atomic(json_path, json.dumps(payload, indent=1) + "\n")
    print(f"wrote {json_path}")
    if not args.no_plot and summary["vectors"]:
        png = out / "fredholm.png"
        fredholm.plot_symbols(results, png, title=f"{label}: Toeplitz symbols (index per head)")
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
