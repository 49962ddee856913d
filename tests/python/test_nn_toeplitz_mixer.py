"""tmm.nn.ToeplitzMixer, MixerBlock and the zoo's TMM against the C++ TMM
computing with the same tensors (every mixer variant; forward, backward and
decoding), SequenceModel, and the PyTorch machinery a plain module must
support."""
import pytest
import torch
from torch.nn import functional as F

import tmm
from tmm.nn import MixerBlock, SequenceModel, ToeplitzMixer
from tmm.testing import rel_err

from cpp_twin import CppTwin, nonzero_biases

# The parity bounds (max|a-e|/max|e|): one rounding of the same computation.
PARITY = {torch.float32: 1e-6, torch.float64: 1e-12}

VARIANTS = {
    "flat": {},
    "heads4": {"heads": 4},
    "kernel3": {"heads": 2, "kernel": 3},
    "flat_kernel2": {"kernel": 2},
    "expanded": {"heads": 2, "mixer": "expanded"},
    "expanded_flat_dropout": {"mixer": "expanded", "mixer_dropout": 0.3},
    "frozen": {"heads": 2, "mixer": "frozen"},
    "frozen_flat_kernel2": {"mixer": "frozen", "kernel": 2},
    "final_norm_scaled": {"heads": 2, "final_norm": True, "init": "scaled"},
    "final_rmsnorm_tied": {"final_norm": True, "norm": "rmsnorm", "tie_embeddings": True},
    "masked": {"heads": 2, "mixer": "masked"},
    "rmsnorm_mixer_first_gelu": {"heads": 4, "norm": "rmsnorm", "block_order": "mixer_first", "activation": "gelu"},
    "tied_relu": {"tie_embeddings": True, "activation": "relu", "ffn_mult": 2},
}


def cpp_and_python(variant, dtype, n_layers=2, d_model=12, max_len=16, vocab=23):
    """(the C++ twin, the zoo model): the same tensors, nonzero biases, eval
    mode (the expanded mixer's dropout, 0.1 by default, off)."""
    torch.manual_seed(0)
    config = {"arch": "tmm", "vocab_size": vocab, "d_model": d_model, "n_layers": n_layers, "max_len": max_len,
              **VARIANTS[variant]}
    py = nonzero_biases(tmm.models.build(config).to(dtype)).eval()
    return CppTwin(py), py


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_model_parity_forward_backward(variant, dtype):
    cpp, py = cpp_and_python(variant, dtype)
    assert set(py.state_dict()) == set(cpp.tensors())
    ids = torch.randint(0, 23, (3, 13))
    out_c, out_p = cpp(ids, return_hidden=True), py(ids, return_hidden=True)
    assert torch.equal(out_p.hidden, out_c.hidden) and torch.equal(out_p.logits, out_c.logits)
    r = torch.randn(out_c.logits.shape, dtype=dtype)
    (out_c.logits * r).sum().backward()
    (out_p.logits * r).sum().backward()
    gc, gp = cpp.grads(), grads(py)
    assert set(gc) == set(gp)
    for name in gc:
        assert torch.equal(gp[name], gc[name]), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("variant", ["flat", "heads4", "kernel3", "expanded", "expanded_flat_dropout", "frozen",
                                     "frozen_flat_kernel2", "masked"])
def test_mixer_alone_parity(variant, dtype):
    """The C++ mixer isolated inside a one-block model whose FFN outputs zero:
    hidden = e + mixer(LayerNorm(e)) for the embeddings e."""
    cpp, py = cpp_and_python(variant, dtype, n_layers=1)
    with torch.no_grad():
        py.blocks[0].ffn_out.weight.zero_()
        py.blocks[0].ffn_out.bias.zero_()
    mixer = ToeplitzMixer.from_config(py.config, dtype=dtype).eval()
    own = {k[len("blocks.0.mixer."):]: v for k, v in py.state_dict().items() if k.startswith("blocks.0.mixer.")}
    mixer.load_state_dict(own)
    ids = torch.randint(0, 23, (2, 11))
    e = py.embed.weight[ids].detach()
    u = F.layer_norm(e, (12,), py.blocks[0].mixer_norm.weight.detach(), py.blocks[0].mixer_norm.bias.detach())
    y_cpp = cpp.hidden_states(ids) - e
    y = mixer(u)
    assert rel_err(y, y_cpp) <= PARITY[dtype] * 4  # the subtraction of e adds one rounding
    if not list(mixer.parameters()):  # flat frozen: nothing to train
        return
    r = torch.randn(y.shape, dtype=dtype)
    (y_cpp * r).sum().backward()
    (y * r).sum().backward()
    gc = cpp.grads()
    for name, p in mixer.named_parameters():
        assert rel_err(p.grad, gc[f"blocks.0.mixer.{name}"]) <= PARITY[dtype], name


