"""tmm's Transformer <-> HF ``LlamaForCausalLM``: the config keys and the one
weight-name map (tests/python/test_transformer_parity.py uses it too).

tmm's Transformer is Llama's computation (RMSNorm, RoPE rotate-half, SwiGLU,
no biases), so only the names differ; every Llama option tmm cannot compute
is refused, naming the key, rather than imported as something else."""
from ._errors import unsupported

ARCHITECTURE = "LlamaForCausalLM"
MODEL_TYPE = "llama"

# tmm name in block i -> HF name in layer i (w1 = gate, w3 = up, w2 = down).
_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn.wq.weight": "self_attn.q_proj.weight",
    "attn.wk.weight": "self_attn.k_proj.weight",
    "attn.wv.weight": "self_attn.v_proj.weight",
    "attn.wo.weight": "self_attn.o_proj.weight",
    "mlp_norm.weight": "post_attention_layernorm.weight",
    "mlp.w1.weight": "mlp.gate_proj.weight",
    "mlp.w3.weight": "mlp.up_proj.weight",
    "mlp.w2.weight": "mlp.down_proj.weight",
}


def hf_names(config):
    """{tmm name: HF name} for every tensor of a tmm Transformer of
    ``config`` (a tied model has no head.weight: HF's lm_head is the embedding)."""
    names = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    if not config.get("tie_embeddings", False):
        names["head.weight"] = "lm_head.weight"
    for i in range(config["n_layers"]):
        for ours, theirs in _BLOCK.items():
            names[f"blocks.{i}.{ours}"] = f"model.layers.{i}.{theirs}"
    return names


def _rope_theta(hf, raw, where):
    """The RoPE base of the default RoPE; any other kind is refused."""
    scaling = raw.get("rope_scaling")
    if scaling is not None and (not isinstance(scaling, dict)
                                or scaling.get("rope_type", scaling.get("type")) != "default"):
        unsupported(where, "rope_scaling", scaling, "null (tmm's Transformer has the default RoPE only)")
    params = getattr(hf, "rope_parameters", None) or {}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        unsupported(where, "rope_parameters.rope_type", kind, '"default" (tmm has no RoPE scaling)')
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        unsupported(where, "rope_parameters.partial_rotary_factor", params["partial_rotary_factor"], "1.0")
    theta = params.get("rope_theta", raw.get("rope_theta", getattr(hf, "rope_theta", None)))
    if theta is None:
        unsupported(where, "rope_parameters.rope_theta", None, "a number")
    return float(theta)


def tmm_config(hf, raw, where, max_len=None):
    """The tmm config of a ``transformers.LlamaConfig`` ``hf`` (``raw``: its
    config.json as read, for keys transformers rewrites on load)."""
    if hf.hidden_act != "silu":
        unsupported(where, "hidden_act", hf.hidden_act, '"silu" (SwiGLU)')
    for key in ("attention_bias", "mlp_bias"):
        if getattr(hf, key, False):
            unsupported(where, key, True, "false (tmm's Transformer has no biases)")
    if getattr(hf, "pretraining_tp", 1) not in (None, 1):
        unsupported(where, "pretraining_tp", hf.pretraining_tp, "1")
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    return {
        "arch": "transformer",
        "vocab_size": hf.vocab_size,
        "d_model": hf.hidden_size,
        "n_layers": hf.num_hidden_layers,
        "n_heads": hf.num_attention_heads,
        "n_kv_heads": hf.num_key_value_heads or hf.num_attention_heads,
        "head_dim": head_dim,
        "norm_eps": float(hf.rms_norm_eps),
        "rope_theta": _rope_theta(hf, raw, where),
        "ffn_hidden": hf.intermediate_size,
        "max_len": int(max_len or hf.max_position_embeddings),
        "tie_embeddings": bool(hf.tie_word_embeddings),
        "init": "llama",
    }


def hf_config(config):
    """The ``transformers.LlamaConfig`` of a tmm Transformer config; a sliding
    window (not Llama's) is refused."""
    from ._transformers import require_transformers

    if config.get("window", 0):
        unsupported("save_pretrained", "window", config["window"], "0 (LlamaForCausalLM has no sliding window)")
    transformers = require_transformers("writing a Transformer as LlamaForCausalLM")
    return transformers.LlamaConfig(
        vocab_size=config["vocab_size"], hidden_size=config["d_model"], intermediate_size=config["ffn_hidden"],
        num_hidden_layers=config["n_layers"], num_attention_heads=config["n_heads"],
        num_key_value_heads=config["n_kv_heads"] or config["n_heads"], head_dim=config["head_dim"],
        rms_norm_eps=config["norm_eps"], max_position_embeddings=config["max_len"],
        rope_parameters={"rope_type": "default", "rope_theta": float(config["rope_theta"])},
        tie_word_embeddings=bool(config.get("tie_embeddings", False)), hidden_act="silu",
        attention_bias=False, mlp_bias=False, architectures=[ARCHITECTURE],
    )
