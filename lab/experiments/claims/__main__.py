"""``python -m lab.experiments.claims``: the command line of the claims suite
(scripts/claims.py is the same), its results and git revision those of the
working directory."""
import sys
from pathlib import Path

from .cli import main

sys.exit(main(repo=Path.cwd()))
