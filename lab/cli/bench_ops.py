"""Operator benchmark: tmm.ops.causal_toeplitz against the torch.fft
composition and the dense masked matmul (the method: lab/bench/ops.py; the
targets: lab/bench/ops_report.py).

Usage (from the repository root; the extension must be built):

    python scripts/bench_ops.py                 # the issue's full grid
    python scripts/bench_ops.py --quick         # ~1-2 min on 2 cores (run.sh)
    python scripts/bench_ops.py --lengths 1024,4096 --gk "1,1 C,1" \\
        --impls ours,fft --modes fwdbwd --out /tmp/bench
    python scripts/bench_ops.py --device cuda --paths cufft,fused --dtype bf16
    python scripts/bench_ops.py --floor         # the CPU op vs the FFT floor
    python scripts/bench_ops.py --floor --tiny  # the same code in seconds (tests)

`--gk` takes "G,K" pairs separated by spaces; G may be written `C` for one
kernel per channel (G = channels, Hyena's layout). Defaults: L in {256, 1024,
4096, 16384}, B = 4, C = 512, (G, K) in {(1,1), (8,1), (C,1), (1,8)},
float32, 2 torch threads. `--quick`: L in {256, 1024, 4096}, B = 2, C = 128,
fewer repeats and a smaller per-cell time budget; any flag given explicitly
overrides the quick value. `--paths`: also ours with each kernel path forced
(tmm.ops.path: direct, fft on the CPU; cufft, fused on CUDA), one column each.

Outputs (in `--out`, default bench/results/ops-<timestamp>/, each written
atomically): results.json (rewritten after every cell), table.md, plot.png.

`--floor` is another benchmark (lab/bench/floor.py): per L, in one run, the
FFT pair (r2c + c2r over all B*C columns contiguous in time, FFTW at its best
size >= 2L - 1 through pyfftw when it imports, else scipy.fft), the
transposes B x L x C <-> B x C x L, the practical floor they make (fwd: a pair
and a transpose each way; fwd+bwd: 2.5 pairs and two each way), FFTW on the
op's own strided layout, tmm fwd and fwd+bwd, and the ratios to the floor
(targets fwd <= 1.15, fwd+bwd <= 1.25); then the smooth-L sweep (L =
1000..5000 step 100, forward, the transform-size rule against powers of two
only). Defaults: L in {256, 512, 1024, 1025, 2048, 2049, 4096, 4097, 8192,
16384, 32768, 65536}, B = 4, C = 512 (sweep C = 256), 2 threads. Flags:
--lengths, --batch, --channels, --threads, --repeats, --warmup,
--cell-budget, --sweep LO,HI,STEP or --no-sweep, --no-strided, --floor-lib
auto|fftw|scipy, --planner, --plan-limit, --tiny, --out, --no-plot. Output
folder default bench/results/floor-<timestamp>/. pyfftw: `pip install -r
requirements-bench.txt`.
"""
import os

# The profiler's Kineto backend logs an error on a CUDA build of torch without
# a GPU; keep it quiet (must be set before torch is imported).
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from lab import REPO  # noqa: E402
from lab.bench import ops  # noqa: E402

FULL = dict(lengths="256,1024,4096,16384", batch=4, channels=512, repeats=10, warmup=2, cell_budget=60.0)
QUICK = dict(lengths="256,1024,4096", batch=2, channels=128, repeats=5, warmup=1, cell_budget=8.0)
MODES = {"fwd": "fwd", "forward": "fwd", "f": "fwd", "fwdbwd": "fwdbwd", "fwd+bwd": "fwdbwd",
         "forward+backward": "fwdbwd", "fb": "fwdbwd", "bwd": "fwdbwd"}


def _split(text):
    return [t for t in str(text).replace(",", " ").split() if t]


