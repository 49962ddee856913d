#!/usr/bin/env bash
# Sets up everything (system packages, Python environment, build) and runs
# the main job: the claims suite's copy test (claim 2, information
# retention) at n = 128 tokens written twice, where a model's state has to
# hold the input: TMM (4 heads and flat), Transformer, Hyena, Mamba2, frozen
# TMMs and the width pair, 200 steps each with the same batches (about 3
# minutes on 2 idle cores, under 10 loaded). It writes
# results/claims-quick/ (claims.md with the verdicts, tables, plots, JSON);
# run again it reads the finished runs instead of retraining (delete the
# folder or give --out to start over). Extra arguments go to
# scripts/claims.py (e.g. --only copy,mqar); the whole suite is
# scripts/claims.py (docs/experiments.md), the old quick comparison
# scripts/compare.py.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
setup_all
cd "$REPO"
"$PYTHON" scripts/claims.py --scale quick --only copy "$@"
