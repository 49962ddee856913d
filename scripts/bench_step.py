#!/usr/bin/env python3
"""Where a training step's time goes: thin command line over lab.cli.bench_step (usage there, or --help)."""
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # lab/; an installed tmm comes first, else the checkout's in-place build

from lab.cli.bench_step import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
