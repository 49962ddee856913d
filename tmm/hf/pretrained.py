"""from_pretrained / save_pretrained / convert: a HF directory <-> a zoo model."""
import json
import os

from .. import _build_info, models  # _build_info: the version tmm.__version__ is set from
from . import llama, mamba2, model_files, native
from ._errors import unsupported
from ._transformers import require_transformers

_HF_ARCHS = {llama.MODEL_TYPE: llama, mamba2.MODEL_TYPE: mamba2}  # model_type -> its module
_TMM_TO_HF = {"transformer": llama, "mamba2": mamba2}  # tmm arch -> its module
_IGNORED = ("rotary_emb.inv_freq",)  # non-persistent buffers some older Llama checkpoints hold


def _read_hf_config(module, path, raw, where):
    arch = raw.get("architectures")
    if arch is not None and module.ARCHITECTURE not in arch:
        unsupported(where, "architectures", arch, f'["{module.ARCHITECTURE}"] (a causal LM)')
    transformers = require_transformers(f"reading a {module.ARCHITECTURE} config")
    config_class = transformers.AutoConfig.for_model(module.MODEL_TYPE).__class__
    try:
        return config_class.from_pretrained(os.fspath(path))
    except (OSError, ImportError):
        raise
    except Exception as e:  # transformers' own validation (e.g. Mamba2's num_heads), of several classes
        raise ValueError(f"{where}: transformers refuses it: {e}") from None


def _load_weights(model, names, tensors, where):
    """Copies HF ``tensors`` into ``model`` through ``names`` ({tmm: HF}),
    after checking that every one is there and none is left over."""
    missing = sorted(hf for hf in names.values() if hf not in tensors)
    if missing:
        raise ValueError(f"{where}: missing tensor(s) {missing} ({len(missing)} of {len(names)})")
    used = set(names.values())
    if model.config.get("tie_embeddings", False):
        used.add("lm_head.weight")  # HF may store the tied head; it is the embedding
    extra = sorted(n for n in tensors if n not in used and not n.endswith(_IGNORED))
    if extra:
        raise ValueError(f"{where}: unexpected tensor(s) {extra}: the config describes a model without them "
                         "(e.g. biases that tmm's model does not have)")
    model.load_state_dict({ours: tensors[theirs] for ours, theirs in names.items()})


def from_pretrained(path, max_len=None, device=None, dtype=None):
    """The zoo model of a local HF directory ``path``: ``LlamaForCausalLM``
    (as tmm's Transformer), ``Mamba2ForCausalLM`` (as tmm's Mamba2), tmm's
    own layout (``TMMForCausalLM``, ``HyenaForCausalLM``), or a plain tmm
    checkpoint. ``max_len``: the tmm model's context (default: Llama's
    ``max_position_embeddings``; Mamba2, which has none: 2048). The model
    comes in float32 on the CPU unless ``device`` / ``dtype`` say otherwise;
    ``model.save(dir)`` then writes a checkpoint the C++ side loads.
    A config tmm cannot compute is a ValueError naming the key."""
    path = model_files.model_dir(path)
    raw = model_files.read_config(path)
    where = f"tmm.hf.from_pretrained('{path}'): {model_files.CONFIG}"  # errors about its keys
    model_type = raw.get("model_type")
    if model_type is None and "arch" in raw:  # a tmm checkpoint (model.save, C++ save_checkpoint)
        return models.load(path, device=device, dtype=dtype)
    if model_type in native.ARCHITECTURES:
        config = native.tmm_config(raw, where)
        if max_len is not None:
            raise ValueError(f"tmm.hf.from_pretrained: max_len={max_len} applies to Llama and Mamba2 imports; a "
                             f"{model_type} model's max_len is its config's (it sizes the weights)")
        model = models.build(config)
        model.load_state_dict(model_files.read_weights(path))
    elif model_type in _HF_ARCHS:
        module = _HF_ARCHS[model_type]
        config = module.tmm_config(_read_hf_config(module, path, raw, where), raw, where, max_len)
        model = models.build(config)
        weights_where = f"tmm.hf.from_pretrained('{path}'): the weights"
        _load_weights(model, module.hf_names(model.config), model_files.read_weights(path), weights_where)
    else:
        known = sorted(_HF_ARCHS) + sorted(native.ARCHITECTURES)
        unsupported(where, "model_type", model_type, f"one of {known}")
    if device is not None or dtype is not None:
        model.to(device=device, dtype=dtype)
    return model.eval()


def save_pretrained(model, path, tokenizer=None):
    """Writes a zoo model as a HF directory: config.json + model.safetensors
    (each replaced atomically); a Transformer as ``LlamaForCausalLM`` and a
    Mamba2 as ``Mamba2ForCausalLM`` (``transformers.AutoModelForCausalLM``
    loads both), a TMM or Hyena in tmm's own layout (:mod:`tmm.hf.native`).
    ``tokenizer``: a tokenizer.json path or a ``tokenizers.Tokenizer``,
    written beside them. Tensors keep their dtype."""
    config = getattr(model, "config", None)
    arch = config.get("arch") if isinstance(config, dict) else None
    if arch is None:
        raise TypeError(f"save_pretrained: expected a tmm.models model (with a config naming its arch), "
                        f"got {type(model).__name__}")
    state = model.state_dict()
    if arch in _TMM_TO_HF:
        module = _TMM_TO_HF[arch]
        hf_config = module.hf_config(config)
        hf_config.dtype = str(state["embed.weight"].dtype).removeprefix("torch.")
        tensors = {theirs: state[ours] for ours, theirs in module.hf_names(config).items()}
        model_files.write(path, hf_config.to_json_string(), tensors, {"format": "pt"}, tokenizer)
    elif arch in native.ARCHITECTURES:
        version = _build_info.version
        text = json.dumps(native.hf_config(dict(config), version), indent=2) + "\n"
        model_files.write(path, text, state, {"format": "pt", "arch": arch, "tmm_version": version}, tokenizer)
    else:
        raise ValueError(f"save_pretrained: arch \"{arch}\" has no HF layout (known: "
                         f"{sorted(_TMM_TO_HF) + sorted(native.ARCHITECTURES)})")


def convert(hf_path, out_dir, max_len=None):
    """A HF directory -> a tmm checkpoint (config.json + model.safetensors,
    what C++ ``load_checkpoint`` and the CLI read), with the HF directory's
    tokenizer.json copied when it has one (the CLI's ``generate`` uses it).
    Returns the model."""
    model = from_pretrained(hf_path, max_len=max_len)
    model.save(out_dir)
    tokenizer = model_files.model_dir(hf_path) / model_files.TOKENIZER
    if tokenizer.is_file():
        from ..files import atomic_write_bytes

        atomic_write_bytes(os.path.join(out_dir, model_files.TOKENIZER), tokenizer.read_bytes())
    return model

