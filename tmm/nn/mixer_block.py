"""Pre-norm residual blocks around a token mixer: TMM's (any mixer, the FFN
first by default) and Hyena's (safari's: the mixer first, GELU, LayerNorm),
as the C++ TMMBlock and HyenaBlock compute them, with their names."""
import torch
from torch import nn

from .cpp_config import give, initial_values, resolve
from .hyena import HyenaOperator
from .layers import ACTIVATIONS, Linear, make_norm
from .toeplitz_mixer import ToeplitzMixer

_MIXER_KWARGS = ("heads", "kernel", "expanded", "frozen", "masked", "mixer_dropout")


def block_config(owner, d_model, max_len, n_layers, options):
    """A zoo TMM config holding the block options given (None: the C++
    default), resolved by the C++ reader."""
    given = {k: v for k, v in options.items() if v is not None}
    return resolve(owner, {"arch": "tmm", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers,
                           "max_len": max_len or 1, **given})


class MixerBlock(nn.Module):
    """x += FFN(norm(x)); x += mixer(norm(x)) (``block_order="mixer_first"``
    reverses them), B x L x d -> same, dropout on each branch's output in
    training. FFN: Linear(d, ffn_mult d), ``activation`` (silu | gelu |
    relu), Linear back; ``norm``: layernorm | rmsnorm. The mixer is any
    module given as ``mixer`` (B x L x d -> B x L x d), else a
    ToeplitzMixer(d_model, max_len, **mixer_kwargs): the zoo TMM's block.
    Init: the C++ TMM block's ("kaiming", or "scaled" with ``n_layers``);
    options left None take its defaults.
    """

    def __init__(self, d_model, max_len=None, *, mixer=None, ffn_mult=None, activation=None, block_order=None,
                 norm=None, dropout=None, init=None, n_layers=1, device=None, dtype=None, **mixer_kwargs):
        super().__init__()
        unknown = sorted(set(mixer_kwargs) - set(_MIXER_KWARGS))
        if unknown:
            raise TypeError(f"MixerBlock: unexpected argument(s) {', '.join(unknown)}")
        if mixer is not None and mixer_kwargs:
            raise ValueError(f"MixerBlock: {', '.join(sorted(mixer_kwargs))} configure the ToeplitzMixer; "
                             "a given mixer module takes no such arguments")
        if mixer is None and max_len is None:
            raise ValueError("MixerBlock: give max_len (for its ToeplitzMixer) or a mixer module")
        if mixer is not None and not isinstance(mixer, nn.Module):
            raise TypeError(f"MixerBlock: mixer must be an nn.Module, got {type(mixer).__name__}")
        c = self._config = block_config("MixerBlock", d_model, max_len, n_layers, {
            "ffn_mult": ffn_mult, "activation": activation, "block_order": block_order, "norm": norm,
            "dropout": dropout, "init": init, **{k: mixer_kwargs.get(k) for k in ("heads", "kernel", "mixer_dropout")},
            "mixer": next((k for k in ("expanded", "frozen", "masked") if mixer_kwargs.get(k)), None)})
        self.activation, self.block_order = c["activation"], c["block_order"]
        with torch.device("meta"):
            self.ffn_norm = make_norm(c["norm"], d_model)
            self.ffn_in = Linear(d_model, c["ffn_mult"] * d_model)
            self.ffn_out = Linear(c["ffn_mult"] * d_model, d_model)
            self.mixer_norm = make_norm(c["norm"], d_model)
            self.mixer = mixer if mixer is not None else ToeplitzMixer.from_config(c, device="meta")
        self.drop = nn.Dropout(c["dropout"])
        self._own_mixer = mixer is None
        if torch.device(device or "cpu").type != "meta":
            self._initialise(device, dtype)

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The block of a zoo TMM config dict."""
        c = resolve("MixerBlock.from_config", config, arch="tmm")
        return cls(c["d_model"], c["max_len"], ffn_mult=c["ffn_mult"], activation=c["activation"],
                   block_order=c["block_order"], norm=c["norm"], dropout=c["dropout"], init=c["init"],
                   n_layers=c["n_layers"], heads=c["heads"], kernel=c["kernel"], mixer_dropout=c["mixer_dropout"],
                   **{c["mixer"]: True} if c["mixer"] != "toeplitz" else {}, device=device, dtype=dtype)

    def reset_parameters(self):
        """The values of a C++ TMMBlock of this configuration, freshly built
        (a given mixer keeps its own)."""
        self._initialise()

    def _initialise(self, device=None, dtype=None):
        values = initial_values(self._config, "block")
        for name, part in self.named_children():
            if name != "drop" and (name != "mixer" or self._own_mixer):
                give(part, {k[len(name) + 1:]: v for k, v in values.items() if k.startswith(name + ".")}, device, dtype)

    def _ffn(self, h):
        return self.ffn_out(ACTIVATIONS[self.activation](self.ffn_in(self.ffn_norm(h))))

    def _mix(self, h):
        y = self.mixer(h)
        if isinstance(y, tuple):  # mixers that also return a state (mamba_ssm style): the output first
            y = y[0]
        if not hasattr(y, "shape") or y.shape != h.shape:
            got = tuple(y.shape) if hasattr(y, "shape") else type(y).__name__
            raise ValueError(f"MixerBlock: the mixer {type(self.mixer).__name__} must map B x L x d to the same "
                             f"shape {tuple(h.shape)}, got {got}")
        return y

    def forward(self, x):
        mix = self._mix
        if self.block_order == "ffn_first":
            h = x + self.drop(self._ffn(x))
            return h + self.drop(mix(self.mixer_norm(h)))
        h = x + self.drop(mix(self.mixer_norm(x)))
        return h + self.drop(self._ffn(h))

    def start_decoding(self, batch, capacity):
        """The mixer's decoding state (the FFN and norms act per position)."""
        if not hasattr(self.mixer, "start_decoding"):
            raise TypeError(f"MixerBlock: the mixer {type(self.mixer).__name__} has no start_decoding/step")
        return self.mixer.start_decoding(batch, capacity)

    def step(self, x, state):
        """B x T x d at the state's next positions -> B x T x d, as forward()
        on everything fed so far gives them (dropout off)."""
        if self.block_order == "ffn_first":
            h = x + self._ffn(x)
            return h + self.mixer.step(self.mixer_norm(h), state)
        h = x + self.mixer.step(self.mixer_norm(x), state)
        return h + self._ffn(h)


