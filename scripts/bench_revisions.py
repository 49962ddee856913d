#!/usr/bin/env python3
"""The zoo's speed under two checkouts, side by side: thin command line over lab.cli.bench_revisions (usage there, or --help)."""
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # lab/; an installed tmm comes first, else the checkout's in-place build

from lab.cli.bench_revisions import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
