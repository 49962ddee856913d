"""The Python half of scripts/gpu_check.sh (lab/bench/gpu_check/, its tests
section lab/bench/gpu_check/pytest_run.py; docs/cuda.md, "The GPU check"):

    gpu_check.py --device cuda --out DIR [--deadline EPOCH] [--lib LIBTMM_TORCH]   the checks
    gpu_check.py --device cpu --out DIR --budget 60                                 the same, CPU mode
    gpu_check.py --sanitize-case --device cuda                                      the compute-sanitizer case
    gpu_check.py --report --out DIR                                                 verdict, table.md, exit status

The checks write DIR/gpu_check.json as they go. --lib loads libtmm_torch by
path where the package's native module tmm._C could not be built (then only
the op-level checks run). Exit status: 0 passed, 1 a kernel is wrong, 2 could
not run, 3 partially run.
"""
import argparse
import functools
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before torch: the profiler's warnings on a CPU-only machine

from lab import REPO  # noqa: E402
from lab.bench import gpu_check  # noqa: E402
from lab.bench.gpu_check.pytest_run import CPU_MODE_TESTS, DEFAULT_TESTS, run_pytest  # noqa: E402
from lab.bench.gpu_check.summary import EXIT_NOT_RUN  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/tmm_gpu_check"))
    p.add_argument("--deadline", type=float, default=None, help="seconds since the epoch to finish by")
    p.add_argument("--budget", type=float, default=None, help="seconds from now to finish in (instead of --deadline)")
    p.add_argument("--lib", default=None, help="libtmm_torch.so to load where tmm._C is not built")
    p.add_argument("--tests", nargs="+", default=None,
                   help="pytest targets of the tests section (files or node ids; default: cuda the whole "
                        "tests/python/test_causal_toeplitz.py, cpu a share of it)")
    p.add_argument("--only", default=",".join(gpu_check.SECTIONS),
                   help=f"sections to run, of {','.join(gpu_check.SECTIONS)}")
    p.add_argument("--dtypes", default="", help="benchmark dtypes (default: cuda bfloat16,float32; cpu float32)")
    p.add_argument("--sanitize-case", action="store_true", help="only the small case compute-sanitizer watches")
    p.add_argument("--report", action="store_true", help="merge the run's files, print the verdict and tables")
    args = p.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s]
    bad = [s for s in args.only if s not in gpu_check.SECTIONS]
    if bad:
        p.error(f"--only: unknown sections {bad}; expected some of {', '.join(gpu_check.SECTIONS)}")
    if args.deadline is None:
        args.deadline = time.time() + (args.budget if args.budget is not None else 360)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if args.tests is None:
        args.tests = list(DEFAULT_TESTS if args.device == "cuda" else CPU_MODE_TESTS)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if args.report:
        return gpu_check.report(out)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: --device cuda but torch.cuda is not available", file=sys.stderr)
        return EXIT_NOT_RUN
    try:
        if args.sanitize_case:
            return gpu_check.run_sanitize_case(args.device, args.lib)
        run_tests = functools.partial(run_pytest, args.tests, args.device, REPO)
        status = gpu_check.run(args.device, out, args.deadline, args.only, args.lib, args.dtypes, run_tests, REPO)
    except SystemExit as e:  # the native library is missing: could not run, not "wrong"
        print(e, file=sys.stderr)
        return EXIT_NOT_RUN
    print(f"gpu_check.py: exit status {status}; results in {out / 'gpu_check.json'}")
    return status

