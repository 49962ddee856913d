"""TMM's token mixer as a plain nn.Module over torch.ops.tmm.causal_toeplitz,
defined by the C++ ToeplitzMixer (csrc/models/tmm.cpp): its configuration
is the C++ config reader's, its initial values the C++ init's, its decoding
the C++ OnlineToeplitz; its state_dict is a zoo model's ``blocks.<i>.mixer.*``."""
import torch
from torch import nn
from torch.nn import functional as F

from .. import _C
from ._cpp import initial_values, load_initial_values, resolve
from .layers import check_sequence

VARIANTS = ("toeplitz", "expanded", "frozen", "masked")


def causal_matrix_mix(x, matrix, bias):
    """y[b,t,g,:] = sum_{s<=t} M[g,t,s] x[b,s,g,:] + bias[g,t] over the first L
    rows and columns of the G x N x N matrix M (its upper triangle ignored):
    the "masked" mixer, torch.ops.tmm.causal_matrix_mix (csrc/models/online_toeplitz.cpp)."""
    return torch.ops.tmm.causal_matrix_mix(x, matrix, bias)


class ToeplitzMixer(nn.Module):
    """Causal token mixing of B x L x d_model inputs (L <= max_len).

    ``heads=0``: flat, one Toeplitz vector ``weight`` (1 x kernel x max_len)
    and bias for all channels, no projections. ``heads=h``: ``in_proj`` and
    ``out_proj`` (d -> d, with bias) around h groups of d/h channels, each
    with its own vector. ``kernel=k``: output channel c mixes channels
    c-k+1..c of its group. Variants (at most one): ``expanded``
    (Toeplitz -> SiLU -> dropout -> Toeplitz, adding ``weight2``, ``bias2``
    and ``dropout``; ``mixer_dropout`` defaults to 0.1 there, as the authors',
    and must be 0 for the other variants), ``frozen`` (``weight`` and ``bias``
    are buffers: saved, never trained), ``masked`` (a full lower-triangular
    max_len x max_len matrix per group; kernel 1).
    Init, as the C++ mixer: Kaiming-normal (fan-in) Linear weights, zero
    biases; Toeplitz vectors N(0, 2/max_len) per tap; the masked matrix and
    bias U(+-1/sqrt(max_len)). ``init="scaled"`` (a tmm extension) divides
    the last weight (out_proj's with heads, else the Toeplitz vectors) by
    sqrt(2 n_layers). Decoding: :meth:`start_decoding`, :meth:`step`.
    """

    # What SequenceModel passes it per layer (tmm.nn.sequence_model.MIXER_INPUTS): the length sizes the vectors.
    mixer_inputs = ("max_len", "n_layers", "device", "dtype")

    def __init__(self, d_model, max_len, heads=0, kernel=1, expanded=False, frozen=False, masked=False,
                 mixer_dropout=None, init="kaiming", n_layers=1, device=None, dtype=None):
        super().__init__()
        chosen = [n for n, on in (("expanded", expanded), ("frozen", frozen), ("masked", masked)) if on]
        if len(chosen) > 1:
            raise ValueError(
                f"ToeplitzMixer: expanded, frozen and masked exclude each other, got {' and '.join(chosen)}")
        # A zoo TMM config of this mixer (vocab_size is not the mixer's: any valid value)
        config = {"arch": "tmm", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers, "max_len": max_len,
                  "heads": heads, "kernel": kernel, "mixer": chosen[0] if chosen else "toeplitz", "init": init}
        if mixer_dropout is not None:
            config["mixer_dropout"] = mixer_dropout
        c = self._config = resolve("ToeplitzMixer", config)
        self.d_model, self.max_len, self.heads, self.kernel = c["d_model"], c["max_len"], c["heads"], c["kernel"]
        self.n_layers, self.mixer_dropout, self.init, self.variant = c["n_layers"], c["mixer_dropout"], c["init"], \
            c["mixer"]
        params, buffers = values = initial_values(c, "mixer")
        kw = {"device": device, "dtype": dtype}
        # Registration order is the C++ mixer's, so named_parameters() lists alike.
        if self.heads:
            self.in_proj = nn.Linear(self.d_model, self.d_model, **kw)
        for name in ("weight", "bias", "weight2", "bias2"):  # shapes and kinds (frozen: buffers) as C++ has them
            if name in params:
                self.register_parameter(name, nn.Parameter(torch.empty(params[name].shape, **kw)))
            elif name in buffers:
                self.register_buffer(name, torch.empty(buffers[name].shape, **kw))
        if self.variant == "expanded":
            self.dropout = nn.Dropout(self.mixer_dropout)
        if self.heads:
            self.out_proj = nn.Linear(self.d_model, self.d_model, **kw)
        load_initial_values(self, c, "mixer", values=values)

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The mixer of a zoo TMM config (a dict, validated and completed by
        the C++ config reader)."""
        c = resolve("ToeplitzMixer.from_config", config)
        return cls(c["d_model"], c["max_len"], heads=c["heads"], kernel=c["kernel"], expanded=c["mixer"] == "expanded",
                   frozen=c["mixer"] == "frozen", masked=c["mixer"] == "masked", mixer_dropout=c["mixer_dropout"],
                   init=c["init"], n_layers=c["n_layers"], device=device, dtype=dtype)

    def reset_parameters(self):
        """The C++ mixer's init: the values of a C++ ToeplitzMixer of this
        configuration, freshly built."""
        load_initial_values(self, self._config, "mixer")

    def _mix(self, x, weight, bias):
        if self.variant == "masked":
            return causal_matrix_mix(x, weight, bias)
        return torch.ops.tmm.causal_toeplitz(x, weight, bias)

    def forward(self, x):  # B x L x d -> B x L x d
        check_sequence("ToeplitzMixer", x, self.d_model)
        if x.shape[1] > self.max_len:
            raise ValueError(f"ToeplitzMixer: sequence length {x.shape[1]} exceeds max_len = {self.max_len}")
        h = self.in_proj(x) if self.heads else x
        h = self._mix(h, self.weight, self.bias)
        if self.variant == "expanded":
            h = self._mix(self.dropout(F.silu(h)), self.weight2, self.bias2)
        return self.out_proj(h) if self.heads else h

    # Incremental decoding: the C++ decoder's OnlineToeplitz ("cached"), one per Toeplitz stage.
    @torch.no_grad()
    def start_decoding(self, batch, capacity):
        """A decoding state for `batch` sequences of at most `capacity` (<=
        max_len) positions, fed to :meth:`step`."""
        stages = [(self.weight, self.bias)] + ([(self.weight2, self.bias2)] if self.variant == "expanded" else [])
        try:
            return ToeplitzMixerState([_C._OnlineToeplitz(w, b, batch, self.d_model, capacity,
                                                          matrix=self.variant == "masked") for w, b in stages])
        except RuntimeError as e:
            raise ValueError(f"ToeplitzMixer.start_decoding: {e}") from None

    @torch.no_grad()
    def step(self, x, state):
        """x: B x T x d at the state's next T positions -> B x T x d, what
        forward() on everything fed so far gives at those positions. Any T
        (the prompt, or one token at a time); one token costs O(t d).
        Inference, as the C++ decoder: no gradients flow through a step and
        the expanded mixer's dropout is off."""
        check_sequence("ToeplitzMixer", x, self.d_model)
        h = self.in_proj(x) if self.heads else x
        try:
            h = state.stages[0].forward(h)
            if self.variant == "expanded":
                h = state.stages[1].forward(F.silu(h))
        except RuntimeError as e:
            raise ValueError(f"ToeplitzMixer.step: {e}") from None
        return self.out_proj(h) if self.heads else h

    def extra_repr(self):
        text = (f"d_model={self.d_model}, max_len={self.max_len}, heads={self.heads}, kernel={self.kernel}, "
                f"variant={self.variant}")
        if self.variant == "expanded":
            text += f", mixer_dropout={self.mixer_dropout}"
        if self.init != "kaiming":
            text += f", init={self.init}, n_layers={self.n_layers}"
        return text


class ToeplitzMixerState:
    """What :meth:`ToeplitzMixer.step` keeps: a C++ OnlineToeplitz per
    Toeplitz stage (every input so far)."""

    def __init__(self, stages):
        self.stages = stages

    @property
    def position(self):
        return self.stages[0].position
