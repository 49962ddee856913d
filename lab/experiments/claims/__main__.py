"""``python -m lab.experiments.claims``: the command line of the claims suite
(scripts/claims.py is the same), writing under the working directory's
results/; every job records the git revision of the lab's checkout (lab.REPO)."""
import sys

from .cli import main

sys.exit(main())
