"""The zoo's models as plain nn.Module trees: one class per architecture,
each the LanguageModel skeleton with its own blocks, whose forwards call the
registered ops. Their values come from the C++ model of the same config
(its init, or a checkpoint it read), adopted without a copy. Decoding,
generation and checkpoints are the C++ library's: its model borrows this
tree's tensors for the call (engine)."""
import contextlib
import json
import os

import torch

from .. import _C
from ..nn import MixerBlock
from ..nn.cpp_config import adopt, resolve
from ..nn.language_model import LanguageModel
from ..nn.layers import NORM_EPS, RMSNorm, make_norm
from ..nn.mamba2 import Mamba2Block
from ..nn.mixer_block import HyenaBlock
from ..nn.outputs import ModelConfig
from ..nn.transformer import TransformerBlock


class ZooModel(LanguageModel):
    """A model of the zoo (:func:`tmm.models.build`, :func:`tmm.models.load`).
    Parameter names are the C++ module paths ("embed.weight",
    "blocks.0.mixer.weight", ...), the names of checkpoints in both languages."""

    final_norm_name = "final_norm"

    def __init__(self, config):
        c = resolve(type(self).__name__, config)
        with torch.device("meta"):
            norm = self.make_final_norm(c)
        super().__init__(c["vocab_size"], c["d_model"], c["max_len"], [self.make_block(c) for _ in range(c["n_layers"])],
                         norm, self.final_norm_name, c["tie_embeddings"])
        self._config_json = json.dumps(c)
        self._engine = None  # the C++ model that lends this tree's tensors to decoding, generation and saving
        self._distillation = None

    def make_block(self, config):
        raise NotImplementedError

    def make_final_norm(self, config):
        return make_norm("layernorm", config["d_model"]) if config.get("final_norm") else None

    @property
    def config(self):
        """The full validated configuration (a fresh dict, "arch" included;
        keys also read as attributes, as transformers' configs are)."""
        return ModelConfig(json.loads(self._config_json))

    @property
    def arch(self):
        return self.config["arch"]

    @torch.no_grad()
    def reset_parameters(self):
        """The values of a freshly built C++ model of this config (its init's
        draws from torch's global generator)."""
        own = self.state_dict(keep_vars=True)
        for name, t in _C._build_model(self._config_json).named_tensors():
            own[name].copy_(t)

    # --- the C++ engine ---------------------------------------------------
    @contextlib.contextmanager
    def engine(self):
        """The C++ model computing with this tree's tensors: made on first use
        and bound to the tensors as they are now (dtype, device, objects)
        before every call, so that it never computes with stale ones."""
        tensors = self.state_dict(keep_vars=True)
        for name, t in tensors.items():
            if type(t) not in (torch.Tensor, torch.nn.Parameter):
                raise TypeError(f"{type(self).__name__}: '{name}' is a {type(t).__name__}; decoding, generation and "
                                "saving need the full model's plain tensors (with FSDP2: gather them first, e.g. "
                                "torch.distributed.checkpoint's get_model_state_dict into an unsharded model)")
        if self._engine is None:
            self._engine = _C._empty_model(self._config_json)
        self._engine.bind(list(tensors.items()))
        _C._set_distillation(self._engine, self._distillation)
        yield self._engine

    def __getstate__(self):  # pickle, copy.deepcopy, torch.save(model): the engine is made again when needed
        return {**self.__dict__, "_engine": None}

    def _apply(self, fn, recurse=True):
        # .to(), .cuda(), .half(): the engine would keep the old tensors alive until its next call.
        self._engine = None
        return super()._apply(fn, recurse)

    @torch.no_grad()
    def start_decoding(self, batch, capacity, method="auto", *, order=None, window=None):
        """A state for incremental decoding of `batch` sequences of at most
        `capacity` tokens (:meth:`decode`); method: auto | recompute | cached
        | fast (TMM, Hyena) | distilled (TMM, Hyena: approximate, fixed state;
        order and window fit a distillation unless the attached one has them,
        tmm.distill). ``state.state_bytes``: what the state holds."""
        self._distillation_for(method, order, window)
        with self.engine() as e:
            return DecodeState(e.start_decoding(int(batch), int(capacity), str(method)))

    @torch.no_grad()
    def decode(self, state, input_ids):
        """Feeds B x T tokens at the state's next positions; returns their
        logits B x T x V, as forward() on everything fed so far gives them."""
        with self.engine() as e:
            return e.decode(state.cpp, input_ids)

    def _distillation_for(self, method, order, window):
        if order is None and window is None:
            return
        if method != "distilled":
            raise ValueError(f'order and window are options of method="distilled", not of method="{method}"')
        from .. import distill

        d = self._distillation
        if d is None or (order is not None and d.order != order) or (window is not None and d.window != window):
            distill.distill(self, order=16 if order is None else order, window=0 if window is None else window)

    @torch.no_grad()
    def generate(self, prompts, max_new_tokens=64, *, temperature=1.0, top_k=0, top_p=1.0, seed=0,
                 stop_tokens=(), method="auto", on_tokens=None, order=None, window=None):
        """Generates from token-id prompts (a list of lists, or one list) with
        the C++ generator (docs/decoding.md): temperature 0 = greedy, dropout
        off in any mode. Returns a dict: tokens (new ids per prompt),
        finish_reasons, method, prefill_seconds, step_seconds. on_tokens(list)
        is called after each round with each sequence's new token (-1: none);
        return False to stop. order, window: for method "distilled"."""
        self._distillation_for(method, order, window)
        if hasattr(prompts, "tolist"):  # a tensor or array of ids: 1-D one prompt, 2-D a batch
            prompts = prompts.tolist()
        single = len(prompts) > 0 and not isinstance(prompts[0], (list, tuple))
        batch = [list(map(int, prompts))] if single else [list(map(int, p)) for p in prompts]
        with self.engine() as e:
            out = e.generate(batch, int(max_new_tokens), float(temperature), int(top_k), float(top_p), int(seed),
                             [int(t) for t in stop_tokens], str(method), on_tokens)
        if single:
            out["tokens"], out["finish_reasons"] = out["tokens"][0], out["finish_reasons"][0]
        return out

    def save(self, checkpoint_dir):
        """Writes checkpoint_dir/config.json and checkpoint_dir/model.safetensors
        (created if missing; each file replaced atomically), tensors in their
        current dtype: a checkpoint C++ loads (tmm::models::load_checkpoint)."""
        with self.engine() as e:
            _C._save_checkpoint(e, os.fspath(checkpoint_dir))


