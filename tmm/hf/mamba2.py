"""tmm's Mamba2 <-> HF ``Mamba2ForCausalLM``: the config keys and the one
weight-name map (tests/python/test_mamba2_parity.py uses it too).

The mixer's names are mamba_ssm's in both; only the LM's differ
(backbone.embeddings -> embed, backbone.layers -> blocks, backbone.norm_f ->
norm, lm_head -> head). HF options tmm does not compute are refused, naming
the key."""
import math

from .. import _C
from ._errors import unsupported

ARCHITECTURE = "Mamba2ForCausalLM"
MODEL_TYPE = "mamba2"
DEFAULT_MAX_LEN = 2048  # HF's Mamba2 has no length limit; tmm's config needs one (from_pretrained(max_len=...))
NORM_EPS = _C._norm_eps()["mamba2"]  # tmm's Mamba2 RMSNorms (block, gated, final)

_BLOCK = ["norm.weight", "mixer.in_proj.weight", "mixer.conv1d.weight", "mixer.conv1d.bias", "mixer.dt_bias",
          "mixer.A_log", "mixer.D", "mixer.norm.weight", "mixer.out_proj.weight"]


def hf_names(config):
    """{tmm name: HF name} for every tensor of a tmm Mamba2 of ``config``."""
    if config.get("d_intermediate", 0):
        unsupported("Mamba2", "d_intermediate", config["d_intermediate"], "0 (Mamba2ForCausalLM has no MLP)")
    names = {"embed.weight": "backbone.embeddings.weight", "norm.weight": "backbone.norm_f.weight"}
    if not config.get("tie_embeddings", False):
        names["head.weight"] = "lm_head.weight"
    for i in range(config["n_layers"]):
        for name in _BLOCK:
            names[f"blocks.{i}.{name}"] = f"backbone.layers.{i}.{name}"
    return names


def tmm_config(hf, raw, where, max_len=None):
    """The tmm config of a ``transformers.Mamba2Config`` ``hf``."""
    d_inner = hf.expand * hf.hidden_size
    if hf.num_heads * hf.head_dim != d_inner:
        unsupported(where, "num_heads", hf.num_heads,
                    f"expand * hidden_size / head_dim = {d_inner} / {hf.head_dim} (tmm's heads fill d_inner)")
    if hf.use_bias:
        unsupported(where, "use_bias", True, "false (tmm's Mamba2 projections have no bias)")
    if not hf.use_conv_bias:
        unsupported(where, "use_conv_bias", False, "true (tmm's Mamba2 conv has a bias)")
    if hf.hidden_act != "silu":
        unsupported(where, "hidden_act", hf.hidden_act, '"silu"')
    if not math.isclose(hf.layer_norm_epsilon, NORM_EPS, rel_tol=1e-9):
        unsupported(where, "layer_norm_epsilon", hf.layer_norm_epsilon, f"{NORM_EPS} (tmm's Mamba2 RMSNorm eps)")
    limit = tuple(float(v) for v in hf.time_step_limit)
    if limit != (0.0, math.inf):
        unsupported(where, "time_step_limit", list(hf.time_step_limit), "[0.0, inf] (tmm does not clamp dt)")
    for key in ("rms_norm", "norm_before_gate"):  # older configs; HF's model has the gated norm after the gate
        if key in raw and raw[key] != (key == "rms_norm"):
            unsupported(where, key, raw[key], str(key == "rms_norm").lower())
    return {
        "arch": "mamba2",
        "vocab_size": hf.vocab_size,
        "d_model": hf.hidden_size,
        "n_layers": hf.num_hidden_layers,
        "max_len": int(max_len or DEFAULT_MAX_LEN),
        "d_state": hf.state_size,
        "d_conv": hf.conv_kernel,
        "expand": hf.expand,
        "headdim": hf.head_dim,
        "ngroups": hf.n_groups,
        "chunk_size": hf.chunk_size,
        "d_intermediate": 0,
        "tie_embeddings": bool(hf.tie_word_embeddings),
    }


def hf_config(config):
    """The ``transformers.Mamba2Config`` of a tmm Mamba2 config."""
    from ._transformers import require_transformers

    if config.get("d_intermediate", 0):
        unsupported("save_pretrained", "d_intermediate", config["d_intermediate"], "0 (Mamba2ForCausalLM has no MLP)")
    transformers = require_transformers("writing a Mamba2 as Mamba2ForCausalLM")
    d_inner = config["expand"] * config["d_model"]
    return transformers.Mamba2Config(
        vocab_size=config["vocab_size"], hidden_size=config["d_model"], num_hidden_layers=config["n_layers"],
        state_size=config["d_state"], conv_kernel=config["d_conv"], expand=config["expand"],
        head_dim=config["headdim"], num_heads=d_inner // config["headdim"], n_groups=config["ngroups"],
        chunk_size=config["chunk_size"], use_bias=False, use_conv_bias=True, hidden_act="silu",
        layer_norm_epsilon=NORM_EPS, tie_word_embeddings=bool(config.get("tie_embeddings", False)),
        architectures=[ARCHITECTURE],
    )
