"""A user's own mixer through the comparison driver (scripts/compare.py
--mixer): built by import path into the zoo's skeleton
(tmm.nn.SequenceModel), trained beside a zoo model on the same batches."""
import json
import sys
from pathlib import Path

import pytest

from lab.experiments.compare import CompareSettings, run_comparison
from lab.experiments.errors import SettingsError

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "models" / "tmm-tiny.json")

MIXER_SOURCE = '''
import torch
from torch import nn


class CausalMean(nn.Module):
    def __init__(self, d_model, seq_len, scale=1.0):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.scale = scale

    def forward(self, x):
        steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
        return self.scale * self.proj(x.cumsum(1) / steps)
'''


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg" / "user_mixers_for_tmm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(MIXER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    yield "user_mixers_for_tmm.CausalMean"
    sys.modules.pop("user_mixers_for_tmm", None)


@pytest.mark.timeout(120)
def test_compare_trains_a_user_mixer_beside_a_zoo_model(tmp_path, user_package, restore_threads):
    out = tmp_path / "run"
    settings = CompareSettings(configs=[TINY], mixer=user_package, mixer_kwargs='{"scale": 0.5}',
                               mixer_inputs="seq_len", mixer_base=TINY,
                               n=4, steps=3, batch_size=2, eval_every=3, eval_batches=1, threads=1, out=str(out),
                               no_progress=True)
    result = run_comparison(settings.checked())
    assert result.exit_code == 0
    config = json.loads((out / "config.json").read_text())
    labels = [m["label"] for m in config["models"]]
    assert labels == ["tmm", "CausalMean"]
    mixer = config["models"][1]["config"]
    assert mixer["arch"] == "mixer" and mixer["mixer"] == user_package and mixer["mixer_kwargs"] == {"scale": 0.5}
    assert mixer["mixer_inputs"] == ["seq_len"]
    assert mixer["d_model"] == 32 and mixer["n_layers"] == 2 and mixer["max_len"] == 8
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["arch"] == "CausalMean"] == [0, 3]
    assert all(s["status"] == "done" for s in result.summaries)


def test_mixer_settings_errors(tmp_path, user_package):
    with pytest.raises(SettingsError, match="--mixer-kwargs needs --mixer"):
        CompareSettings(mixer_kwargs="{}").checked()
    with pytest.raises(SettingsError, match="--mixer-inputs needs --mixer"):
        CompareSettings(mixer_inputs="seq_len").checked()
    with pytest.raises(SettingsError, match="--checkpoint-every is not supported with --mixer"):
        CompareSettings(mixer=user_package, checkpoint_every=5).checked()
    with pytest.raises(SettingsError, match="--mixer-kwargs must be a JSON object"):
        CompareSettings(mixer=user_package, mixer_kwargs="[1]").checked()
    bad = CompareSettings(configs=[TINY], mixer="user_mixers_for_tmm.Nope", n=4, steps=1, threads=1,
                          out=str(tmp_path / "x"), no_progress=True)
    with pytest.raises(SettingsError, match="--mixer: .*has no attribute 'Nope'"):
        run_comparison(bad.checked())
    bad_inputs = CompareSettings(configs=[TINY], mixer=user_package, mixer_inputs="seq_len,length", n=4, steps=1,
                                 threads=1, out=str(tmp_path / "y"), no_progress=True)
    with pytest.raises(SettingsError, match=r"--mixer-inputs: mixer_inputs: got \['seq_len', 'length'\]: 'length' "):
        run_comparison(bad_inputs.checked())


def test_script_has_the_mixer_flags():
    from lab.cli import compare

    s = compare.parse_args(["--mixer", "a.B", "--mixer-kwargs", '{"k": 1}', "--mixer-inputs", "l_max,layer_idx",
                           "--mixer-base", "hyena-tiny", "--steps", "1"])
    assert (s.mixer, s.mixer_kwargs, s.mixer_inputs, s.mixer_base) == ("a.B", '{"k": 1}', "l_max,layer_idx",
                                                                         "hyena-tiny")


def test_skeleton_takes_final_norm_and_a_tmm_init():
    from lab.experiments.model_configs import build_model, mixer_config

    base = {"arch": "tmm", "vocab_size": 11, "d_model": 8, "n_layers": 2, "max_len": 16, "final_norm": True,
            "init": "scaled"}
    cfg = mixer_config("torch.nn.Identity", {}, base)
    assert cfg["final_norm"] is True and cfg["init"] == "scaled"
    model = build_model(cfg)
    assert model.final_norm is not None and model.config["init"] == "scaled"
    hyena = mixer_config("torch.nn.Identity", {}, {**base, "arch": "hyena", "init": "safari"})
    assert "init" not in hyena  # a Hyena's init names its own layers, not the skeleton's
