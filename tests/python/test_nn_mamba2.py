"""tmm.nn.Mamba2Mixer against the C++ Mamba2 holding the same parameters: a
plain-Python LM of the zoo's Mamba2 layout around the drop-in mixer, forward,
backward and decoding, float32 and float64."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import tmm
from tmm.nn import Mamba2Mixer, RMSNorm
from tmm.testing import rel_err

PARITY = {torch.float32: 1e-6, torch.float64: 1e-12}
VARIANTS = {
    "default": {},
    "groups2_chunk3": {"ngroups": 2, "chunk_size": 3, "d_conv": 3},
    "headdim8_state5": {"headdim": 8, "d_state": 5, "expand": 1, "tie_embeddings": True},
}


class PyMamba2LM(nn.Module):
    """The zoo's Mamba2 layout (no MLP): x += mixer(RMSNorm(x)); final RMSNorm; head."""

    def __init__(self, config, dtype):
        super().__init__()
        d, self.tied = config["d_model"], config.get("tie_embeddings", False)
        self.embed = nn.Embedding(config["vocab_size"], d, dtype=dtype)
        self.blocks = nn.ModuleList()
        for _ in range(config["n_layers"]):
            block = nn.Module()
            block.norm = RMSNorm(d, eps=1e-5, dtype=dtype)
            block.mixer = Mamba2Mixer.from_config(config, dtype=dtype)
            self.blocks.append(block)
        self.norm = RMSNorm(d, eps=1e-5, dtype=dtype)
        self.head = None if self.tied else nn.Linear(d, config["vocab_size"], bias=False, dtype=dtype)

    def forward(self, ids, states=None):
        h = self.embed(ids)
        for i, b in enumerate(self.blocks):
            h = h + (b.mixer(b.norm(h)) if states is None else b.mixer.step(b.norm(h), states[i]))
        h = self.norm(h)
        return F.linear(h, self.embed.weight) if self.tied else self.head(h)


def cpp_and_python(variant, dtype):
    torch.manual_seed(0)
    config = {"arch": "mamba2", "vocab_size": 19, "d_model": 16, "n_layers": 2, "max_len": 32, "d_state": 4,
              "headdim": 8, "chunk_size": 4, **VARIANTS[variant]}
    cpp = tmm.models.build(config).to(dtype)
    py = PyMamba2LM(cpp.config, dtype)
    py.load_state_dict(cpp.state_dict())
    return cpp, py


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_mamba2_parity_forward_backward(variant, dtype):
    cpp, py = cpp_and_python(variant, dtype)
    assert sorted(py.state_dict()) == sorted(cpp.state_dict())
    ids = torch.randint(0, 19, (3, 13))
    out_c, out_p = cpp(ids), py(ids)
    assert rel_err(out_p, out_c) <= PARITY[dtype]
    r = torch.randn(out_c.shape, dtype=dtype)
    (out_c * r).sum().backward()
    (out_p * r).sum().backward()
    params = dict(py.named_parameters())
    for name, p in cpp.named_parameters():
        assert rel_err(params[name].grad, p.grad) <= PARITY[dtype], name


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_mamba2_step_matches_cpp_decoder(variant):
    cpp, py = cpp_and_python(variant, torch.float64)
    cpp.eval(), py.eval()
    ids = torch.randint(0, 19, (2, 11))
    state_c = cpp.start_decoding(2, 11)
    states = [b.mixer.start_decoding(2) for b in py.blocks]
    got_c, got_p = [cpp.decode(state_c, ids[:, :5])], [py(ids[:, :5], states)]
    for t in range(5, 11):
        got_c.append(cpp.decode(state_c, ids[:, t:t + 1]))
        got_p.append(py(ids[:, t:t + 1], states))
    assert rel_err(torch.cat(got_p, 1), torch.cat(got_c, 1)) <= 1e-12
    with torch.no_grad():
        assert rel_err(torch.cat(got_p, 1), py(ids)) <= 1e-12


def test_mamba2_mixer_alone():
    m = Mamba2Mixer(16, d_state=4, headdim=8, ngroups=2, chunk_size=5, dtype=torch.float64)
    assert {n for n, _ in m.named_parameters()} == {"in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias",
                                                    "A_log", "D", "norm.weight", "out_proj.weight"}
    x = torch.randn(2, 12, 16, dtype=torch.float64)
    y = m(x)
    assert rel_err(m(torch.cat([x, torch.randn(2, 4, 16, dtype=torch.float64)], 1))[:, :12], y) <= 1e-12  # causal
    assert m(x[:, :0]).shape == (2, 0, 16)
    assert (m.D == 1).all() and (-torch.exp(m.A_log) <= -1).all() and (-torch.exp(m.A_log) >= -16).all()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    assert rel_err(compiled(x), y) <= 1e-12
    with pytest.raises(ValueError, match='"headdim" must divide d_inner'):
        Mamba2Mixer(16, headdim=5)
    with pytest.raises(ValueError, match='"ngroups" must divide'):
        Mamba2Mixer(16, headdim=8, ngroups=3)
    with pytest.raises(ValueError, match="one token at a time"):
        state = m.start_decoding(2)
        m.step(x[:, :3], state)
        m.step(x[:, 3:5], state)
