"""tmm.train.flops_per_token against a count taken from each model's own
layer shapes: the formula reads the config, the count below reads the built
model's parameters (and, for what has no shape, its resolved config), so a
formula that misreads a config key, a default or a layer's width fails here.

The count follows the estimate's stated conventions (docs/training.md, section 7): forward
FLOPs per token are 2 per parameter applied to every token (the input
embedding lookup and TMM's Toeplitz vectors excluded) plus the sequence
mixing, and training is 3x the forward."""
import math

import pytest
import torch

import tmm.models
from lab.experiments.model_configs import read_config
from tmm.train import flops_per_token


def _rfft(L):
    """A real FFT of the smallest power of two (>= 4) holding a causal convolution of length L."""
    n = 4
    while n < 2 * L - 1:
        n *= 2
    return 2.5 * n * math.log2(n)


def _causal_pairs(L, window=0):
    """(query, key) pairs a causal attention of length L attends to, counted on its mask."""
    t = torch.arange(L)
    lag = t[:, None] - t[None, :]
    mask = lag >= 0
    if window:
        mask &= lag < window
    return int(mask.sum())


def counted(model, L):
    """Training FLOPs per token of ``model`` at sequence length L, from its layer shapes."""
    cfg = model.config
    params = dict(model.named_parameters())
    state = model.state_dict()
    weights = sum(p.numel() for p in params.values())
    if "head.weight" in params:  # untied: the embedding table is only looked up
        weights -= params["embed.weight"].numel()
    mix = 0.0
    for i in range(cfg["n_layers"]):
        b = f"blocks.{i}."
        if cfg["arch"] == "transformer":
            width = params[b + "attn.wq.weight"].shape[0]  # n_heads x head_dim
            mix += 2 * 2 * _causal_pairs(L, cfg["window"]) / L * width  # Q K^T, then A V
        elif cfg["arch"] == "tmm":
            channels = params["embed.weight"].shape[1]
            for name in ("mixer.weight", "mixer.weight2"):
                if b + name not in state:
                    continue
                w = state[b + name]
                if b + name in params:  # trained vectors are mixing, not per-token weights
                    weights -= w.numel() + params[b + name.replace("weight", "bias")].numel()
                if cfg["mixer"] == "masked":
                    mix += 2 * _causal_pairs(L) / L * channels
                else:
                    G, K, _ = w.shape
                    mix += (2 * channels + G * K) * _rfft(L) / L
        elif cfg["arch"] == "hyena":
            filters = params[b + "mixer.filter.mlp.3.weight"].shape[0]  # one long filter per channel
            mix += (2 * filters + filters) * _rfft(L) / L
        elif cfg["arch"] == "mamba2":
            heads = params[b + "mixer.A_log"].numel()
            d_inner = params[b + "mixer.out_proj.weight"].shape[1]
            group_states = (params[b + "mixer.conv1d.weight"].shape[0] - d_inner) // 2  # ngroups x d_state (B; C alike)
            assert params[b + "mixer.in_proj.weight"].shape[0] == 2 * d_inner + 2 * group_states + heads
            Q = min(cfg["chunk_size"], L)
            # per chunk: C B^T once per group (Q x Q x d_state), its product with x per head (Q x Q x headdim),
            # each chunk's state and its read-out (Q x d_inner x d_state each): per token, 2 FLOPs a multiply-add
            mix += 2 * Q * group_states + 2 * Q * d_inner + 2 * 2 * d_inner * cfg["d_state"]
    return 3 * (2 * weights + mix)


def _config(name, **overrides):
    cfg, _ = read_config(name)
    cfg.update(overrides)
    return cfg


CASES = [
    ("tmm-tiny", {}, 64),
    ("tmm-tiny", {"heads": 0}, 64),
    ("tmm-tiny", {"heads": 0, "kernel": 4}, 64),
    ("tmm-tiny", {"mixer": "expanded"}, 64),
    ("tmm-tiny", {"mixer": "masked"}, 64),
    ("tmm-tiny", {"mixer": "frozen"}, 64),
    ("tmm-tiny", {"tie_embeddings": True}, 64),
    ("tmm-tiny", {"max_len": 48}, 48),  # L not a power of two: the transform rounds up
    ("transformer-tiny", {}, 64),
    ("transformer-tiny", {"window": 16}, 64),
    ("transformer-tiny", {"n_kv_heads": 2, "head_dim": 16}, 64),
    ("hyena-tiny", {}, 64),
    ("hyena-tiny", {"max_len": 100}, 100),
    ("mamba2-tiny", {}, 64),  # ngroups 2, 4 heads
    ("mamba2-tiny", {"ngroups": 1}, 64),
    ("mamba2-tiny", {"chunk_size": 128}, 64),  # a chunk longer than the sequence
    ("mamba2-tiny", {"d_intermediate": 64, "tie_embeddings": True}, 64),
    # the configs the claims compare (claim 1 at its vocabulary and context)
    ("tmm-cpu-small", {"vocab_size": 4096, "max_len": 256}, 256),
    ("transformer-cpu-small", {"vocab_size": 4096, "max_len": 256}, 256),
    ("hyena-cpu-small", {"vocab_size": 4096, "max_len": 256}, 256),
    ("mamba2-cpu-small", {"vocab_size": 4096, "max_len": 256}, 256),
]


@pytest.mark.parametrize("name, overrides, L", CASES, ids=[f"{n}-{o}" for n, o, _ in CASES])
def test_flops_formula_matches_a_count_from_the_layer_shapes(name, overrides, L):
    cfg = _config(name, **overrides)
    torch.manual_seed(0)
    model = tmm.models.build(cfg)
    assert flops_per_token(cfg, model.num_parameters(), L) == pytest.approx(counted(model, L), rel=1e-12)


def test_mamba2_scores_are_counted_once_per_group():
    # C B^T is shared by the heads of a group: more heads per group must not add to it
    one = _config("mamba2-tiny", ngroups=1)
    two = _config("mamba2-tiny", ngroups=2)
    n1, n2 = (tmm.models.build(c).num_parameters() for c in (one, two))
    Q, N, layers = one["chunk_size"], one["d_state"], one["n_layers"]
    extra_group = 3 * layers * 2 * Q * N + 6 * (n2 - n1)  # one more group's scores, and its B, C projections
    assert flops_per_token(two, n2, 64) - flops_per_token(one, n1, 64) == pytest.approx(extra_group)
