"""The order-2 Hyena operator as a plain nn.Module, with safari's
constructor arguments where they exist, defined by the C++ HyenaOperator
(csrc/models/hyena.cpp): its configuration is the C++ config reader's, its
initial values the C++ init's, its decoding the C++ OnlineToeplitz; the long
convolution by the implicit filter is torch.ops.tmm.causal_toeplitz with
groups = channels."""

import torch
from torch import nn
from torch.nn import functional as F

from .. import _C
from ._cpp import load_initial_values, resolve
from .layers import check_sequence, positive

# The safari names of the zoo's Hyena keys, for errors that name the argument.
ARGUMENTS = {"filter_sin_freq": "w", "max_len": "l_max"}


def hyena_config(owner, d_model, l_max, n_layers, options):
    """A zoo Hyena config of these options (None: the C++ default),
    resolved by the C++ reader (vocab_size is not a layer's: any valid value)."""
    given = {k: v for k, v in options.items() if v is not None}
    return resolve(owner, {"arch": "hyena", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers,
                           "max_len": l_max, **given}, ARGUMENTS)


class HyenaFilter(nn.Module):
    """The implicit long filter: positional features -> (Linear, sin) x 3 ->
    Linear -> exponential decay; ``D`` the skip term (safari's HyenaFilter).
    ``init``: the MLP keeps torch's default init, or N(0, 0.02^2) weights and
    zero biases with "safari"."""

    def __init__(self, d_model, l_max, emb_dim=None, filter_order=None, w=None, modulate=None, init=None,
                 device=None, dtype=None):
        super().__init__()
        c = self._config = hyena_config("HyenaFilter", d_model, l_max, 1, {
            "emb_dim": emb_dim, "filter_order": filter_order, "filter_sin_freq": w, "modulate": modulate,
            "init": init})
        self.d_model, self.l_max, self.emb_dim, self.modulate = c["d_model"], c["max_len"], c["emb_dim"], c["modulate"]
        self.init, self.sin_freq = c["init"], c["filter_sin_freq"]
        kw = {"device": device, "dtype": dtype}
        order = c["filter_order"]
        self.mlp = nn.ModuleList([nn.Linear(self.emb_dim, order, **kw), nn.Linear(order, order, **kw),
                                  nn.Linear(order, order, **kw), nn.Linear(order, self.d_model, bias=False, **kw)])
        self.freq = nn.Parameter(torch.empty(order, **kw))
        self.D = nn.Parameter(torch.empty(self.d_model, **kw))
        self.reset_parameters()

    def reset_parameters(self):
        """The C++ filter's init: the MLP torch's default Linear init (as
        safari's filter keeps it) or "safari"'s N(0, 0.02^2), freq the sine
        frequency, D N(0, 1); the values of a C++ HyenaFilter, freshly built."""
        load_initial_values(self, self._config, "filter")

    def toeplitz_weight(self, L):
        """d x 1 x L: the filter h of each channel (positional features ->
        MLP with sines -> decay) with D added at lag 0, the op's weight:
        torch.ops.tmm.hyena_filter, the C++ HyenaFilter's definition."""
        mlp = [t for layer in self.mlp for t in (layer.weight, layer.bias) if t is not None]
        return torch.ops.tmm.hyena_filter(mlp, self.freq, self.D, L, self.l_max, self.modulate)

    def forward(self, v):  # y[b,t,c] = sum_{s<=t} h[c,t-s] v[b,s,c] + D[c] v[b,t,c]
        return torch.ops.tmm.causal_toeplitz(v, self.toeplitz_weight(v.shape[1]), None)


