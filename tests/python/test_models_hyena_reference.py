"""The Hyena operator, block and model against an independent float64
rendering of their formulas, written here with plain tensor ops and none of
tmm's: safari's HyenaOperator (src/models/sequence/hyena.py: in-projection,
short depthwise causal conv, the implicit filter: positional features
z = [t, Re, Im of exp(-i f w)] -> (Linear -> Sin) x 3 -> Linear, times the
exponential modulation window, the long convolution with the skip D, the
gating, out-projection) inside the residual blocks tmm's Hyena claims
(docs/models.md: pre-norm LayerNorm, the operator then a Linear -> exact
GELU -> Linear MLP, an optional final LayerNorm, the head).

The reference's settings come from the table of the authors' defaults
written below (docs/models.md, "Hyena: what each default follows"), not
from the model's resolved config, so a wrong default fails here; the long
convolution is a dense causal sum (the op computes it by FFT or by a blocked
direct kernel). Logits and every parameter's gradient are compared in
float64, each gradient against its own scale, after every tensor is
randomised."""
import math

import pytest
import torch
import torch.nn.functional as F

import tmm.models
from tmm.nn import HyenaOperator
from tmm.testing import rel_err, tolerance

pytestmark = pytest.mark.usefixtures("one_thread")

# The authors' HyenaModel and safari's standalone HyenaOperator/HyenaFilter
# defaults, as docs/models.md states them (Hyena table and "what each default
# follows"): MLP 4 d, short filter 3, filter MLP width 64, emb_dim 3, sine
# frequency 1, modulated, no final norm, untied head, torch's default init.
AUTHORS = {"ffn_mult": 4, "short_filter": 3, "filter_order": 64, "emb_dim": 3, "filter_sin_freq": 1.0,
           "modulate": True, "final_norm": False, "tie_embeddings": False, "init": "torch", "dropout": 0.0}
SIZES = {"arch": "hyena", "vocab_size": 23, "d_model": 8, "n_layers": 2, "max_len": 20}
LN_EPS = 1e-5  # torch.nn.LayerNorm's default, which the authors' model and safari use
F64 = tolerance(torch.float64)


# ---- The reference: the formulas, float64, plain tensor ops ---------------

def linear(x, P, name, bias=True):
    return x @ P[f"{name}.weight"].T + (P[f"{name}.bias"] if bias else 0)


def layer_norm(x, P, name):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + LN_EPS) * P[f"{name}.weight"] + P[f"{name}.bias"]


def gelu(x):  # exact (erf) GELU, docs/models.md
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def implicit_filter(cfg, P, prefix, L, d):
    """L x d: safari's HyenaFilter.filter(L). PositionalEmbedding(emb_dim,
    seq_len = l_max): t = linspace(0, 1, l_max), w = 2 pi t_rescaled / l_max
    with t_rescaled = 0 .. l_max - 1, f = linspace(1e-4, bands - 1, bands),
    z = [t, Re, Im of exp(-i f w)]; the MLP with one shared Sin(freq);
    ExponentialModulation: h * exp(-t |deltas|), deltas = linspace(ln(1e-2) /
    1.5, ln(1e-2) / 0.3, d)."""
    n = cfg["max_len"]
    bands = (cfg["emb_dim"] - 1) // 2
    t = torch.linspace(0, 1, n, dtype=torch.float64)[:L, None]
    w = 2 * math.pi * torch.linspace(0, n - 1, n, dtype=torch.float64)[:L, None] / n
    f = torch.linspace(1e-4, bands - 1, bands, dtype=torch.float64)[None, :]
    z = torch.exp(-1j * f * w)
    h = torch.cat([t, z.real, z.imag], -1)
    freq = P[f"{prefix}freq"]
    for j in range(3):
        h = torch.sin(freq * linear(h, P, f"{prefix}mlp.{j}"))
    h = linear(h, P, f"{prefix}mlp.3", bias=False)
    if cfg["modulate"]:
        deltas = torch.linspace(math.log(1e-2) / 1.5, math.log(1e-2) / 0.3, d, dtype=torch.float64)
        h = h * torch.exp(-t * deltas.abs())
    return h


def long_conv(v, h, D):
    """y[b, t, c] = sum_{s <= t} h[t - s, c] v[b, s, c] + D[c] v[b, t, c], as a dense sum over lags."""
    L = v.shape[1]
    y = v * D
    for lag in range(L):
        y = y + F.pad(v[:, :L - lag], (0, 0, lag, 0)) * h[lag]
    return y


