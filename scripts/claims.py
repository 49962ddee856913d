#!/usr/bin/env python3
"""The paper's claims, tested: thin command line over tmm.experiments.claims
(``--scale small`` is the smoke run; see docs/experiments.md)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tmm.experiments.claims.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