def parse_gk(text, channels):
    pairs = []
    for item in text.replace(";", " ").split():
        parts = item.replace("x", ",").replace(":", ",").split(",")
        if len(parts) != 2:
            raise ValueError(f"bad --gk entry {item!r}: want G,K")
        pairs.append((channels if parts[0].strip().upper() == "C" else int(parts[0]), int(parts[1])))
    return pairs


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small grid for scripts/run.sh (~1-2 min on 2 cores)")
    p.add_argument("--lengths", default=None, help="sequence lengths L, e.g. 256,1024")
    p.add_argument("--batch", type=int, default=None, help="batch size B")
    p.add_argument("--channels", type=int, default=None, help="channels C")
    p.add_argument("--gk", default="1,1 8,1 C,1 1,8", help='(G,K) pairs, e.g. "1,1 8,1 C,1 1,8" (C = channels)')
    p.add_argument("--dtype", default="float32", choices=sorted(ops.DTYPES))
    p.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    p.add_argument("--repeats", type=int, default=None, help="timed calls per cell")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls per cell (at least 1 is made)")
    p.add_argument("--modes", default="fwd,fwdbwd", help="fwd, fwdbwd (or fwd+bwd)")
    p.add_argument("--impls", default="ours,fft,dense", help="ours, fft, dense")
    p.add_argument("--paths", default="", help="also ours with these kernel paths forced, e.g. cufft,fused")
    p.add_argument("--cell-budget", type=float, default=None, help="seconds one cell may take (default 60, quick 8)")
    p.add_argument("--dense-max-gib", type=float, default=2.0, help="skip dense when G*K*L*L*itemsize exceeds this")
    p.add_argument("--dense-max-len", type=int, default=4096, help="skip dense when L exceeds this")
    p.add_argument("--cpu-algorithm", default=None,
                   help="force ours' path for the whole run (tmm.ops.path: auto, direct, fft, cufft, fused)")
    p.add_argument("--deadline", type=float, default=None, help="seconds since the epoch: later cells are skipped")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory calls")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (default bench/results/ops-<timestamp>/)")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        args.lengths = [int(t) for t in _split(args.lengths)]
        args.gk = parse_gk(args.gk, args.channels)
    except ValueError as e:
        p.error(f"bad --lengths or --gk: {e}")
    try:
        args.modes = list(dict.fromkeys(MODES[m.lower()] for m in _split(args.modes)))
    except KeyError as e:
        p.error(f"unknown mode {e.args[0]!r} (use fwd, fwdbwd)")
    impls = [i.lower() for i in _split(args.impls)]
    for i in impls:
        if i not in ops.IMPL_NAMES:
            p.error(f"unknown impl {i!r} (use {', '.join(ops.IMPL_NAMES)})")
    args.impls = [i for i in ops.IMPL_NAMES if i in impls]  # fixed column order
    args.paths = _split(args.paths)
    if not args.lengths or not args.gk or not args.modes or not (args.impls or args.paths):
        p.error("empty --lengths, --gk, --modes or --impls")
    if args.repeats < 1 or args.warmup < 0:
        p.error("--repeats must be >= 1 and --warmup >= 0")
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but torch.cuda is not available")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / f"ops-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    return args


def config_of(args):
    """The library's config from parsed arguments (the flags only the command line has go to `extra`)."""
    fields = set(ops.OpsBenchConfig.__dataclass_fields__) - {"extra"}
    cfg = ops.OpsBenchConfig(**{k: v for k, v in vars(args).items() if k in fields})
    cfg.extra = {k: v for k, v in vars(args).items() if k not in fields}
    return cfg


