"""A language model around any token mixer, in the manner of Zoology: an
embedding, n_layers MixerBlocks (a mixer and an FFN, each pre-norm residual),
an optional final norm and a linear head. With a ToeplitzMixer it is the
zoo's TMM in plain Python, with the same tensor names (``from_config``)."""
import importlib
import json

import torch
import torch.utils.checkpoint
from torch import nn
from torch.nn import functional as F

from ..models.outputs import LMOutput, ModelConfig, shifted_labels
from ._cpp import load_initial_values, resolve
from .hyena import HyenaOperator
from .layers import make_norm
from .mixer_block import INIT_ARCH, MixerBlock, block_config
from .toeplitz_mixer import ToeplitzMixer


def resolve_mixer_factory(factory):
    """A callable, or the import path of one ("pkg.module.Name" or
    "pkg.module:Name"); a clear error when the path does not resolve."""
    if callable(factory):
        return factory
    if not isinstance(factory, str) or not factory:
        raise TypeError(f"mixer_factory: expected a callable or an import path, got {type(factory).__name__}")
    module_name, sep, attr = factory.partition(":") if ":" in factory else factory.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"mixer_factory: expected an import path like 'my_pkg.MyMixer', got {factory!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(f"mixer_factory {factory!r}: cannot import module '{module_name}': {e}") from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportError(f"mixer_factory {factory!r}: module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"mixer_factory {factory!r}: '{attr}' is a {type(obj).__name__}, not callable")
    return obj


# The per-layer values SequenceModel can give a mixer factory, each under the
# keyword it is passed as: the sequence length under the three names mixers
# use for it, the block's index, the depth, and where the parameters go.
MIXER_INPUTS = ("max_len", "l_max", "seq_len", "layer_idx", "n_layers", "device", "dtype")


def _factory_name(factory):
    return getattr(factory, "__qualname__", None) or getattr(factory, "__name__", None) or repr(factory)


def mixer_inputs_for(factory, mixer_inputs, mixer_kwargs):
    """The names (of :data:`MIXER_INPUTS`) of the per-layer values that
    ``factory`` is called with: ``mixer_inputs`` when given, else the
    factory's own ``mixer_inputs`` attribute less what ``mixer_kwargs`` sets
    (a value given there wins over a default), else none."""
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


def build_mixer(factory, d_model, mixer_kwargs, mixer_inputs, *, max_len, layer_idx, n_layers, device=None,
                dtype=None):
    """factory(d_model, **mixer_kwargs) with the per-layer values that
    ``mixer_inputs`` (the names :func:`mixer_inputs_for` resolves) name."""
    values = {"max_len": max_len, "l_max": max_len, "seq_len": max_len, "layer_idx": layer_idx,
              "n_layers": n_layers, "device": device, "dtype": dtype}
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


# The keys of a "mixer" config (SequenceModel.from_mixer_config): the mixer, the sizes, then SequenceModel's options.
MIXER_CONFIG_KEYS = ("mixer", "vocab_size", "d_model", "n_layers", "max_len", "mixer_kwargs", "mixer_inputs",
                     "ffn_mult", "activation", "block_order", "norm", "final_norm", "dropout", "tie_embeddings", "init")
_MIXER_CONFIG_OPTIONS = MIXER_CONFIG_KEYS[MIXER_CONFIG_KEYS.index("mixer_kwargs"):]
# The zoo architectures from_config builds in Python, and their mixers.
ZOO_MIXERS = {"tmm": ToeplitzMixer, "hyena": HyenaOperator}


