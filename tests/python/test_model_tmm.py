"""TMM against an independent pure-PyTorch rendering of the formulas of docs/models.md:
the whole forward (embedding, blocks with the feed-forward first, Toeplitz
mixing written with explicit masked Toeplitz matrices), in float64, for the
flat, multi-head and kernel variants."""
import pytest
import torch
import torch.nn.functional as F

import tmm


def toeplitz_mix(x, weight, bias):
    """y[b,t,c] = sum_i sum_{s<=t} w[g,i,t-s] x[b,s,c-(K-1)+i] + beta[g,t],
    sources outside the channel's group count as zero (docs/models.md)."""
    B, L, C = x.shape
    G, K, _ = weight.shape
    cg = C // G
    lag = torch.arange(L)[:, None] - torch.arange(L)[None, :]
    y = torch.zeros_like(x)
    for c in range(C):
        g = c // cg
        for i in range(K):
            src = c - (K - 1) + i
            if src < g * cg:
                continue
            T = torch.where(lag >= 0, weight[g, i][lag.clamp(min=0)], torch.zeros(()).double())
            y[:, :, c] += x[:, :, src] @ T.T
        y[:, :, c] += bias[g, :L]
    return y


def reference_hidden(model, ids):
    cfg = model.config
    P = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    d = cfg["d_model"]
    h = F.embedding(ids, P["embed.weight"])
    for i in range(cfg["n_layers"]):
        p = lambda name: P[f"blocks.{i}.{name}"]  # noqa: E731
        norm = lambda x, n: F.layer_norm(x, (d,), p(f"{n}.weight"), p(f"{n}.bias"))  # noqa: E731
        ffn = F.linear(F.silu(F.linear(norm(h, "ffn_norm"), p("ffn_in.weight"), p("ffn_in.bias"))),
                       p("ffn_out.weight"), p("ffn_out.bias"))
        h = h + ffn
        x = norm(h, "mixer_norm")
        if cfg["heads"]:
            x = F.linear(x, p("mixer.in_proj.weight"), p("mixer.in_proj.bias"))
        x = toeplitz_mix(x, p("mixer.weight"), p("mixer.bias"))
        if cfg["heads"]:
            x = F.linear(x, p("mixer.out_proj.weight"), p("mixer.out_proj.bias"))
        h = h + x
    return h


@pytest.mark.parametrize("variant", [{"heads": 0}, {"heads": 4}, {"kernel": 3}, {"heads": 2, "kernel": 2}])
def test_tmm_matches_the_formulas(variant):
    torch.manual_seed(0)
    config = {"arch": "tmm", "vocab_size": 40, "d_model": 8, "n_layers": 2, "max_len": 24, **variant}
    model = tmm.models.build(config).to(torch.float64)
    ids = torch.randint(40, (2, 19))
    out = model(ids, return_hidden=True)
    expected = reference_hidden(model, ids)
    assert torch.allclose(out.hidden, expected, rtol=1e-10, atol=1e-10)
    assert torch.allclose(out.logits, F.linear(expected, dict(model.named_parameters())["head.weight"]),
                          rtol=1e-10, atol=1e-10)
