"""A pre-norm residual block around any token mixer, as a plain nn.Module:
x += FFN(norm(x)); x += Mixer(norm(x)) (feed-forward first by default), the
C++ TMMBlock's mathematics and names (ffn_norm, ffn_in, ffn_out, mixer_norm,
mixer, drop); its default mixer is TMM's ToeplitzMixer."""
import torch
from torch import nn

from .layers import (ACTIVATIONS, NORMS, choice, make_linear, make_norm, positive, reset_linear, reset_linear_normal,
                     reset_linear_torch, residual_scale)
from .toeplitz_mixer import ToeplitzMixer

BLOCK_ORDERS = ("ffn_first", "mixer_first")
# The FFN's init: "kaiming" (TMM's, the default), "scaled" (TMM's extension:
# then ffn_out.weight / sqrt(2 n_layers)), "torch" (nn.Linear's default, the
# zoo Hyena's), "safari" (N(0, 0.02^2), zero biases, ffn_out N(0, (0.02 /
# sqrt(2 n_layers))^2): safari's LM).
INITS = ("kaiming", "scaled", "torch", "safari")
SAFARI_STD = 0.02


class MixerBlock(nn.Module):
    """A pre-norm residual block around a token mixer (B x L x d -> same).

    The mixer is a :class:`ToeplitzMixer` built from ``max_len`` and
    ``mixer_kwargs`` (heads, kernel, expanded, frozen, masked), or any module
    given as ``mixer`` (B x L x d -> B x L x d). FFN: Linear(d, ffn_mult*d),
    ``activation`` (silu | gelu | relu), Linear back; ``norm`` layernorm |
    rmsnorm; dropout on each branch's output in training mode. ``init``
    (with ``n_layers`` for "scaled" and "safari") initialises the FFN as the
    C++ models do: "kaiming" (TMM), "scaled" (TMM's extension), "torch"
    (Hyena's default), "safari" (Hyena's "safari"); the mixer keeps its own.
    ``registration``: the order of the submodules in named_parameters() and
    state_dict(): "ffn_first" (the C++ TMMBlock's, whatever its
    block_order) or "mixer_first" (the C++ HyenaBlock's).
    """

    def __init__(self, d_model, max_len=None, *, mixer=None, ffn_mult=4, activation="silu",
                 block_order="ffn_first", norm="layernorm", dropout=0.0, init="kaiming", n_layers=1,
                 registration="ffn_first", device=None, dtype=None, **mixer_kwargs):
        super().__init__()
        positive("MixerBlock", d_model=d_model, ffn_mult=ffn_mult)
        self.activation = choice("MixerBlock", "activation", activation, tuple(ACTIVATIONS))
        self.block_order = choice("MixerBlock", "block_order", block_order, BLOCK_ORDERS)
        choice("MixerBlock", "norm", norm, NORMS)
        self.init = choice("MixerBlock", "init", init, INITS)
        choice("MixerBlock", "registration", registration, BLOCK_ORDERS)
        positive("MixerBlock", n_layers=n_layers)
        self.n_layers = n_layers
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MixerBlock: dropout must be in [0, 1), got {dropout!r}")
        if mixer is None:
            if max_len is None:
                raise ValueError("MixerBlock: give max_len (for its ToeplitzMixer) or a mixer module")
            if init in ("kaiming", "scaled"):  # the block's TMM init reaches its ToeplitzMixer
                mixer_kwargs = {"init": init, "n_layers": n_layers, **mixer_kwargs}
            mixer = ToeplitzMixer(d_model, max_len, device=device, dtype=dtype, **mixer_kwargs)
        elif mixer_kwargs:
            raise ValueError(f"MixerBlock: {', '.join(sorted(mixer_kwargs))} configure the ToeplitzMixer; "
                             "a given mixer module takes no such arguments")
        elif not isinstance(mixer, nn.Module):
            raise TypeError(f"MixerBlock: mixer must be an nn.Module, got {type(mixer).__name__}")
        kw = {"device": device, "dtype": dtype}
        # Registration order is the C++ block's (TMMBlock's or HyenaBlock's).
        if registration == "mixer_first":
            self.mixer_norm = make_norm(norm, d_model, **kw)
            self.mixer = mixer
        self.ffn_norm = make_norm(norm, d_model, **kw)
        self.ffn_in = make_linear(d_model, ffn_mult * d_model, True, **kw)
        self.ffn_out = make_linear(ffn_mult * d_model, d_model, True, **kw)
        if registration == "ffn_first":
            self.mixer_norm = make_norm(norm, d_model, **kw)
            self.mixer = mixer
        self.drop = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self):
        """The FFN's init (``init``); norms to ones and zeros. The mixer's own
        init is its reset_parameters."""
        for norm in (self.ffn_norm, self.mixer_norm):
            norm.reset_parameters()
        for layer in (self.ffn_in, self.ffn_out):
            if self.init in ("kaiming", "scaled"):
                reset_linear(layer)
            elif self.init == "torch":
                reset_linear_torch(layer)
            else:
                reset_linear_normal(layer, SAFARI_STD)
        if self.init in ("scaled", "safari"):
            with torch.no_grad():
                self.ffn_out.weight.mul_(residual_scale(self.n_layers))

    def _ffn(self, h):
        return self.ffn_out(ACTIVATIONS[self.activation](self.ffn_in(self.ffn_norm(h))))

    def _run(self, x, mix):
        if self.block_order == "ffn_first":
            h = x + self.drop(self._ffn(x))
            return h + self.drop(mix(self.mixer_norm(h)))
        h = x + self.drop(mix(self.mixer_norm(x)))
        return h + self.drop(self._ffn(h))

    def forward(self, x):
        return self._run(x, self._mixer_out)

    def _mixer_out(self, h):
        y = self.mixer(h)
        if isinstance(y, tuple):  # mixers that also return a state (mamba_ssm style): the output first
            y = y[0]
        if not hasattr(y, "shape") or y.shape != h.shape:
            got = tuple(y.shape) if hasattr(y, "shape") else type(y).__name__
            raise ValueError(f"MixerBlock: the mixer {type(self.mixer).__name__} must map B x L x d to the same "
                             f"shape {tuple(h.shape)}, got {got}")
        return y

    def start_decoding(self, batch, capacity):
        """The mixer's decoding state (the FFN and norms act per position)."""
        if not hasattr(self.mixer, "start_decoding"):
            raise TypeError(f"MixerBlock: the mixer {type(self.mixer).__name__} has no start_decoding/step")
        return self.mixer.start_decoding(batch, capacity)

    def step(self, x, state):
        """B x T x d at the state's next positions -> B x T x d, as forward()
        on everything fed so far gives them (dropout off, as the C++ decoder)."""
        if self.block_order == "ffn_first":
            h = x + self._ffn(x)
            return h + self.mixer.step(self.mixer_norm(h), state)
        h = x + self.mixer.step(self.mixer_norm(x), state)
        return h + self._ffn(h)
