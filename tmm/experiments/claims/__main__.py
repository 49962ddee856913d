"""``python -m tmm.experiments.claims``: the command line of the claims suite
(scripts/claims.py is the same)."""
import sys

from .cli import main

sys.exit(main())
