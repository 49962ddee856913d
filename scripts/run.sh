#!/usr/bin/env bash
# Sets up everything (system packages, Python environment, build) and runs
# the main job: the baseline comparison on the copy task (TMM, Transformer,
# Hyena and Mamba2 at ~1-1.6M parameters, under 10 minutes on 2 cores),
# writing results/<run>/ (metrics.jsonl, summary.md, plots). Extra arguments
# go to scripts/compare.py (e.g. --task mqar); the operator benchmark is
# scripts/bench_ops.py --quick.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
setup_all
cd "$REPO"
"$PYTHON" scripts/compare.py "$@"
