"""The claims suite's verdict code on real training runs whose answer is
known: copy at a small n, where TMM and the Transformer learn within a few
hundred steps and Hyena and Mamba2 stay near chance (measured across seeds
when the setting was chosen: docs/experiments.md, "A verdict test on real
runs"). The runs go through the suite's own jobs (Suite.compare) and the
copy claim's own rules (copy_claim.verdicts); a broken rule, or a change
that stops TMM or the Transformer from learning, fails it. The same
results with the roles swapped must give the opposite verdicts, so the
test also fails on a rule that says "consistent" whatever it is given."""
import dataclasses

import pytest

from lab.experiments.claims import copy_claim
from lab.experiments.claims.models import copy_models
from lab.experiments.claims.report import CONSISTENT, NOT_CONSISTENT
from lab.experiments.claims.results import over_seeds
from lab.experiments.claims.scales import SCALES
from lab.experiments.claims.suite import Suite

# The known-answer setting: copy n tokens out of VOCAB, d, layers, steps of batch 8 at lr, seeds.
N, VOCAB, D, LAYERS, STEPS, LR, SEEDS = 16, 16, 64, 2, 250, 3e-3, (0, 1)
MATCHES = f"n={N}: TMM matches the Transformer's training efficiency"
STRUGGLE = f"n={N}: Mamba2 and Hyena struggle (both Hyenas)"


@pytest.fixture(scope="module")
def copy_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("known-answer")
    suite = Suite(root, dataclasses.replace(SCALES["small"], batch_size=8), threads=1, progress=False,
                  say=lambda m: None)
    specs = copy_models(D, LAYERS, names=("tmm", "transformer", "hyena", "hyena-ar", "mamba2"))
    jobs = [suite.compare(f"copy/n{N}/seed{seed}", specs, task="copy", task_options={"n": N, "vocab": VOCAB},
                          steps=STEPS, seed=seed, lr=LR) for seed in SEEDS]
    return over_seeds(jobs)


def verdicts(pooled):
    return {v.claim: v for v in copy_claim.verdicts(pooled, N)}


@pytest.mark.timeout(180)
def test_copy_verdicts_on_real_runs(copy_runs):
    got = verdicts(copy_runs)
    assert got[MATCHES].verdict == CONSISTENT, got[MATCHES].evidence
    assert got[STRUGGLE].verdict == CONSISTENT, got[STRUGGLE].evidence
    assert copy_runs["tmm"].reached == len(SEEDS) and copy_runs["transformer"].reached == len(SEEDS)
    for label in ("hyena", "hyena-ar", "mamba2"):
        assert copy_runs[label].reached == 0, label


def test_the_same_runs_with_roles_swapped_fail(copy_runs):
    # Hyena in TMM's place: it does not match the Transformer, and the learners do not "struggle"
    swapped = {"tmm": copy_runs["hyena"], "transformer": copy_runs["transformer"]}
    assert verdicts(swapped)[MATCHES].verdict == NOT_CONSISTENT
    learners = {"tmm": copy_runs["tmm"], "hyena": copy_runs["transformer"], "hyena-ar": copy_runs["tmm"],
                "mamba2": copy_runs["tmm"]}
    assert verdicts(learners)[STRUGGLE].verdict == NOT_CONSISTENT
