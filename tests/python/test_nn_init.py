"""The zoo models' values are the C++ models' (the same draws, bitwise), and
reset_parameters gives the C++ init again: for every tensor the empirical
std agrees within 5% (over >= 1000 elements), constants (zero biases, norm
weights) are the same constants. The rows of the init: Toeplitz fan-in N,
the masked mixer's U(+-1/sqrt(N)), the frozen buffers, the tied TMM
embedding N(0, 2/d), "scaled", and Hyena's "torch", "safari", "kaiming"."""
import json

import pytest
import torch

import tmm.models

TMM = {"arch": "tmm", "vocab_size": 1000, "d_model": 128, "n_layers": 2, "max_len": 256}
HYENA = {"arch": "hyena", "vocab_size": 1000, "d_model": 128, "n_layers": 2, "max_len": 64, "ffn_mult": 2}
CASES = {
    "tmm_heads_kernel2": {**TMM, "heads": 8, "kernel": 2},
    "tmm_flat_expanded": {**TMM, "mixer": "expanded", "max_len": 2048},
    "tmm_frozen": {**TMM, "heads": 8, "mixer": "frozen"},
    "tmm_masked": {**TMM, "heads": 8, "mixer": "masked"},
    "tmm_tied": {**TMM, "heads": 8, "tie_embeddings": True},
    "tmm_scaled_final_norm": {**TMM, "heads": 8, "init": "scaled", "final_norm": True, "n_layers": 6},
    "tmm_scaled_flat": {**TMM, "init": "scaled", "n_layers": 6, "max_len": 2048, "mixer": "expanded"},
    "hyena_torch": HYENA,
    "hyena_safari_tied": {**HYENA, "init": "safari", "final_norm": True, "tie_embeddings": True, "n_layers": 6},
    "hyena_kaiming": {**HYENA, "init": "kaiming"},
    "hyena_kaiming_tied": {**HYENA, "init": "kaiming", "tie_embeddings": True},
    "transformer": {"arch": "transformer", "vocab_size": 1000, "d_model": 128, "n_layers": 2, "max_len": 64,
                    "n_heads": 4, "n_kv_heads": 2},
    "mamba2_mlp": {"arch": "mamba2", "vocab_size": 1000, "d_model": 64, "n_layers": 2, "max_len": 64,
                   "headdim": 16, "d_intermediate": 96},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_are_the_cpp_models(case):
    torch.manual_seed(0)
    cpp = dict(tmm._C._build_model(json.dumps(CASES[case])).named_tensors())
    torch.manual_seed(0)
    py = tmm.models.build(CASES[case])
    got = py.state_dict()
    assert set(got) == set(cpp)
    for name, want in cpp.items():
        assert torch.equal(got[name], want), name
    assert all(not t.is_meta for t in got.values())
    buffers = {n for n, _ in py.named_buffers()}
    assert [n for n, _ in py.named_parameters()] == [n for n in cpp if n not in buffers]  # the C++ order


@pytest.mark.parametrize("case", sorted(CASES))
def test_reset_parameters_is_the_cpp_init(case):
    torch.manual_seed(0)
    model = tmm.models.build(CASES[case])
    want = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():  # every tensor spoilt, then re-initialised
        for t in list(model.parameters()) + list(model.buffers()):
            t.fill_(7.0)
    model.reset_parameters()
    compared = 0
    for name, w in want.items():
        g = model.state_dict()[name]
        w, g = w.double(), g.double()
        if w.numel() > 1 and w.std() == 0:  # a constant: zero bias, norm weight
            assert torch.equal(g, torch.full_like(g, w.flatten()[0].item())), name
        elif w.numel() >= 1000:
            assert abs(g.std().item() / w.std().item() - 1) < 0.05, (name, g.std().item(), w.std().item())
            compared += 1
    assert compared >= 3


def test_tied_embedding_and_head_rows():
    torch.manual_seed(0)
    d = 128
    tied = tmm.models.build(CASES["tmm_tied"])
    assert abs(tied.embed.weight.std().item() / (2.0 / d) ** 0.5 - 1) < 0.05 and tied.head is None
    untied = tmm.models.build({**TMM, "heads": 8})
    assert abs(untied.embed.weight.std().item() - 1) < 0.05
    safari = tmm.models.build(CASES["hyena_safari_tied"])
    assert abs(safari.embed.weight.std().item() / 0.02 - 1) < 0.05
    assert safari.final_norm is not None and tmm.models.build(HYENA).final_norm_module() is None
