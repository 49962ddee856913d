"""Every TMM variant against the authors' formulas (ToeplitzMixers), and
every initialisation against the authors' (docs/models.md, "TMM: what each
default follows"):

* values: each variant's logits against an independent float64 rendering
  written here with plain tensor ops (dense masked Toeplitz matrices, explicit
  norms), after every tensor is randomised, so a variant that ignored its
  input, an option or a bias would fail;
* init: the empirical std of each initialised tensor within 5% of the
  reference value over thousands of elements;
* frozen: weight and bias are buffers (not trained, requires_grad False);
* expanded: the inner dropout acts in train mode only;
* final_norm: the initial loss of a tiny model is near ln V.
"""
import json
import math

import pytest
import torch
import torch.nn.functional as F

import tmm.models

pytestmark = pytest.mark.usefixtures("one_thread")

BASE = {"arch": "tmm", "vocab_size": 37, "d_model": 8, "n_layers": 2, "max_len": 20}

# The authors' settings (ToeplitzMixers, experiments 003/004/006/008), as
# docs/models.md states them (TMM table and "what each default follows"):
# flat mixer of one full-length kernel, pre-norm LayerNorm blocks with the
# FFN first, Linear(d, 4d) -> SiLU -> Linear(4d, d), no final norm, untied
# head, Kaiming init. The reference below is built from this table and the
# variant's own keys, never from the model's resolved config, so a wrong
# default of tmm's shows as a wrong value.
AUTHORS = {"heads": 0, "kernel": 1, "mixer": "toeplitz", "mixer_dropout": 0.0, "ffn_mult": 4, "activation": "silu",
           "block_order": "ffn_first", "norm": "layernorm", "final_norm": False, "init": "kaiming",
           "tie_embeddings": False, "dropout": 0.0}


# ---- The reference: the formulas, float64, plain tensor ops ---------------

def toeplitz_matrix(w, L):
    """L x L lower-triangular T[t, s] = w[t - s]."""
    t = torch.arange(L)
    lag = t[:, None] - t[None, :]
    return torch.where(lag >= 0, w[lag.clamp(min=0)], torch.zeros((), dtype=w.dtype))


def mix(x, weight, bias, masked):
    """x B x L x C in G groups. Toeplitz: y[t, c] = sum_i sum_{s<=t}
    w[g, i, t-s] x[s, c-(K-1)+i] + beta[g, t] (sources before the group's first
    channel count as zero); masked: y[t] = sum_{s<=t} M[g, t, s] x[s] + beta[g, t]."""
    B, L, C = x.shape
    G = weight.shape[0]
    cg = C // G
    y = torch.zeros_like(x)
    for g in range(G):
        xs = x[:, :, g * cg:(g + 1) * cg]                              # B x L x cg
        if masked:
            y[:, :, g * cg:(g + 1) * cg] = torch.einsum("ts,bsc->btc", weight[g, :L, :L].tril(), xs)
        else:
            K = weight.shape[1]
            for i in range(K):
                shift = K - 1 - i                                      # tap i reads channel c - shift
                src = F.pad(xs, (shift, 0))[:, :, :cg]                 # src[..., c] = xs[..., c - shift]
                y[:, :, g * cg:(g + 1) * cg] += torch.einsum("ts,bsc->btc", toeplitz_matrix(weight[g, i], L), src)
        y[:, :, g * cg:(g + 1) * cg] += bias[g, :L][None, :, None]
    return y


def norm(x, P, name, kind):
    if kind == "rmsnorm":
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * P[f"{name}.weight"]
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * P[f"{name}.weight"] + P[f"{name}.bias"]


ACT = {"silu": lambda x: x * torch.sigmoid(x), "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
       "relu": lambda x: x.clamp(min=0)}


def check_shapes(cfg, P):
    """The widths the table sets, which the formulas below read off the weights."""
    d, n, G = cfg["d_model"], cfg["max_len"], cfg["heads"] or 1
    mixer = (G, n, n) if cfg["mixer"] == "masked" else (G, cfg["kernel"], n)
    for i in range(cfg["n_layers"]):
        assert tuple(P[f"blocks.{i}.mixer.weight"].shape) == mixer, f"block {i} mixer weight"
        assert tuple(P[f"blocks.{i}.ffn_in.weight"].shape) == (cfg["ffn_mult"] * d, d), f"block {i} FFN width"