@pytest.mark.parametrize("variant", ["flat", "kernel3", "expanded", "masked", "rmsnorm_mixer_first_gelu",
                                     "final_rmsnorm_tied"])
def test_step_matches_cpp_decoder_and_forward(variant):
    _, py = cpp_and_python(variant, torch.float64)
    ids = torch.randint(0, 23, (2, 14))
    prompt = 5
    cap = 14
    state_c = py.start_decoding(2, cap, "cached")  # the C++ decoder
    states = tmm.nn.LanguageModel.start_decoding(py, 2, cap)  # each block's step() in Python
    got_c = [py.decode(state_c, ids[:, :prompt])]
    got_p = [py.step(ids[:, :prompt], states)]
    for t in range(prompt, 14):
        got_c.append(py.decode(state_c, ids[:, t:t + 1]))
        got_p.append(py.step(ids[:, t:t + 1], states))
    steps_c, steps_p = torch.cat(got_c, 1), torch.cat(got_p, 1)
    assert rel_err(steps_p, steps_c) <= PARITY[torch.float64]
    with torch.no_grad():
        assert rel_err(steps_p, py(ids)) <= PARITY[torch.float64]


def test_step_blocks_of_any_length_and_errors():
    m = ToeplitzMixer(8, 10, heads=2, kernel=2).double()
    x = torch.randn(2, 10, 8, dtype=torch.float64)
    state = m.start_decoding(2, 10)
    parts = [m.step(x[:, :3], state), m.step(x[:, 3:4], state), m.step(x[:, 4:9], state), m.step(x[:, 9:], state)]
    assert rel_err(torch.cat(parts, 1), m(x).detach()) <= 1e-12
    with pytest.raises(ValueError, match="capacity"):
        m.step(x[:, :1], state)
    with pytest.raises(ValueError, match="capacity 11 exceeds"):
        m.start_decoding(2, 11)
    with pytest.raises(ValueError, match="batch"):
        m.step(x[:1, :1], m.start_decoding(2, 4))


def test_names_shapes_and_init_match_cpp():
    for variant in ("flat", "heads4", "kernel3", "expanded", "frozen", "frozen_flat_kernel2", "masked"):
        cpp, py = cpp_and_python(variant, torch.float32, n_layers=1)
        mixer = ToeplitzMixer.from_config(py.config)
        own = {k[len("blocks.0.mixer."):]: v.shape for k, v in cpp.tensors().items() if ".mixer." in k}
        assert {k: v.shape for k, v in mixer.state_dict().items()} == own, variant
        params = {n for n, _ in py.named_parameters() if ".mixer." in n}
        assert {f"blocks.0.mixer.{n}" for n, _ in mixer.named_parameters()} == params, variant
        assert [n for n, _ in mixer.named_buffers()] == [n[len("blocks.0.mixer."):] for n, _ in py.named_buffers()
                                                         if n.startswith("blocks.0.mixer.")], variant
    frozen = ToeplitzMixer(8, 64, frozen=True)
    assert set(dict(frozen.named_buffers())) == {"weight", "bias"} and not list(frozen.parameters())
    big = ToeplitzMixer(64, 2048, heads=4, kernel=2)
    assert abs(big.weight.std().item() / (2.0 / 2048) ** 0.5 - 1) < 0.03  # fan-in N per tap
    assert abs(big.in_proj.weight.std().item() / (2.0 / 64) ** 0.5 - 1) < 0.03
    assert (big.bias == 0).all() and (big.in_proj.bias == 0).all()


