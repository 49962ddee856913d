"""A language model around any token mixer, in the manner of Zoology: an
embedding, n_layers MixerBlocks (a mixer and an FFN, each pre-norm
residual), an optional final norm and a linear head; the zoo TMM's skeleton
and init (tmm.models.build gives the zoo's own models)."""
import importlib

import torch
from torch import nn

from .cpp_config import adopt, initial_values
from .language_model import LanguageModel
from .layers import make_norm
from .mixer_block import MixerBlock, block_config
from .outputs import ModelConfig

# The per-layer values SequenceModel can give a mixer factory, each under the
# keyword it is passed as: the sequence length under the three names mixers
# use for it, the block's index, the depth, and where the parameters go.
MIXER_INPUTS = ("max_len", "l_max", "seq_len", "layer_idx", "n_layers", "device", "dtype")
# The keys of a "mixer" config (SequenceModel.from_mixer_config): the mixer, the sizes, then SequenceModel's options.
MIXER_CONFIG_KEYS = ("mixer", "vocab_size", "d_model", "n_layers", "max_len", "mixer_kwargs", "mixer_inputs",
                     "ffn_mult", "activation", "block_order", "norm", "final_norm", "dropout", "tie_embeddings", "init")


def resolve_mixer_factory(factory):
    """A callable, or the import path of one ("pkg.module.Name" or
    "pkg.module:Name"); a clear error when the path does not resolve."""
    if callable(factory):
        return factory
    if not isinstance(factory, str) or not factory:
        raise TypeError(f"mixer_factory: expected a callable or an import path, got {type(factory).__name__}")
    module_name, _, attr = factory.partition(":") if ":" in factory else factory.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"mixer_factory: expected an import path like 'my_pkg.MyMixer', got {factory!r}")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(f"mixer_factory {factory!r}: cannot import module '{module_name}': {e}") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportError(f"mixer_factory {factory!r}: module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"mixer_factory {factory!r}: '{attr}' is a {type(obj).__name__}, not callable")
    return obj


def _factory_name(factory):
    return getattr(factory, "__qualname__", None) or getattr(factory, "__name__", None) or repr(factory)


def mixer_inputs_for(factory, mixer_inputs, mixer_kwargs):
    """The names (of MIXER_INPUTS) of the per-layer values ``factory`` is
    called with: ``mixer_inputs`` when given, else the factory's own
    ``mixer_inputs`` attribute less what ``mixer_kwargs`` sets, else none."""
    explicit = mixer_inputs is not None
    names = mixer_inputs if explicit else getattr(factory, "mixer_inputs", ())
    where = "mixer_inputs" if explicit else f"mixer_inputs (the attribute of {_factory_name(factory)})"
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{where}: expected a list of names out of {', '.join(MIXER_INPUTS)}, got {names!r}")
    unknown = [n for n in names if n not in MIXER_INPUTS]
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"{where}: got {list(names)!r}: "
                         + (f"{', '.join(map(repr, unknown))} not allowed" if unknown else "a name twice")
                         + f" (allowed, each once: {', '.join(MIXER_INPUTS)})")
    given_twice = [n for n in names if n in mixer_kwargs]
    if explicit and given_twice:  # which value would the factory get? neither silently
        raise ValueError(f"mixer_inputs: {', '.join(map(repr, given_twice))} also set in mixer_kwargs; "
                         "name each in one of the two")
    return tuple(n for n in names if n not in given_twice)


def build_mixer(factory, d_model, mixer_kwargs, mixer_inputs, values):
    """factory(d_model, **mixer_kwargs) plus the per-layer ``values`` that
    ``mixer_inputs`` names."""
    kwargs = {**mixer_kwargs, **{n: values[n] for n in mixer_inputs}}
    try:
        mixer = factory(d_model, **kwargs)
    except TypeError as e:
        raise TypeError(f"mixer_factory {_factory_name(factory)!r}, called with d_model and "
                        f"{', '.join(kwargs) or 'nothing else'}: {e}. The per-layer values it gets are the ones "
                        f"mixer_inputs names ({', '.join(mixer_inputs) or 'none'}; allowed: "
                        f"{', '.join(MIXER_INPUTS)}), the rest come from mixer_kwargs") from e
    if not isinstance(mixer, nn.Module):
        raise TypeError(f"mixer_factory {_factory_name(factory)!r} returned a {type(mixer).__name__}, "
                        "not an nn.Module")
    return mixer