class HyenaBlock(nn.Module):
    """The zoo Hyena's block: x += mixer(mixer_norm(x)); x += ffn_out(gelu(
    ffn_in(ffn_norm(x)))), LayerNorms, dropout on each branch in training.
    Built on the meta device: its values come from the model (tmm.models)."""

    def __init__(self, config):
        super().__init__()
        d, hidden = config["d_model"], config["ffn_mult"] * config["d_model"]
        with torch.device("meta"):
            self.mixer_norm = make_norm("layernorm", d)
            self.mixer = HyenaOperator.from_config(config, device="meta")
            self.ffn_norm = make_norm("layernorm", d)
            self.ffn_in = Linear(d, hidden)
            self.ffn_out = Linear(hidden, d)
        self.drop = nn.Dropout(config["dropout"])

    def forward(self, x):
        h = x + self.drop(self.mixer(self.mixer_norm(x)))
        return h + self.drop(self.ffn_out(nn.functional.gelu(self.ffn_in(self.ffn_norm(h)))))

    def start_decoding(self, batch, capacity):
        return self.mixer.start_decoding(batch, capacity)

    def step(self, x, state):
        h = x + self.mixer.step(self.mixer_norm(x), state)
        return h + self.ffn_out(nn.functional.gelu(self.ffn_in(self.ffn_norm(h))))