def save_checkpoint(config, tensors, checkpoint_dir):
    """Writes the checkpoint of a model of ``config`` holding ``tensors``
    ({name: tensor}, e.g. a sharded model's gathered state dict) as
    ZooModel.save does."""
    engine = _C._empty_model(json.dumps(dict(config)))
    engine.bind(list(tensors.items()))
    _C._save_checkpoint(engine, os.fspath(checkpoint_dir))


class TMM(ZooModel):
    """The Toeplitz MLP Mixer (docs/models.md): blocks of FFN and Toeplitz mixer."""

    def make_block(self, config):
        return MixerBlock.from_config(config, device="meta")

    def make_final_norm(self, config):
        return make_norm(config["norm"], config["d_model"]) if config["final_norm"] else None


class Transformer(ZooModel):
    """Llama (RMSNorm, RoPE, SwiGLU), optionally with sliding-window attention."""

    final_norm_name = "norm"

    def make_block(self, config):
        return TransformerBlock(config)

    def make_final_norm(self, config):
        return RMSNorm(config["d_model"], config["norm_eps"])


class Hyena(ZooModel):
    """Hyena (order 2, safari's block)."""

    def make_block(self, config):
        return HyenaBlock(config)


class Mamba2(ZooModel):
    """Mamba2 (SSD), mamba_ssm's block and init."""

    final_norm_name = "norm"

    def make_block(self, config):
        return Mamba2Block(config)

    def make_final_norm(self, config):
        return RMSNorm(config["d_model"], NORM_EPS["mamba2"])


ARCHITECTURES = {"tmm": TMM, "transformer": Transformer, "hyena": Hyena, "mamba2": Mamba2}


class DecodeState:
    """Incremental-decoding state of a batch (ZooModel.start_decoding): the
    C++ state, with its batch_size, capacity, position, method, state_bytes."""

    def __init__(self, cpp):
        self.cpp = cpp

    def __getattr__(self, name):
        return getattr(self.cpp, name)


def from_cpp(cpp, config_json):
    """The tree of the C++ model `cpp` (just built or loaded), its tensors
    adopted without a copy (as new tensor objects: C++ keeps its own)."""
    config = json.loads(config_json)
    cls = ARCHITECTURES.get(config["arch"])
    if cls is None:
        raise ValueError(f"tmm.models: no Python class for \"arch\" \"{config['arch']}\"")
    model = cls(config)
    adopt(model, {name: t.detach() for name, t in cpp.named_tensors()})
    return model
