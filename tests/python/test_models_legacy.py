"""Checkpoints written by revision e2fc626, whose defaults differ from the
current ones (the Transformer's init and keys, TMM's init, frozen bias,
expanded dropout), still load and give the logits they gave then. They were written by
tests/python/data/main-e2fc626/make_checkpoints.py with that commit's tmm on
PYTHONPATH: tiny models, every tensor perturbed away from its init."""
from pathlib import Path

import pytest
import torch

import tmm.models
from tmm.io.safetensors import load_file

DATA = Path(__file__).resolve().parent / "data" / "main-e2fc626"
NAMES = sorted(p.name for p in DATA.iterdir() if (p / "config.json").is_file())

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_architecture_is_kept():
    assert {"tmm-heads", "tmm-expanded", "tmm-frozen", "tmm-masked", "transformer", "hyena", "mamba2"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_loads_with_its_former_logits(name):
    model = tmm.models.load(DATA / name).eval()
    expected, _ = load_file(str(DATA / name / "expected.safetensors"))
    with torch.no_grad():
        got = model(expected["input_ids"])
    err = ((got - expected["logits"]).abs().max() / expected["logits"].abs().max()).item()
    assert err <= 1e-5, f"{name}: logits moved by {err:.3g} (relative)"


def test_old_expanded_checkpoint_keeps_no_inner_dropout():
    """The expanded mixer's dropout (0.1 by default now) did not exist: an old
    checkpoint resumes training as it was trained, without it."""
    model = tmm.models.load(DATA / "tmm-expanded")
    assert model.config["mixer_dropout"] == 0.0
    model.train()
    ids = torch.arange(12).reshape(1, 12)
    with torch.no_grad():
        assert torch.equal(model(ids), model(ids))


def test_old_frozen_checkpoint_freezes_the_bias_now():
    """The bias was a trainable parameter; it loads into the frozen buffer."""
    model = tmm.models.load(DATA / "tmm-frozen")
    names = {n for n, _ in model.named_parameters()}
    assert "blocks.0.mixer.bias" not in names and "blocks.0.mixer.weight" not in names
    assert "blocks.0.mixer.bias" in model.state_dict()
