#!/usr/bin/env bash
# Sets up everything (system packages, Python environment, build) and runs
# the main job: the operator benchmark on a small default (about 2 minutes on
# 2 cores). Extra arguments go to scripts/bench_ops.py.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
setup_all
cd "$REPO"
"$PYTHON" scripts/bench_ops.py --quick "$@"
