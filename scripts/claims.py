#!/usr/bin/env python3
"""The paper's claims, tested: thin command line over lab.experiments.claims
(``--scale small`` is the smoke run; see docs/experiments.md)."""
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # lab/; an installed tmm comes first, else the checkout's in-place build

from lab import REPO  # noqa: E402
from lab.experiments.claims.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(results_root=REPO / "results", repo=REPO))
