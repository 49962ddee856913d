"""The zoo's Hyena (tmm.nn.HyenaOperator in HyenaBlocks) against the C++
Hyena computing with the same tensors: forward, backward and decoding,
float32 and float64; the operator alone."""
import pytest
import torch

import tmm
from tmm.nn import HyenaOperator
from tmm.testing import rel_err

from cpp_twin import CppTwin, nonzero_biases

PARITY = {torch.float32: 1e-6, torch.float64: 1e-12}
VARIANTS = {
    "default": {},
    "no_modulation_wide_emb": {"modulate": False, "emb_dim": 5, "filter_order": 8},
    "short1_tied": {"short_filter": 1, "tie_embeddings": True, "filter_sin_freq": 2.0},
    "safari_lm": {"init": "safari", "final_norm": True, "tie_embeddings": True},
    "kaiming_final_norm": {"init": "kaiming", "final_norm": True},
}


def cpp_and_python(variant, dtype):
    torch.manual_seed(0)
    config = {"arch": "hyena", "vocab_size": 19, "d_model": 12, "n_layers": 2, "max_len": 16, "filter_order": 16,
              "ffn_mult": 2, **VARIANTS[variant]}
    py = nonzero_biases(tmm.models.build(config).to(dtype))
    assert (py.final_norm_module() is None) == (not py.config["final_norm"])
    return CppTwin(py), py


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_hyena_parity_forward_backward(variant, dtype):
    cpp, py = cpp_and_python(variant, dtype)
    assert set(py.state_dict()) == set(cpp.tensors())
    ids = torch.randint(0, 19, (3, 13))
    out_c, out_p = cpp(ids, return_hidden=True), py(ids, return_hidden=True)
    assert torch.equal(out_p.hidden, out_c.hidden) and torch.equal(out_p.logits, out_c.logits)
    r = torch.randn(out_c.logits.shape, dtype=dtype)
    (out_c.logits * r).sum().backward()
    (out_p.logits * r).sum().backward()
    grads_c = cpp.grads()
    for name, p in py.named_parameters():
        assert torch.equal(p.grad, grads_c[name]), name


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_hyena_step_matches_cpp_decoder(variant):
    _, py = cpp_and_python(variant, torch.float64)
    py.eval()
    ids = torch.randint(0, 19, (2, 12))
    state_c, states = py.start_decoding(2, 12, "cached"), tmm.nn.LanguageModel.start_decoding(py, 2, 12)
    got_c, got_p = [py.decode(state_c, ids[:, :4])], [py.step(ids[:, :4], states)]
    for t in range(4, 12):
        got_c.append(py.decode(state_c, ids[:, t:t + 1]))
        got_p.append(py.step(ids[:, t:t + 1], states))
    assert rel_err(torch.cat(got_p, 1), torch.cat(got_c, 1)) <= 1e-12
    with torch.no_grad():
        assert rel_err(torch.cat(got_p, 1), py(ids)) <= 1e-12


def test_hyena_operator_alone():
    op = HyenaOperator(8, 20, filter_order=8, dtype=torch.float64)
    names = {n for n, _ in op.named_parameters()}
    assert names == {"in_proj.weight", "in_proj.bias", "short_filter.weight", "short_filter.bias", "filter.freq",
                     "filter.D", "filter.mlp.0.weight", "filter.mlp.0.bias", "filter.mlp.1.weight",
                     "filter.mlp.1.bias", "filter.mlp.2.weight", "filter.mlp.2.bias", "filter.mlp.3.weight",
                     "out_proj.weight", "out_proj.bias"}
    x = torch.randn(2, 9, 8, dtype=torch.float64, requires_grad=True)
    y = op(x)
    assert y.shape == x.shape and op(x[:, :0]).shape == (2, 0, 8)
    y2 = op(torch.cat([x, torch.randn(2, 3, 8, dtype=torch.float64)], 1))[:, :9]
    assert rel_err(y2, y) <= 1e-12  # causal
    compiled = torch.compile(op, fullgraph=True, backend="aot_eager")
    assert rel_err(compiled(x), y) <= 1e-12
    with pytest.raises(ValueError, match="only order=2"):
        HyenaOperator(8, 20, order=3)
    with pytest.raises(ValueError, match='"emb_dim" must be odd'):
        HyenaOperator(8, 20, emb_dim=4)
    with pytest.raises(ValueError, match="exceeds l_max"):
        op(torch.randn(1, 21, 8, dtype=torch.float64))


def test_hyena_init_modes_and_errors():
    with pytest.raises(ValueError, match='"init" must be torch, safari or kaiming, got "llama"'):
        HyenaOperator(8, 20, init="llama")
    with pytest.raises(RuntimeError, match='"init" must be torch, safari or kaiming, got "scaled"'):
        tmm.models.build({"arch": "hyena", "vocab_size": 11, "d_model": 8, "n_layers": 1, "max_len": 16,
                          "init": "scaled"})
    op = HyenaOperator(16, 32, init="safari", n_layers=8)
    assert torch.equal(op.in_proj.bias, torch.zeros(48)) and torch.equal(op.filter.mlp[0].bias, torch.zeros(64))