class ShortConv(nn.Module):
    """A causal depthwise Conv1d over B x L x C (``weight`` C x 1 x width)."""

    def __init__(self, channels, width, device=None, dtype=None):
        super().__init__()
        positive("ShortConv", channels=channels, width=width)
        self.weight = nn.Parameter(torch.empty(channels, 1, width, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(channels, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        """torch's Conv1d init (U(+-1/sqrt(width)), as the C++ ShortConv's):
        torch's own code, on this layer's weight and bias."""
        nn.Conv1d.reset_parameters(self)

    def forward(self, u):
        w = self.weight.shape[2]
        padded = F.pad(u.transpose(1, 2), (w - 1, 0))
        return F.conv1d(padded, self.weight, self.bias, groups=self.weight.shape[0]).transpose(1, 2)


class HyenaOperator(nn.Module):
    """Order-2 Hyena: in_proj d -> 3d, the short causal conv, split into x0,
    x1, v; v = h * (v x1) + D (v x1); out_proj(v x0). B x L x d -> same.

    Arguments are safari's (``HyenaOperator(d_model, l_max, order=2,
    filter_order=64, ...)``) where the C++ operator has them: ``emb_dim``,
    ``w`` (the sine frequency, the zoo's filter_sin_freq), ``modulate``, and
    ``short_filter`` (safari's short_filter_order). Only order 2, one head,
    inner_factor 1 exist here. ``init`` as the zoo Hyena's ("torch",
    "safari", "kaiming"; "safari" scales out_proj by 1/sqrt(2 ``n_layers``));
    arguments left None take the C++ defaults. Decoding:
    :meth:`start_decoding`, :meth:`step`.
    """

    # What SequenceModel passes it per layer (tmm.nn.sequence_model.MIXER_INPUTS): safari's name for the length.
    mixer_inputs = ("l_max", "n_layers", "device", "dtype")

    def __init__(self, d_model, l_max, order=2, filter_order=None, emb_dim=None, short_filter=None, w=None,
                 modulate=None, init=None, n_layers=1, device=None, dtype=None):
        super().__init__()
        if order != 2:
            raise ValueError(f"HyenaOperator: only order=2 is built (as the zoo's Hyena), got order={order!r}")
        c = self._config = hyena_config("HyenaOperator", d_model, l_max, n_layers, {
            "filter_order": filter_order, "emb_dim": emb_dim, "short_filter": short_filter, "filter_sin_freq": w,
            "modulate": modulate, "init": init})
        self.d_model, self.l_max, self.n_layers, self.init = c["d_model"], c["max_len"], c["n_layers"], c["init"]
        kw = {"device": device, "dtype": dtype}
        d = self.d_model
        self.in_proj = nn.Linear(d, 3 * d, **kw)
        self.short_filter = ShortConv(3 * d, c["short_filter"], **kw)
        self.filter = HyenaFilter(d, self.l_max, emb_dim=c["emb_dim"], filter_order=c["filter_order"],
                                  w=c["filter_sin_freq"], modulate=c["modulate"],
                                  init="safari" if self.init == "safari" else "torch", **kw)
        self.out_proj = nn.Linear(d, d, **kw)
        self.reset_parameters()

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The operator of a zoo Hyena config dict (validated and completed by
        the C++ config reader)."""
        c = resolve("HyenaOperator.from_config", config)
        return cls(c["d_model"], c["max_len"], filter_order=c["filter_order"], emb_dim=c["emb_dim"],
                   short_filter=c["short_filter"], w=c["filter_sin_freq"], modulate=c["modulate"], init=c["init"],
                   n_layers=c["n_layers"], device=device, dtype=dtype)

    def reset_parameters(self):
        """The C++ operator's init for ``init``: the values of a C++
        HyenaOperator of this configuration, freshly built."""
        load_initial_values(self, self._config, "mixer")

    def forward(self, x):
        check_sequence("HyenaOperator", x, self.d_model)
        if x.shape[1] > self.l_max:
            raise ValueError(f"HyenaOperator: sequence length {x.shape[1]} exceeds l_max = {self.l_max}")
        if x.shape[1] == 0:
            return torch.zeros_like(x)
        x0, x1, v = self.short_filter(self.in_proj(x)).chunk(3, -1)
        return self.out_proj(self.filter(v * x1) * x0)

    @torch.no_grad()
    def start_decoding(self, batch, capacity):
        """A decoding state for :meth:`step` (capacity <= l_max): the C++
        ShortConv's and OnlineToeplitz's, over this layer's tensors."""
        if not 1 <= capacity <= self.l_max:
            raise ValueError(f"HyenaOperator.start_decoding: capacity must be in [1, l_max = {self.l_max}], "
                             f"got {capacity}")
        # The implicit filter does not depend on the length: made once.
        weight = self.filter.toeplitz_weight(capacity)
        try:
            return HyenaState(_C._ShortConvDecoder(self.short_filter.weight, self.short_filter.bias, batch),
                              _C._OnlineToeplitz(weight, None, batch, self.d_model, capacity))
        except RuntimeError as e:
            raise ValueError(f"HyenaOperator.start_decoding: {e}") from None

    @torch.no_grad()
    def step(self, x, state):
        """x: B x T x d at the state's next positions -> B x T x d, as
        forward() on everything fed so far gives them (inference)."""
        try:
            x0, x1, v = state.short_conv.forward(self.in_proj(x)).chunk(3, -1)
            y = state.long_conv.forward(v * x1)
        except RuntimeError as e:
            raise ValueError(f"HyenaOperator.step: {e}") from None
        return self.out_proj(y * x0)


class HyenaState:
    """What :meth:`HyenaOperator.step` keeps: the C++ decoders of the short
    conv (its last inputs) and of the long convolution (every gated input)."""

    def __init__(self, short_conv, long_conv):
        self.short_conv, self.long_conv = short_conv, long_conv

    @property
    def position(self):
        return self.long_conv.position