def parse_floor_args(argv):
    from lab.bench import floor

    p = argparse.ArgumentParser(description="scripts/bench_ops.py --floor: the CPU op against the FFT floor")
    p.add_argument("--floor", action="store_true")
    p.add_argument("--tiny", action="store_true", help="tiny sizes, seconds: for the tests")
    p.add_argument("--lengths", default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--channels", type=int, default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--cell-budget", type=float, default=None)
    p.add_argument("--sweep", default=None, help="LO,HI,STEP of the smooth-L sweep (default 1000,5000,100)")
    p.add_argument("--sweep-batch", type=int, default=None)
    p.add_argument("--sweep-channels", type=int, default=None)
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--no-strided", action="store_true", help="skip FFTW on the op's own (strided) layout")
    p.add_argument("--sizes", default=None,
                   help="also time the forward at these forced transform sizes (calibration of the size model); "
                        "'default' for lab/bench/floor.py's list")
    p.add_argument("--floor-lib", default="auto", choices=["auto", "fftw", "scipy"])
    p.add_argument("--planner", default="FFTW_MEASURE", help="FFTW planner flag (FFTW_ESTIMATE, FFTW_MEASURE, ...)")
    p.add_argument("--plan-limit", type=float, default=20.0, help="seconds FFTW may plan one transform")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    cfg = floor.FloorConfig(floor_lib=args.floor_lib, planner=args.planner, plan_limit_s=args.plan_limit,
                            sweep=not args.no_sweep, strided=not args.no_strided)
    if args.tiny:
        cfg = dataclasses.replace(cfg, lengths=[16, 33], batch=1, channels=32, repeats=1, warmup=1, cell_budget=5.0,
                                  sweep_lo=20, sweep_hi=40, sweep_step=10, sweep_batch=1, sweep_channels=32,
                                  planner="FFTW_ESTIMATE")
    for key in ("batch", "channels", "repeats", "warmup", "cell_budget", "sweep_batch", "sweep_channels"):
        if getattr(args, key) is not None:
            setattr(cfg, key, getattr(args, key))
    if args.lengths:
        cfg.lengths = [int(t) for t in _split(args.lengths)]
    if args.sizes:
        cfg.sizes = floor.CALIBRATION_SIZES if args.sizes == "default" else [int(t) for t in _split(args.sizes)]
    if args.sweep:
        cfg.sweep_lo, cfg.sweep_hi, cfg.sweep_step = (int(t) for t in _split(args.sweep))
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / f"floor-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    return args, cfg


def floor_main(argv):
    from lab.bench import floor

    args, cfg = parse_floor_args(argv)
    torch.set_num_threads(args.threads)
    print(f"bench_ops --floor: B={cfg.batch} C={cfg.channels} L={cfg.lengths} threads={torch.get_num_threads()}",
          file=sys.stderr)
    out = floor.run(cfg, Path(args.out), do_plot=not args.no_plot, repo=REPO)
    print(out["table"])
    plot = "" if out["plot_note"] or args.no_plot else ", plot.png"
    print(f"\nresults: {args.out}/results.json, table.md{plot}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--floor" in argv:
        return floor_main(argv)
    args = parse_args(argv)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass  # only settable before the first inter-op work
    torch.set_num_threads(args.threads)
    cfg = config_of(args)
    print(f"bench_ops: B={cfg.batch} C={cfg.channels} L={cfg.lengths} (G,K)={cfg.gk} {cfg.dtype} {cfg.device} "
          f"threads={torch.get_num_threads()} repeats={cfg.repeats} warmup={cfg.warmup} "
          f"budget={cfg.cell_budget:g}s/cell", file=sys.stderr)
    out = ops.run(cfg, Path(args.out), plot=not args.no_plot, repo=REPO)
    print(out["checks"])
    print("\ntargets:")
    print(out["targets"])
    if out["plot_note"]:
        print(out["plot_note"])
    plot = "" if out["plot_note"] or args.no_plot else ", plot.png"
    print(f"results: {args.out}/results.json, table.md{plot} ({out['results']['wall_s']:.0f} s)\n")
    print(out["table"])
    if out["busy"]:
        print("\n" + out["busy"], end="")
    return 130 if out["results"].get("interrupted") else 0

