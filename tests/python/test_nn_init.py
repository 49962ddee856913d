"""The drop-in layers' init against the C++ models': for every tensor of a
zoo TMM or Hyena built by tmm.models.build and by SequenceModel.from_config
from the same config, the empirical std agrees within 5% (over >= 1000
elements), and tensors the C++ model initialises constant (zero biases, norm
weights) are the same constants. The rows issue 12 changed: Toeplitz fan-in
N, the masked mixer's U(+-1/sqrt(N)), the frozen buffers, the tied TMM
embedding N(0, 2/d), "scaled", and Hyena's "torch", "safari", "kaiming"."""
import pytest
import torch

import tmm.models
from tmm.nn import SequenceModel

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
}


@pytest.mark.parametrize("reset", [False, True], ids=["built", "reset_parameters"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_init_statistics_match_cpp(case, reset):
    torch.manual_seed(0)
    cpp = tmm.models.build(CASES[case])
    py = SequenceModel.from_config(CASES[case])
    if reset:  # every tensor spoilt, then re-initialised by the layers' reset_parameters
        with torch.no_grad():
            for t in list(py.parameters()) + list(py.buffers()):
                t.fill_(7.0)
        py.reset_parameters()
    want, got = cpp.state_dict(), py.state_dict()
    assert list(got) == list(want)
    compared = 0
    for name, w in want.items():
        g = got[name]
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
    tied = SequenceModel.from_config(CASES["tmm_tied"])
    assert abs(tied.embed.weight.std().item() / (2.0 / d) ** 0.5 - 1) < 0.05
    untied = SequenceModel.from_config({**TMM, "heads": 8})
    assert abs(untied.embed.weight.std().item() - 1) < 0.05
    safari = SequenceModel.from_config(CASES["hyena_safari_tied"])
    assert abs(safari.embed.weight.std().item() / 0.02 - 1) < 0.05
    assert safari.final_norm is not None and SequenceModel.from_config(HYENA).final_norm is None
