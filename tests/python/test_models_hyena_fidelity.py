"""Hyena's initialisation and final norm as its references build them
(docs/models.md, "Hyena: what each default follows"): the authors'
HyenaModel by default (torch's default init, no final norm), safari's LM on
request (GPT-2 style init, ln_f); each measured as the empirical std of the
initialised tensors, within 5% of the reference value."""
import json
import math

import pytest
import torch

import tmm.models

pytestmark = pytest.mark.usefixtures("one_thread")

BASE = {"arch": "hyena", "vocab_size": 2048, "d_model": 64, "n_layers": 4, "max_len": 32}


def std_close(t, expected, what):
    got = t.double().std().item()
    assert abs(got / expected - 1) < 0.05, f"{what}: std {got:.4g}, the reference {expected:.4g}"


def uniform_std(fan_in):
    return 1 / math.sqrt(fan_in) / math.sqrt(3)  # U(-1/sqrt(fan_in), 1/sqrt(fan_in))


def test_default_is_the_authors_hyena_model():
    model = tmm.models.build(BASE)
    s = model.state_dict()
    assert model.config["init"] == "torch" and model.config["final_norm"] is False
    assert not any(k.startswith("final_norm") for k in s)
    std_close(s["embed.weight"], 1.0, "embedding")
    std_close(s["head.weight"], uniform_std(64), "head")
    std_close(s["blocks.0.mixer.in_proj.weight"], uniform_std(64), "in_proj")
    std_close(s["blocks.0.mixer.in_proj.bias"], uniform_std(64), "in_proj bias")
    std_close(s["blocks.0.ffn_out.weight"], uniform_std(256), "ffn_out")
    std_close(s["blocks.0.mixer.filter.mlp.1.weight"], uniform_std(64), "filter MLP")


def test_safari_init():
    """safari's _init_weights: every Linear (the filter MLP's too) and the
    embedding N(0, 0.02^2), biases zero; out_proj and fc2 (ffn_out)
    N(0, (0.02 / sqrt(2 n_layers))^2); with ln_f."""
    model = tmm.models.build(dict(BASE, init="safari", final_norm=True))
    s = model.state_dict()
    for name in ("embed.weight", "head.weight", "blocks.1.mixer.in_proj.weight", "blocks.1.ffn_in.weight",
                 "blocks.1.mixer.filter.mlp.1.weight"):
        std_close(s[name], 0.02, name)
    for name in ("blocks.1.mixer.out_proj.weight", "blocks.1.ffn_out.weight"):
        std_close(s[name], 0.02 / math.sqrt(2 * 4), name)
    for name in ("blocks.1.mixer.in_proj.bias", "blocks.1.ffn_out.bias", "blocks.1.mixer.filter.mlp.0.bias"):
        assert torch.count_nonzero(s[name]) == 0, name
    assert torch.equal(s["final_norm.weight"], torch.ones(64))


def test_kaiming_keeps_the_former_init():
    s = tmm.models.build(dict(BASE, init="kaiming")).state_dict()
    std_close(s["blocks.0.mixer.in_proj.weight"], math.sqrt(2 / 64), "kaiming in_proj")
    std_close(s["head.weight"], math.sqrt(2 / 64), "kaiming head")


def test_final_norm_is_applied():
    torch.manual_seed(0)
    model = tmm.models.build(dict(BASE, final_norm=True, vocab_size=40)).eval()
    ids = torch.randint(0, 40, (2, 9))
    with torch.no_grad():
        hidden = model(ids, return_hidden=True).hidden
    # LayerNorm with weight 1 and bias 0: each position's features have mean 0, variance 1.
    assert torch.allclose(hidden.mean(-1), torch.zeros(2, 9), atol=1e-5)
    assert torch.allclose(hidden.var(-1, unbiased=False), torch.ones(2, 9), atol=1e-3)


def test_assoc_recall_config_has_safaris_values():
    c = json.loads(tmm.models.config_path("hyena-assoc-recall").read_text())
    assert (c["emb_dim"], c["filter_order"], c["filter_sin_freq"]) == (5, 64, 10.0)
    assert (c["d_model"], c["n_layers"], c["vocab_size"]) == (64, 2, 30)
    assert c["init"] == "safari" and c["final_norm"] and c["tie_embeddings"]
