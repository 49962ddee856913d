"""The lab: the experiments and the claims suite (lab.experiments), the
benchmarks and the GPU check (lab.bench), the analyses of trained models
(lab.analysis), and their command lines (lab.cli). It uses tmm and lives
beside it in the repository; the scripts in scripts/ run it and nothing
installs it. What it measures and found: docs/experiments.md,
docs/benchmarks.md, docs/cuda.md.
"""
from pathlib import Path

__all__ = ["REPO"]

# The checkout: default output folders (results/, bench/results/) and the
# git revision a run records.
REPO = Path(__file__).resolve().parents[1]
