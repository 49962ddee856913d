"""TMM's block as a plain nn.Module: x += FFN(norm(x)); x += Mixer(norm(x))
(feed-forward first by default), the C++ TMMBlock's mathematics and names
(ffn_norm, ffn_in, ffn_out, mixer_norm, mixer, drop)."""
from torch import nn

from .layers import ACTIVATIONS, NORMS, choice, make_linear, make_norm, positive
from .toeplitz_mixer import ToeplitzMixer

BLOCK_ORDERS = ("ffn_first", "mixer_first")


class TMMBlock(nn.Module):
    """A pre-norm residual block around a token mixer (B x L x d -> same).

    The mixer is a :class:`ToeplitzMixer` built from ``max_len`` and
    ``mixer_kwargs`` (heads, kernel, expanded, frozen, masked), or any module
    given as ``mixer`` (B x L x d -> B x L x d). FFN: Linear(d, ffn_mult*d),
    ``activation`` (silu | gelu | relu), Linear back; ``norm`` layernorm |
    rmsnorm; dropout on each branch's output in training mode.
    """

    def __init__(self, d_model, max_len=None, *, mixer=None, ffn_mult=4, activation="silu",
                 block_order="ffn_first", norm="layernorm", dropout=0.0, device=None, dtype=None, **mixer_kwargs):
        super().__init__()
        positive("TMMBlock", d_model=d_model, ffn_mult=ffn_mult)
        self.activation = choice("TMMBlock", "activation", activation, tuple(ACTIVATIONS))
        self.block_order = choice("TMMBlock", "block_order", block_order, BLOCK_ORDERS)
        choice("TMMBlock", "norm", norm, NORMS)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"TMMBlock: dropout must be in [0, 1), got {dropout!r}")
        if mixer is None:
            if max_len is None:
                raise ValueError("TMMBlock: give max_len (for its ToeplitzMixer) or a mixer module")
            mixer = ToeplitzMixer(d_model, max_len, device=device, dtype=dtype, **mixer_kwargs)
        elif mixer_kwargs:
            raise ValueError(f"TMMBlock: {', '.join(sorted(mixer_kwargs))} configure the ToeplitzMixer; "
                             "a given mixer module takes no such arguments")
        elif not isinstance(mixer, nn.Module):
            raise TypeError(f"TMMBlock: mixer must be an nn.Module, got {type(mixer).__name__}")
        kw = {"device": device, "dtype": dtype}
        # Registration order is the C++ block's.
        self.ffn_norm = make_norm(norm, d_model, **kw)
        self.ffn_in = make_linear(d_model, ffn_mult * d_model, True, **kw)
        self.ffn_out = make_linear(ffn_mult * d_model, d_model, True, **kw)
        self.mixer_norm = make_norm(norm, d_model, **kw)
        self.mixer = mixer
        self.drop = nn.Dropout(dropout)

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
            raise ValueError(f"TMMBlock: the mixer {type(self.mixer).__name__} must map B x L x d to the same "
                             f"shape {tuple(h.shape)}, got {got}")
        return y

    def start_decoding(self, batch, capacity):
        """The mixer's decoding state (the FFN and norms act per position)."""
        if not hasattr(self.mixer, "start_decoding"):
            raise TypeError(f"TMMBlock: the mixer {type(self.mixer).__name__} has no start_decoding/step")
        return self.mixer.start_decoding(batch, capacity)

    def step(self, x, state):
        """B x T x d at the state's next positions -> B x T x d, as forward()
        on everything fed so far gives them (dropout off, as the C++ decoder)."""
        if self.block_order == "ffn_first":
            h = x + self._ffn(x)
            return h + self.mixer.step(self.mixer_norm(h), state)
        h = x + self.mixer.step(self.mixer_norm(x), state)
        return h + self._ffn(h)