class SequenceModel(nn.Module):
    """embed -> n_layers x MixerBlock(mixer_factory(d_model, ...)) -> [final
    norm] -> head: B x L int64 token ids -> logits B x L x V.

    ``mixer_factory``: a callable or import path building one mixer module
    (B x L x d -> B x L x d) per layer: called as ``factory(d_model,
    **mixer_kwargs)`` plus the per-layer values ``mixer_inputs`` names, each
    as a keyword: ``max_len``, ``l_max`` or ``seq_len`` (max_len, under the
    name the factory takes), ``layer_idx``, ``n_layers``, ``device``,
    ``dtype``. Its default is the factory's own ``mixer_inputs`` attribute
    (ToeplitzMixer's and HyenaOperator's name what they take), else none.
    The block options are MixerBlock's; the defaults are the zoo TMM's (FFN
    first, LayerNorm, no final norm, untied head); Zoology's layout is
    ``block_order="mixer_first", final_norm=True``. ``init`` (with the
    FFN's, MixerBlock's choices) is the embedding's and head's too: "kaiming"
    (TMM's: embedding N(0, 1), or N(0, 2/d) when tied, Kaiming head),
    "scaled" (as kaiming), "torch" (torch's defaults: Hyena's), "safari"
    (N(0, 0.02^2) embedding and head). ``registration``: MixerBlock's (the
    zoo Hyena registers each block's mixer first). Names: embed.weight,
    blocks.<i>.{ffn_norm, ffn_in, ffn_out, mixer_norm, mixer}.*,
    final_norm.* (with final_norm), head.weight (absent when tied).

    ``model(ids, labels=..., return_hidden=...)`` returns an LMOutput as the
    zoo's models do; ``shift_labels`` (attribute or argument) scores
    position t against labels[t+1], so ``labels=input_ids`` trains next-token
    prediction as in transformers.
    """

    def __init__(self, mixer_factory, vocab_size, d_model, n_layers, max_len, *, mixer_kwargs=None,
                 mixer_inputs=None, ffn_mult=None, activation=None, block_order=None, norm=None, final_norm=None,
                 dropout=None, tie_embeddings=None, shift_labels=False, init=None, registration="ffn_first",
                 device=None, dtype=None):
        super().__init__()
        # The options, as a zoo TMM config resolves them (None: its default).
        c = self._config = block_config("SequenceModel", d_model, max_len, n_layers, {
            "vocab_size": vocab_size, "ffn_mult": ffn_mult, "activation": activation, "block_order": block_order,
            "norm": norm, "final_norm": final_norm, "dropout": dropout, "tie_embeddings": tie_embeddings,
            "init": init})
        self._zoo_config = None  # from_config: the zoo config whose C++ model initialises this one
        self.init = c["init"]
        factory = resolve_mixer_factory(mixer_factory)
        mixer_kwargs = dict(mixer_kwargs or {})
        self.mixer_inputs = mixer_inputs_for(factory, mixer_inputs, mixer_kwargs)
        self.vocab_size, self.d_model, self.max_len = c["vocab_size"], c["d_model"], c["max_len"]
        self.tie_embeddings, self.shift_labels = c["tie_embeddings"], bool(shift_labels)
        kw = {"device": device, "dtype": dtype}
        self.embed = nn.Embedding(self.vocab_size, self.d_model, **kw)
        self.blocks = nn.ModuleList(
            MixerBlock(d_model, mixer=build_mixer(factory, d_model, mixer_kwargs, self.mixer_inputs, max_len=max_len,
                                                layer_idx=i, n_layers=n_layers, **kw),
                       ffn_mult=c["ffn_mult"], activation=c["activation"], block_order=c["block_order"],
                       norm=c["norm"], dropout=c["dropout"], init=self.init, n_layers=max(n_layers, 1),
                       registration=registration, **kw)
            for i in range(n_layers)
        )
        self.final_norm = make_norm(c["norm"], d_model, **kw) if c["final_norm"] else None
        self.head = None if self.tie_embeddings else nn.Linear(d_model, self.vocab_size, bias=False, **kw)
        self._reset_embed_and_head()

    def _reset_embed_and_head(self):
        """The embedding's, final norm's and head's init for ``init``: those of
        the C++ model of its architecture (with no blocks), freshly built."""
        c, arch = self._config, INIT_ARCH[self.init]
        if arch == "tmm":
            load_initial_values(self, {**c, "n_layers": 0}, "model", skip=("blocks.",))
            return
        hyena = {"arch": "hyena", **{k: c[k] for k in ("vocab_size", "d_model", "max_len", "final_norm",
                                                       "tie_embeddings", "init")}, "n_layers": 0}
        # The Hyena model's final norm is a LayerNorm: an RMSNorm here keeps its ones.
        load_initial_values(self, hyena, "model", skip=("blocks.", "final_norm."))
        if self.final_norm is not None:
            self.final_norm.reset_parameters()

    def reset_parameters(self):
        """Re-initialises everything as at construction: a from_config model
        as its C++ model; otherwise each block (and its mixer, where it has
        reset_parameters), the final norm, embedding and head."""
        if self._zoo_config is not None:
            load_initial_values(self, self._zoo_config, "model")
            return
        for block in self.blocks:
            if hasattr(block.mixer, "reset_parameters"):
                block.mixer.reset_parameters()
            block.reset_parameters()
        self._reset_embed_and_head()

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The zoo's TMM or Hyena model in plain Python: a config dict, a zoo
        config name, a JSON path, or a built tmm.models model (its .config).
        The C++ config reader checks and completes the config, and the model
        starts from the initial values of the C++ model built from it: its
        state_dict has the C++ model's names, shapes and init."""
        if hasattr(config, "config") and not isinstance(config, dict):
            config = config.config
        if isinstance(config, str):
            import tmm.models

            path = config if config.endswith(".json") else tmm.models.config_path(config)
            with open(path) as f:
                config = json.load(f)
        if not isinstance(config, dict):
            raise TypeError(
                f"SequenceModel.from_config: expected a config dict, name or path, got {type(config).__name__}")
        arch = config.get("arch")
        if arch not in ZOO_MIXERS:
            raise ValueError(f"SequenceModel.from_config: \"arch\" must be \"tmm\" or \"hyena\", got {arch!r}")
        c = resolve("SequenceModel.from_config", config)
        sizes = (c["vocab_size"], c["d_model"], c["n_layers"], c["max_len"])
        common = {"ffn_mult": c["ffn_mult"], "dropout": c["dropout"], "tie_embeddings": c["tie_embeddings"],
                  "final_norm": c["final_norm"], "init": c["init"], "device": device, "dtype": dtype}
        if arch == "tmm":
            mixer_kwargs = {"heads": c["heads"], "kernel": c["kernel"], "expanded": c["mixer"] == "expanded",
                            "frozen": c["mixer"] == "frozen", "masked": c["mixer"] == "masked",
                            "mixer_dropout": c["mixer_dropout"], "init": c["init"]}
            model = cls(ToeplitzMixer, *sizes, mixer_kwargs=mixer_kwargs, activation=c["activation"],
                        block_order=c["block_order"], norm=c["norm"], **common)
        else:  # the C++ HyenaBlock: mixer first (also in registration), GELU, LayerNorm
            mixer_kwargs = {"filter_order": c["filter_order"], "emb_dim": c["emb_dim"],
                            "short_filter": c["short_filter"], "w": c["filter_sin_freq"], "modulate": c["modulate"],
                            "init": c["init"]}
            model = cls(HyenaOperator, *sizes, mixer_kwargs=mixer_kwargs, activation="gelu",
                        block_order="mixer_first", norm="layernorm", registration="mixer_first", **common)
        model._zoo_config = c
        model.reset_parameters()
        return model

    @classmethod
    def from_mixer_config(cls, config, device=None, dtype=None):
        """A SequenceModel from a config dict with "arch": "mixer": "mixer"
        (an import path), optional "mixer_kwargs" (a dict) and
        "mixer_inputs" (a list: SequenceModel's mixer_inputs), the sizes
        vocab_size, d_model, n_layers, max_len, and optionally the block
        options (ffn_mult, activation, block_order, norm, final_norm,
        dropout, tie_embeddings, init: the FFN's, embedding's and head's;
        the C++ TMM defaults where absent). How scripts/compare.py --mixer
        builds a user's mixer into the zoo's skeleton; ``model.config`` gives
        it back, every key filled in."""
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
        options = {k: config[k] for k in _MIXER_CONFIG_OPTIONS if k in config}
        model = cls(config["mixer"], config["vocab_size"], config["d_model"], config["n_layers"], config["max_len"],
                    device=device, dtype=dtype, **options)
        filled = {**model._config, "mixer": config["mixer"], "mixer_kwargs": config.get("mixer_kwargs", {}),
                  "mixer_inputs": list(model.mixer_inputs)}
        model.config = ModelConfig(arch="mixer", **{k: filled[k] for k in MIXER_CONFIG_KEYS})
        return model

    # True: in training, each block's activations are recomputed in backward (torch.utils.checkpoint)
    # instead of kept: less memory for one more forward (tmm.train's activation_checkpointing sets it).
    activation_checkpointing = False

    def _check_ids(self, input_ids):
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype != torch.int64:
            got = (f"a {input_ids.dim()}-D {input_ids.dtype} tensor" if isinstance(input_ids, torch.Tensor)
                   else type(input_ids).__name__)
            raise ValueError(f"input_ids: expected a B x L int64 tensor, got {got}")
        if input_ids.shape[1] > self.max_len:
            raise ValueError(
                f"input_ids: sequence length {input_ids.shape[1]} exceeds the model's maximum {self.max_len}")
        if not torch.compiler.is_compiling() and input_ids.numel():
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= self.vocab_size:
                raise ValueError(f"input_ids: expected token ids in [0, {self.vocab_size}), got values in [{lo}, {hi}]")

    def hidden_states(self, input_ids):
        """B x L int64 -> B x L x d: the states the head reads."""
        self._check_ids(input_ids)
        h = self.embed(input_ids)
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for block in self.blocks:
            h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False) if recompute else block(h)
        return self.final_norm(h) if self.final_norm is not None else h

    def _head(self, hidden):
        return F.linear(hidden, self.embed.weight) if self.head is None else self.head(hidden)

    def forward(self, input_ids, labels=None, return_hidden=False, shift_labels=None):
        hidden = self.hidden_states(input_ids)
        logits = self._head(hidden)
        if labels is None and not return_hidden:
            return logits
        loss = None
        if labels is not None:
            if (self.shift_labels if shift_labels is None else shift_labels):
                labels = shifted_labels(labels)
            if not isinstance(labels, torch.Tensor) or labels.shape != input_ids.shape or labels.dtype != torch.int64:
                got = (f"{tuple(labels.shape)} {labels.dtype}" if isinstance(labels, torch.Tensor)
                       else type(labels).__name__)
                raise ValueError(
                    f"labels: expected int64 of the shape of input_ids {tuple(input_ids.shape)}, got {got}")
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
        return LMOutput(logits, hidden if return_hidden else None, loss)

    def start_decoding(self, batch, capacity):
        """One decoding state per block (each mixer must offer step())."""
        if capacity > self.max_len:
            raise ValueError(f"SequenceModel.start_decoding: capacity {capacity} exceeds max_len = {self.max_len}")
        return [block.start_decoding(batch, capacity) for block in self.blocks]

    @torch.no_grad()
    def step(self, input_ids, states):
        """B x T token ids at the states' next positions -> their logits
        B x T x V, as forward() on everything fed so far gives them."""
        h = self.embed(input_ids)
        for block, state in zip(self.blocks, states):
            h = block.step(h, state)
        if self.final_norm is not None:
            h = self.final_norm(h)
        return self._head(h)

    def num_parameters(self, trainable_only=False, exclude_embeddings=False, only_trainable=None):
        """As the zoo models' num_parameters (transformers' arguments accepted)."""
        trainable_only = trainable_only or bool(only_trainable)
        return sum(p.numel() for n, p in self.named_parameters()
                   if (p.requires_grad or not trainable_only) and not (exclude_embeddings and n == "embed.weight"))
