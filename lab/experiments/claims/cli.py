"""The claims suite's command line: flags are the fields of ClaimsSettings."""
from __future__ import annotations

import argparse
import sys

from ... import REPO
from ..errors import SettingsError
from . import CLAIMS, SCALES, STEP_TIME, ClaimsSettings, run_claims

__all__ = ["parser", "main"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="claims", description=(
        "Run the experiments that test the paper's claims and write claims.md (tables, verdicts) and PNG plots. "
        "Interrupted runs resume where they stopped; finished ones are read, not retrained."))
    p.add_argument("--scale", default="default", choices=list(SCALES),
                   help="small: 2-3 minute smoke run; quick: one seed, shorter (its copy claim is scripts/run.sh); "
                        "default: about 91 hours on a 2-core CPU (--estimate times it per claim); paper: the authors' "
                        "sizes (for --device cuda)")
    p.add_argument("--only", help=f"comma-separated claims: {', '.join(list(CLAIMS) + [STEP_TIME])} (default: all "
                                  f"but {STEP_TIME})")
    p.add_argument("--out", help="the suite's folder (default results/claims-<scale>/)")
    p.add_argument("--archive", help="also keep each finished job's small files (settings, summary, metrics; no "
                                     "checkpoints) here, and read finished jobs from here instead of training them "
                                     "(e.g. docs/results/claims-default: the suite then runs in parts on any machine)")
    p.add_argument("--any-machine", action="store_true",
                   help="run only the jobs any machine may run (with --archive): not those whose checkpoints a later "
                        "claim reads, nor the claims that read them (retention, in-context, operator-index); a run "
                        "without the flag does those later, on one machine")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, help="torch threads (default: 1 at --scale small, else all CPUs)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (jobs, tokens, FLOPs) and exit")
    p.add_argument("--estimate", action=argparse.BooleanOptionalAction, default=None,
                   help="time a few steps of every model first and print the estimated cost (default: with "
                        "--scale paper --device cuda)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the compare jobs' autocast (float16 with a GradScaler; docs/training.md)")
    p.add_argument("--compile", nargs="?", const="inductor", default=False, metavar="BACKEND",
                   help="torch.compile the compare jobs' forward")
    return p


def main(argv=None, *, results_root="results", repo=REPO) -> int:
    """The command line; ``results_root`` and ``repo`` as run_claims'."""
    args = parser().parse_args(argv)
    try:
        result = run_claims(ClaimsSettings(**vars(args)), results_root=results_root, repo=repo)
    except SettingsError as e:
        print(f"claims: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("claims: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    if result.markdown:
        print(result.markdown)
        print(f"claims: wrote {result.out / 'claims.md'}", file=sys.stderr)
    return 0