def reference_logits(cfg, P, ids):
    check_shapes(cfg, P)
    lin = lambda x, n, bias=True: x @ P[f"{n}.weight"].T + (P[f"{n}.bias"] if bias else 0)  # noqa: E731
    h = P["embed.weight"][ids]
    masked = cfg["mixer"] == "masked"
    for i in range(cfg["n_layers"]):
        b = f"blocks.{i}."

        def ffn(x):
            return lin(ACT[cfg["activation"]](lin(norm(x, P, b + "ffn_norm", cfg["norm"]), b + "ffn_in")), b + "ffn_out")

        def mixer(x):
            x = norm(x, P, b + "mixer_norm", cfg["norm"])
            if cfg["heads"]:
                x = lin(x, b + "mixer.in_proj")
            x = mix(x, P[b + "mixer.weight"], P[b + "mixer.bias"], masked)
            if cfg["mixer"] == "expanded":  # Toeplitz -> SiLU -> (dropout, absent in eval) -> Toeplitz
                x = mix(ACT["silu"](x), P[b + "mixer.weight2"], P[b + "mixer.bias2"], masked)
            if cfg["heads"]:
                x = lin(x, b + "mixer.out_proj")
            return x

        first, second = (ffn, mixer) if cfg["block_order"] == "ffn_first" else (mixer, ffn)
        h = h + first(h)
        h = h + second(h)
    if cfg["final_norm"]:
        h = norm(h, P, "final_norm", cfg["norm"])
    return h @ (P["embed.weight"] if cfg["tie_embeddings"] else P["head.weight"]).T


VARIANTS = {
    "flat": {},
    "heads": {"heads": 2},
    "kernel-flat": {"kernel": 3},
    "kernel-heads": {"heads": 2, "kernel": 2},
    "expanded": {"heads": 2, "mixer": "expanded"},
    "expanded-flat": {"mixer": "expanded", "kernel": 2},
    "frozen": {"mixer": "frozen"},
    "frozen-heads": {"heads": 2, "mixer": "frozen"},
    "masked": {"mixer": "masked"},
    "masked-heads": {"heads": 4, "mixer": "masked"},
    "mixer_first": {"heads": 2, "block_order": "mixer_first"},
    "rmsnorm": {"norm": "rmsnorm"},
    "gelu": {"heads": 2, "activation": "gelu"},
    "relu": {"activation": "relu"},
    "tied": {"heads": 2, "tie_embeddings": True},
    "final_norm": {"heads": 2, "final_norm": True},
    "final_rmsnorm": {"final_norm": True, "norm": "rmsnorm"},
    "scaled": {"heads": 2, "init": "scaled"},
}


