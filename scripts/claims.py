#!/usr/bin/env python3
"""The paper's claims, tested: thin command line over tmm.experiments.claims
(``--scale small`` is the smoke run; see docs/experiments.md)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tmm.experiments.claims.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(results_root=REPO / "results", repo=REPO))