class SequenceModel(LanguageModel):
    """embed -> n_layers x MixerBlock(mixer_factory(d_model, ...)) -> [final
    norm] -> head: B x L int64 token ids -> logits B x L x V.

    ``mixer_factory``: a callable or import path building one mixer module
    (B x L x d -> B x L x d) per layer, called as ``factory(d_model,
    **mixer_kwargs)`` plus the per-layer values ``mixer_inputs`` names, each
    as a keyword (MIXER_INPUTS: the length as ``max_len``, ``l_max`` or
    ``seq_len``, ``layer_idx``, ``n_layers``, ``device``, ``dtype``); by
    default the factory's own ``mixer_inputs`` attribute. The block options
    are MixerBlock's, with the zoo TMM's defaults and init (FFN first,
    LayerNorm, no final norm, untied head); Zoology's layout is
    ``block_order="mixer_first", final_norm=True``. Names: embed.weight,
    blocks.<i>.{ffn_norm, ffn_in, ffn_out, mixer_norm, mixer}.*,
    final_norm.*, head.weight (absent when tied).
    """

    def __init__(self, mixer_factory, vocab_size, d_model, n_layers, max_len, *, mixer_kwargs=None,
                 mixer_inputs=None, ffn_mult=None, activation=None, block_order=None, norm=None, final_norm=None,
                 dropout=None, tie_embeddings=None, init=None, device=None, dtype=None):
        c = block_config("SequenceModel", d_model, max_len, n_layers, {
            "vocab_size": vocab_size, "ffn_mult": ffn_mult, "activation": activation, "block_order": block_order,
            "norm": norm, "final_norm": final_norm, "dropout": dropout, "tie_embeddings": tie_embeddings,
            "init": init})
        factory = resolve_mixer_factory(mixer_factory)
        mixer_kwargs = dict(mixer_kwargs or {})
        inputs = mixer_inputs_for(factory, mixer_inputs, mixer_kwargs)
        kw = {"device": device, "dtype": dtype}
        blocks = [MixerBlock(d_model, mixer=build_mixer(factory, d_model, mixer_kwargs, inputs, {
            "max_len": max_len, "l_max": max_len, "seq_len": max_len, "layer_idx": i, "n_layers": n_layers, **kw}),
            ffn_mult=c["ffn_mult"], activation=c["activation"], block_order=c["block_order"], norm=c["norm"],
            dropout=c["dropout"], init=c["init"], n_layers=max(n_layers, 1), **kw) for i in range(n_layers)]
        with torch.device("meta"):
            norm_module = make_norm(c["norm"], d_model) if c["final_norm"] else None
        super().__init__(c["vocab_size"], d_model, c["max_len"], blocks, norm_module,
                         tie_embeddings=c["tie_embeddings"])
        self._config, self.mixer_inputs = c, inputs
        if torch.device(device or "cpu").type != "meta":  # the zoo TMM's embedding, final norm and head
            values = initial_values({**c, "n_layers": 0}, "model")
            for name in ("embed", "final_norm", "head"):
                if getattr(self, name, None) is not None:
                    adopt(getattr(self, name), {k[len(name) + 1:]: v for k, v in values.items()
                                                if k.startswith(name + ".")}, device, dtype)

    @classmethod
    def from_mixer_config(cls, config, device=None, dtype=None):
        """A SequenceModel from a config dict with "arch": "mixer": "mixer"
        (an import path), optional "mixer_kwargs" and "mixer_inputs", the
        sizes vocab_size, d_model, n_layers, max_len, and optionally the
        block options (MIXER_CONFIG_KEYS). How the comparison script builds a
        user's mixer into the zoo's skeleton; ``model.config`` gives it back,
        every key filled in."""
        if not isinstance(config, dict) or config.get("arch") != "mixer":
            raise ValueError("SequenceModel.from_mixer_config: expected a dict with \"arch\": \"mixer\"")
        unknown = sorted(set(config) - set(MIXER_CONFIG_KEYS) - {"arch"})
        if unknown:
            raise ValueError(f"mixer config: unknown key(s) {', '.join(map(repr, unknown))} "
                             f"(known: {', '.join(MIXER_CONFIG_KEYS)})")
        missing = [k for k in ("mixer", "vocab_size", "d_model", "n_layers", "max_len") if k not in config]
        if missing:
            raise ValueError(f"mixer config: missing key(s) {', '.join(map(repr, missing))}")
        if not isinstance(config.get("mixer_kwargs", {}), dict):
            raise ValueError(f"mixer config: \"mixer_kwargs\" must be an object, got {config['mixer_kwargs']!r}")
        options = {k: config[k] for k in MIXER_CONFIG_KEYS[MIXER_CONFIG_KEYS.index("mixer_kwargs"):] if k in config}
        model = cls(config["mixer"], config["vocab_size"], config["d_model"], config["n_layers"], config["max_len"],
                    device=device, dtype=dtype, **options)
        filled = {**model._config, "mixer": config["mixer"], "mixer_kwargs": config.get("mixer_kwargs", {}),
                  "mixer_inputs": list(model.mixer_inputs)}
        model.config = ModelConfig(arch="mixer", **{k: filled[k] for k in MIXER_CONFIG_KEYS})
        return model