def test_default_config_is_the_authors_table():
    model = tmm.models.build(BASE)
    for key, value in AUTHORS.items():
        assert model.config[key] == value, f"{key}: {model.config[key]!r}, the authors' {value!r}"
    names = set(model.state_dict())
    assert "head.weight" in names and "head.bias" not in names  # Linear(d, V, no bias)
    assert not any(n.startswith("final_norm") for n in names)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_matches_the_formulas(variant):
    torch.manual_seed(0)
    model = tmm.models.build(dict(BASE, **VARIANTS[variant])).to(torch.float64).eval()
    cfg = {**BASE, **AUTHORS, **VARIANTS[variant]}
    with torch.no_grad():  # every tensor random: zero biases or unit norms would hide a dropped term
        state = {k: torch.randn_like(v) * (0.3 if v.dim() > 1 else 1.0) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    ids = torch.randint(0, BASE["vocab_size"], (2, 17), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = model(ids)
    expected = reference_logits(cfg, state, ids)
    err = ((got - expected).abs().max() / expected.abs().max()).item()
    assert err <= 1e-10, f"{variant}: max rel err {err:.3g}"
    # The variant's own tensors take part: changing one changes the logits.
    key = {"masked": "blocks.1.mixer.weight", "expanded": "blocks.1.mixer.weight2",
           "final_norm": "final_norm.weight"}.get(variant.split("-")[0], "blocks.1.mixer.bias")
    state[key] = state[key] * 1.5
    model.load_state_dict(state)
    with torch.no_grad():
        assert not torch.allclose(model(ids), got), f"{variant}: {key} does not change the output"


# ---- Initialisation, as the authors' --------------------------------------

def std_close(t, expected, what):
    got = t.double().std().item()
    assert abs(got / expected - 1) < 0.05, f"{what}: std {got:.4g}, the reference {expected:.4g}"


def test_toeplitz_and_kernel_init_fan_in_is_n():
    """Authors: the Toeplitz vector (1, N) and the kernel weight (k, N) are
    kaiming_normal_ with fan-in N: N(0, 2/N) per tap, whatever k."""
    N = 1024
    for kernel in (1, 8):
        model = tmm.models.build(dict(BASE, d_model=16, max_len=N, kernel=kernel))
        w = model.state_dict()["blocks.0.mixer.weight"]
        assert w.shape == (1, kernel, N)
        std_close(w, math.sqrt(2 / N), f"kernel {kernel} Toeplitz weight")
        assert torch.count_nonzero(model.state_dict()["blocks.0.mixer.bias"]) == 0


def test_linear_init_kaiming_and_embedding():
    model = tmm.models.build(dict(BASE, vocab_size=4096, d_model=64, heads=4, max_len=16))
    s = model.state_dict()
    std_close(s["embed.weight"], 1.0, "untied embedding (torch's N(0, 1))")
    std_close(s["head.weight"], math.sqrt(2 / 64), "head")
    std_close(s["blocks.0.ffn_in.weight"], math.sqrt(2 / 64), "ffn_in")
    std_close(s["blocks.0.ffn_out.weight"], math.sqrt(2 / 256), "ffn_out")
    std_close(s["blocks.0.mixer.in_proj.weight"], math.sqrt(2 / 64), "in_proj")


def test_tied_embedding_is_reinitialised_kaiming():
    """Authors' tie_io: the shared weight is re-initialised Kaiming, N(0, 2/d)."""
    model = tmm.models.build(dict(BASE, vocab_size=4096, d_model=64, tie_embeddings=True))
    std_close(model.state_dict()["embed.weight"], math.sqrt(2 / 64), "tied embedding")


def test_masked_mixer_init_is_conv1d_default():
    """Authors: a lower-triangular Conv1d(N, N, 1), torch's default init:
    weight and per-position bias U(-1/sqrt(N), 1/sqrt(N))."""
    N = 512
    s = tmm.models.build(dict(BASE, d_model=16, heads=4, max_len=N, mixer="masked")).state_dict()
    bound = 1 / math.sqrt(N)
    for name in ("blocks.0.mixer.weight", "blocks.0.mixer.bias"):
        t = s[name]
        assert t.abs().max().item() <= bound, name
        std_close(t, bound / math.sqrt(3), name)


def test_scaled_init_divides_the_branch_outputs():
    """init "scaled" (an extension): ffn_out and the mixer's last weight / sqrt(2 n_layers)."""
    layers = 8
    c = dict(BASE, vocab_size=64, d_model=64, n_layers=layers, max_len=1024)
    heads = tmm.models.build(dict(c, heads=4, init="scaled")).state_dict()
    std_close(heads["blocks.0.ffn_out.weight"], math.sqrt(2 / 256 / (2 * layers)), "scaled ffn_out")
    std_close(heads["blocks.0.mixer.out_proj.weight"], math.sqrt(2 / 64 / (2 * layers)), "scaled out_proj")
    std_close(heads["blocks.0.mixer.weight"], math.sqrt(2 / 1024), "heads: Toeplitz unscaled")
    flat = tmm.models.build(dict(c, init="scaled")).state_dict()
    std_close(flat["blocks.0.mixer.weight"], math.sqrt(2 / 1024 / (2 * layers)), "flat: scaled Toeplitz")


# ---- Frozen, expanded dropout, final norm ---------------------------------

def test_frozen_freezes_weight_and_bias():
    model = tmm.models.build(dict(BASE, heads=2, mixer="frozen"))
    trainable = {n for n, _ in model.named_parameters()}
    buffers = dict(model.named_buffers())
    for i in range(BASE["n_layers"]):
        for t in ("weight", "bias"):
            name = f"blocks.{i}.mixer.{t}"
            assert name not in trainable and name in buffers and not buffers[name].requires_grad, name
    assert "blocks.0.mixer.in_proj.weight" in trainable  # the head projections still train
    before = {k: v.clone() for k, v in buffers.items()}
    ids = torch.randint(0, BASE["vocab_size"], (2, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(ids, labels=ids).loss.backward()
    opt.step()
    for k, v in model.named_buffers():
        assert torch.equal(v, before[k]), k


def test_flat_ablation_configs():
    """The authors' frozen copy run and kernel ablation are flat (heads 0)."""
    for name, key, value in (("ablation/tmm-frozen-flat", "mixer", "frozen"), ("ablation/tmm-kernel8-flat", "kernel", 8)):
        c = json.loads(tmm.models.config_path(name).read_text())
        assert c.get("heads", 0) == 0 and c[key] == value, name


def test_expanded_dropout_in_train_mode_only():
    c = dict(BASE, heads=2, mixer="expanded")
    model = tmm.models.build(c)
    assert model.config["mixer_dropout"] == 0.1  # the authors' heads version
    assert tmm.models.build(BASE).config["mixer_dropout"] == 0.0
    ids = torch.randint(0, BASE["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.eval()
        a, b = model(ids), model(ids)
        assert torch.equal(a, b)
        model.train()
        torch.manual_seed(1)
        c1 = model(ids)
        torch.manual_seed(2)
        c2 = model(ids)
        assert not torch.allclose(c1, c2) and not torch.allclose(c1, a)
        none = tmm.models.build(dict(c, mixer_dropout=0.0))
        none.load_state_dict(model.state_dict())
        none.train()
        assert torch.allclose(none(ids), a, rtol=1e-6, atol=1e-6)  # dropout 0: train = eval (the common dropout is 0)


@pytest.mark.parametrize("key,value,needle", [
    ("mixer_dropout", 0.2, 'key "mixer_dropout" applies to mixer "expanded" only'),
    ("mixer_dropout", 1.0, 'key "mixer_dropout" must be in \\[0, 1\\)'),
    ("init", "xavier", 'key "init" must be kaiming or scaled, got "xavier"'),
    ("final_norm", 1, 'key "final_norm" must be a boolean'),
])
def test_bad_keys_are_named(key, value, needle):
    config = dict(BASE, **{key: value})
    if key == "mixer_dropout" and value == 1.0:
        config["mixer"] = "expanded"
    with pytest.raises(RuntimeError, match=needle):
        tmm.models.build(config)


def initial_loss(config, seed=0):
    torch.manual_seed(seed)
    model = tmm.models.build(config)
    ids = torch.randint(0, config["vocab_size"], (8, config["max_len"]), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(ids, labels=ids).loss.item()


def test_initial_loss_with_and_without_final_norm():
    """With the authors' Kaiming-gain sublayers and no final norm the residual
    stream grows with depth and position, so the initial loss is far above
    ln V (docs/models.md gives the measured values); a final LayerNorm (the
    opt-in extension) brings it to about ln V + 1: unit-variance features
    through a N(0, 2/d) head give logits of variance 2, and a Gaussian
    logit of variance s^2 costs about s^2 / 2 nats over ln V."""
    config = {"arch": "tmm", "vocab_size": 512, "d_model": 64, "n_layers": 4, "max_len": 128, "heads": 4}
    ln_v = math.log(512)
    with_norm = initial_loss(dict(config, final_norm=True))
    assert abs(with_norm - ln_v) <= 1.0 + 0.25, f"final_norm: initial loss {with_norm:.3f}, ln V = {ln_v:.3f}"
    without = initial_loss(config)
    assert without > ln_v + 3, f"no final norm: initial loss {without:.3f}, ln V = {ln_v:.3f}"