def test_factory_arguments_and_errors():
    m = ToeplitzMixer(8, 16, heads=2, expanded=True, dtype=torch.float64, device="cpu")
    assert all(p.dtype == torch.float64 for p in m.parameters())
    assert SequenceModel(ToeplitzMixer, 11, 8, 1, 16, dtype=torch.float64).embed.weight.dtype == torch.float64
    with pytest.raises(ValueError, match='"heads" must divide d_model = 8, got 3'):
        ToeplitzMixer(8, 16, heads=3)
    with pytest.raises(ValueError, match='"kernel" must be in'):
        ToeplitzMixer(8, 16, heads=4, kernel=3)
    with pytest.raises(ValueError, match="exclude each other"):
        ToeplitzMixer(8, 16, expanded=True, frozen=True)
    with pytest.raises(ValueError, match='"max_len" must be >= 1, got 0'):
        ToeplitzMixer(8, 0)
    with pytest.raises(ValueError, match="expected x of shape B x L x 8"):
        m(torch.randn(2, 4, 7, dtype=torch.float64))
    with pytest.raises(ValueError, match="exceeds max_len"):
        m(torch.randn(2, 17, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="block_order"):
        MixerBlock(8, 16, block_order="sideways")


def test_odd_tiny_empty_and_noncontiguous_inputs():
    m = ToeplitzMixer(6, 9, heads=3, kernel=2).double()
    for L in (1, 2, 9):
        x = torch.randn(1, L, 6, dtype=torch.float64)
        assert m(x).shape == x.shape
    x = torch.randn(3, 6, 9, dtype=torch.float64).transpose(1, 2)  # B x L x C, not contiguous
    assert rel_err(m(x), m(x.contiguous())) == 0
    assert m(torch.randn(0, 5, 6, dtype=torch.float64)).shape == (0, 5, 6)


def test_gradcheck_float64():
    for kwargs in ({"heads": 2, "kernel": 2}, {"expanded": True}, {"masked": True, "heads": 2}):
        m = ToeplitzMixer(4, 6, **kwargs).double().eval()  # eval: the expanded mixer's dropout off
        with torch.no_grad():
            m.bias.normal_()
        x = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
        params = tuple(p for p in m.parameters())
        names = [n for n, _ in m.named_parameters()]

        def f(x, *ps):
            return torch.func.functional_call(m, dict(zip(names, ps)), (x,))

        assert torch.autograd.gradcheck(f, (x, *params))


def test_functional_call_hooks_and_checkpoint():
    m = ToeplitzMixer(8, 16, heads=2)
    x = torch.randn(2, 10, 8)
    doubled = {n: 2 * p.detach() for n, p in m.named_parameters()}
    y = torch.func.functional_call(m, doubled, (x,))
    m2 = ToeplitzMixer(8, 16, heads=2)
    m2.load_state_dict(doubled)
    assert torch.equal(y, m2(x))
    seen = []
    handle = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    m(x)
    handle.remove()
    assert seen == [x.shape]
    xr = x.clone().requires_grad_()
    y1 = torch.utils.checkpoint.checkpoint(m, xr, use_reentrant=False)
    y1.sum().backward()
    g1 = m.weight.grad.clone()
    m.zero_grad()
    m(x).sum().backward()
    assert torch.allclose(g1, m.weight.grad)


def test_torch_compile_fullgraph_model_forward_backward():
    torch.manual_seed(0)
    model = SequenceModel(ToeplitzMixer, 17, 8, 2, 12, mixer_kwargs={"heads": 2, "kernel": 2})
    ids = torch.randint(0, 17, (2, 12))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    eager = model(ids)
    y = compiled(ids)
    assert rel_err(y, eager) <= 1e-6
    y.square().mean().backward()
    g = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    eager.square().mean().backward()
    for n, p in model.named_parameters():
        assert rel_err(g[n], p.grad) <= 1e-6, n


def test_sequence_model_with_a_user_mixer_by_import_path():
    class Seen:
        kwargs = None

    model = SequenceModel("torch.nn.Identity", 11, 8, 2, 16, block_order="mixer_first", final_norm=True)
    assert isinstance(model.blocks[0].mixer, torch.nn.Identity) and model.final_norm is not None
    assert model(torch.randint(0, 11, (2, 5))).shape == (2, 5, 11)

    def factory(d_model, l_max, layer_idx, width=1):
        Seen.kwargs = (d_model, l_max, layer_idx, width)
        return torch.nn.Linear(d_model, d_model)

    SequenceModel(factory, 11, 8, 3, 16, mixer_kwargs={"width": 5}, mixer_inputs=["l_max", "layer_idx"])
    assert Seen.kwargs == (8, 16, 2, 5)
    with pytest.raises(ImportError, match="has no attribute"):
        SequenceModel("torch.nn.NoSuchMixer", 11, 8, 1, 16)
    with pytest.raises(ImportError, match="cannot import module"):
        SequenceModel("no_such_pkg_xyz.Mixer", 11, 8, 1, 16)
    with pytest.raises(ValueError, match="must map B x L x d"):
        SequenceModel(lambda d: torch.nn.Linear(d, d + 1), 11, 8, 1, 16)(torch.randint(0, 11, (1, 3)))
    with pytest.raises(ValueError, match="token ids in"):
        model(torch.tensor([[0, 11]]))


class ThirdPartyMixer(torch.nn.Module):
    """A mixer written elsewhere, safari-style: the length as l_max, its depth as layer_idx."""

    def __init__(self, d_model, l_max, layer_idx, scale=1.0):
        super().__init__()
        self.l_max, self.layer_idx, self.scale = l_max, layer_idx, scale
        self.proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.scale * self.proj(x)


def test_mixer_inputs_name_what_each_layer_passes():
    model = SequenceModel(ThirdPartyMixer, 11, 8, 3, 16, mixer_kwargs={"scale": 0.5},
                          mixer_inputs=("l_max", "layer_idx"))
    assert [(b.mixer.l_max, b.mixer.layer_idx, b.mixer.scale) for b in model.blocks] == [(16, i, 0.5) for i in range(3)]
    assert model(torch.randint(0, 11, (2, 5))).shape == (2, 5, 11)
    # the default: the factory's own attribute (tmm's mixers say what they take), else nothing but d_model
    assert SequenceModel(ToeplitzMixer, 11, 8, 2, 16).mixer_inputs == ("max_len", "n_layers", "device", "dtype")
    assert SequenceModel(tmm.nn.HyenaOperator, 11, 8, 1, 16).mixer_inputs == ("l_max", "n_layers", "device", "dtype")
    mamba = SequenceModel(tmm.nn.Mamba2Mixer, 11, 32, 2, 16)  # mamba_ssm's LM passes layer_idx, not the length
    assert mamba.mixer_inputs == ("layer_idx", "n_layers", "device", "dtype")
    assert [b.mixer.layer_idx for b in mamba.blocks] == [0, 1]
    assert SequenceModel("torch.nn.Identity", 11, 8, 1, 16).mixer_inputs == ()
    attributed = type("Attributed", (ThirdPartyMixer,), {"mixer_inputs": ("l_max", "layer_idx")})
    assert SequenceModel(attributed, 11, 8, 2, 16).blocks[1].mixer.layer_idx == 1
    # a value mixer_kwargs sets wins over the attribute's default, and is not passed twice
    assert SequenceModel(ToeplitzMixer, 11, 8, 2, 16, mixer_kwargs={"n_layers": 4}).mixer_inputs == (
        "max_len", "device", "dtype")


def test_mixer_inputs_errors_name_the_argument():
    allowed = "max_len, l_max, seq_len, layer_idx, n_layers, device, dtype"
    with pytest.raises(ValueError, match=rf"mixer_inputs: got \['l_max', 'width'\]: 'width' not allowed "
                                         rf"\(allowed, each once: {allowed}\)"):
        SequenceModel(ThirdPartyMixer, 11, 8, 1, 16, mixer_inputs=["l_max", "width"])
    with pytest.raises(ValueError, match="mixer_inputs: got .*a name twice"):
        SequenceModel(ThirdPartyMixer, 11, 8, 1, 16, mixer_inputs=["l_max", "l_max"])
    with pytest.raises(ValueError, match="mixer_inputs: expected a list of names .*got 'l_max'"):
        SequenceModel(ThirdPartyMixer, 11, 8, 1, 16, mixer_inputs="l_max")
    with pytest.raises(ValueError, match="mixer_inputs: 'layer_idx' also set in mixer_kwargs"):
        SequenceModel(ThirdPartyMixer, 11, 8, 1, 16, mixer_inputs=["l_max", "layer_idx"],
                      mixer_kwargs={"layer_idx": 0})
    wrong = type("Wrong", (ThirdPartyMixer,), {"mixer_inputs": ("length",)})
    with pytest.raises(ValueError, match=r"mixer_inputs \(the attribute of .*Wrong\): got \['length'\]"):
        SequenceModel(wrong, 11, 8, 1, 16)
    # nothing guessed: a factory that needs a per-layer value mixer_inputs does not name is told so
    with pytest.raises(TypeError, match=r"mixer_factory 'ThirdPartyMixer', called with d_model and nothing else: "
                                        r".*missing 2 required .*mixer_inputs names \(none; allowed: "):
        SequenceModel(ThirdPartyMixer, 11, 8, 1, 16)


def test_a_mixer_config_carries_mixer_inputs():
    cfg = {"arch": "mixer", "mixer": f"{__name__}.ThirdPartyMixer", "vocab_size": 11, "d_model": 8, "n_layers": 2,
           "max_len": 16, "mixer_kwargs": {"scale": 2.0}, "mixer_inputs": ["l_max", "layer_idx"]}
    model = SequenceModel.from_mixer_config(cfg)
    assert model.blocks[1].mixer.layer_idx == 1 and model.config["mixer_inputs"] == ["l_max", "layer_idx"]
    assert SequenceModel.from_mixer_config(dict(model.config)).config == model.config  # it rebuilds the same
    with pytest.raises(ValueError, match="mixer_inputs: got \\['seq'\\]"):
        SequenceModel.from_mixer_config({**cfg, "mixer_inputs": ["seq"]})


def test_sequence_model_loss_and_shift_labels():
    torch.manual_seed(0)
    model = SequenceModel(ToeplitzMixer, 11, 8, 1, 16)
    ids = torch.randint(0, 11, (2, 7))
    out = model(ids, labels=ids)  # next-token prediction, as transformers' causal LMs
    want = F.cross_entropy(out.logits[:, :-1].reshape(-1, 11), ids[:, 1:].reshape(-1))
    assert torch.allclose(out.loss, want)
    per_position = model(ids, labels=ids, shift_labels=False).loss
    assert torch.allclose(per_position, F.cross_entropy(out.logits.reshape(-1, 11), ids.reshape(-1)))


def test_from_config_names_the_key_it_refuses():
    config = {"arch": "tmm", "vocab_size": 11, "d_model": 8, "n_layers": 1, "max_len": 16, "rotary": True}
    with pytest.raises(ValueError, match='unknown key "rotary"'):
        MixerBlock.from_config(config)
    del config["rotary"]
    with pytest.raises(ValueError, match='"init" must be kaiming or scaled, got "safari"'):
        ToeplitzMixer.from_config({**config, "init": "safari"})
    with pytest.raises(ValueError, match='"mixer_dropout" applies to mixer "expanded" only'):
        MixerBlock.from_config({**config, "mixer_dropout": 0.2})
    with pytest.raises(ValueError, match='"arch" must be "tmm", got .mamba2.'):
        MixerBlock.from_config({**config, "arch": "mamba2"})


def test_expanded_dropout_acts_in_train_mode_only():
    m = ToeplitzMixer(8, 16, expanded=True)
    assert m.mixer_dropout == 0.1 and ToeplitzMixer(8, 16).mixer_dropout == 0.0
    x = torch.randn(2, 16, 8)
    with torch.no_grad():
        m.train()
        assert not torch.equal(m(x), m(x))
        m.eval()
        assert torch.equal(m(x), m(x))
    m0 = ToeplitzMixer(8, 16, expanded=True, mixer_dropout=0.0).train()
    with torch.no_grad():
        assert torch.equal(m0(x), m0(x))
    with pytest.raises(ValueError, match='"mixer_dropout" must be in'):
        ToeplitzMixer(8, 16, expanded=True, mixer_dropout=1.0)
    with pytest.raises(ValueError, match='"init" must be kaiming or scaled'):
        ToeplitzMixer(8, 16, init="torch")


def test_frozen_trains_neither_weight_nor_bias():
    torch.manual_seed(0)
    model = tmm.models.build({"arch": "tmm", "vocab_size": 11, "d_model": 8, "n_layers": 1, "max_len": 16,
                              "mixer": "frozen"})
    before = {k: v.clone() for k, v in model.state_dict().items() if ".mixer." in k}
    assert set(before) == {"blocks.0.mixer.weight", "blocks.0.mixer.bias"}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 11, (2, 9))
    model(ids, labels=ids).loss.backward()
    opt.step()
    for k, v in model.state_dict().items():
        if k in before:
            assert torch.equal(v, before[k]), k