def hyena_operator(cfg, P, prefix, x, filters=None):
    """safari's HyenaOperator.forward, order 2: Conv1d(3d, 3d, k, padding=k-1,
    groups=3d)[..., :L] is the causal depthwise conv written out below.
    ``filters[prefix]`` (L x d, the skip D folded into lag 0), when given,
    replaces the implicit filter and D (a distilled model's kernels)."""
    B, L, d = x.shape
    u = linear(x, P, f"{prefix}in_proj")
    wgt, k = P[f"{prefix}short_filter.weight"], cfg["short_filter"]
    padded = F.pad(u, (0, 0, k - 1, 0))
    u = sum(wgt[:, 0, j] * padded[:, j:j + L] for j in range(k)) + P[f"{prefix}short_filter.bias"]
    x0, x1, v = u.split(d, -1)
    if filters is None:
        v = long_conv(v * x1, implicit_filter(cfg, P, f"{prefix}filter.", L, d), P[f"{prefix}filter.D"])
    else:
        v = long_conv(v * x1, filters[prefix][:L], torch.zeros(d, dtype=torch.float64))
    return linear(v * x0, P, f"{prefix}out_proj")


def hyena_block(cfg, P, name, x, filters=None):
    h = x + hyena_operator(cfg, P, f"{name}.mixer.", layer_norm(x, P, f"{name}.mixer_norm"), filters)
    return h + linear(gelu(linear(layer_norm(h, P, f"{name}.ffn_norm"), P, f"{name}.ffn_in")), P, f"{name}.ffn_out")


def reference_logits(cfg, P, ids, filters=None):
    h = P["embed.weight"][ids]
    for i in range(cfg["n_layers"]):
        h = hyena_block(cfg, P, f"blocks.{i}", h, filters)
    if cfg["final_norm"]:
        h = layer_norm(h, P, "final_norm")
    return h @ (P["embed.weight"] if cfg["tie_embeddings"] else P["head.weight"]).T


# ---- The comparisons -------------------------------------------------------

VARIANTS = {
    "authors": {},
    "safari": {"init": "safari", "final_norm": True, "tie_embeddings": True},
    "unmodulated": {"modulate": False},
    "assoc_recall_filter": {"emb_dim": 5, "filter_order": 16, "filter_sin_freq": 10.0},
    "short4_mlp2": {"short_filter": 4, "ffn_mult": 2},
}


def randomised(module):
    """Every tensor random (zero biases or unit norms would hide a dropped
    term), loaded into the module; returns float64 leaves for the reference."""
    with torch.no_grad():
        state = {k: torch.randn_like(v) * (0.5 if v.dim() > 1 else 1.0) for k, v in module.state_dict().items()}
    module.load_state_dict(state)
    return {k: v.clone().requires_grad_() for k, v in state.items()}


def compare(module, P, got, expected, what):
    """Output within the float64 tolerance; then the gradients of a fixed
    random projection of it, each parameter's against its own scale."""
    assert rel_err(got, expected) <= F64, f"{what}: output rel err {rel_err(got, expected):.3g}"
    weight = torch.randn(got.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    (got * weight).sum().backward()
    (expected * weight).sum().backward()
    names = [n for n, p in module.named_parameters()]
    assert names and set(names) <= set(P)
    for n, p in module.named_parameters():
        assert p.grad is not None and P[n].grad is not None, n
        err = rel_err(p.grad, P[n].grad)
        assert err <= F64, f"{what}: gradient of {n}: rel err {err:.3g}"


def test_default_config_is_the_authors_table():
    model = tmm.models.build(SIZES)
    for key, value in AUTHORS.items():
        assert model.config[key] == value, f"{key}: {model.config[key]!r}, the authors' {value!r}"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_model_matches_the_formulas(variant):
    cfg = {**SIZES, **AUTHORS, **VARIANTS[variant]}
    torch.manual_seed(0)
    model = tmm.models.build({**SIZES, **VARIANTS[variant]}).to(torch.float64).eval()
    P = randomised(model)
    ids = torch.randint(0, SIZES["vocab_size"], (2, 13), generator=torch.Generator().manual_seed(3))
    compare(model, P, model(ids), reference_logits(cfg, P, ids), variant)


@pytest.mark.parametrize("modulate", [True, False], ids=["modulated", "unmodulated"])
def test_drop_in_operator_matches_the_formulas(modulate):
    """tmm.nn.HyenaOperator with safari's constructor arguments, its defaults
    the authors' (short filter 3, filter order 64, emb_dim 3, w 1)."""
    cfg = {**AUTHORS, "max_len": 30, "modulate": modulate}
    torch.manual_seed(0)
    op = HyenaOperator(6, 30, modulate=modulate).to(torch.float64)
    assert (op.short_filter.weight.shape[2], op.filter.mlp[0].in_features, op.filter.mlp[0].out_features, float(op.filter.freq[0])) \
        == (AUTHORS["short_filter"], AUTHORS["emb_dim"], AUTHORS["filter_order"], AUTHORS["filter_sin_freq"])
    P = randomised(op)
    x = torch.randn(3, 17, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5), requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    compare(op, P, op(x), hyena_operator(cfg, P, "", xr), "HyenaOperator")
    assert rel_err(x.grad, xr.grad) <= F64, f"input gradient: {rel_err(x.grad, xr.grad):.3g}"
