"""The order-2 Hyena operator, whose forward is the op
torch.ops.tmm.hyena_operator, with safari's constructor arguments where they
exist; configuration, init and decoding are the C++ HyenaOperator's
(csrc/models/hyena.cpp). Its tensors are a zoo Hyena's ``blocks.<i>.mixer.*``."""
import torch
from torch import nn

from .. import _C
from .cpp_config import initialise, resolve
from .layers import Linear, check_sequence

# The safari names of the zoo's Hyena keys, for errors that name the argument.
ARGUMENTS = {"filter_sin_freq": "w", "max_len": "l_max"}


def hyena_config(owner, d_model, l_max, n_layers, options):
    """A zoo Hyena config of these options (None: the C++ default), resolved
    by the C++ reader (vocab_size is not a layer's: any valid value)."""
    given = {k: v for k, v in options.items() if v is not None}
    return resolve(owner, {"arch": "hyena", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers,
                           "max_len": l_max, **given}, ARGUMENTS)


class HyenaFilter(nn.Module):
    """The implicit long filter: positional features -> (Linear, sin) x 3 ->
    Linear -> exponential decay; ``D`` the skip term (safari's HyenaFilter)."""

    def __init__(self, d_model, l_max, emb_dim=None, filter_order=None, w=None, modulate=None, init=None,
                 device=None, dtype=None):
        super().__init__()
        c = self._config = hyena_config("HyenaFilter", d_model, l_max, 1, {
            "emb_dim": emb_dim, "filter_order": filter_order, "filter_sin_freq": w, "modulate": modulate,
            "init": init})
        self.l_max, self.modulate, order = c["max_len"], c["modulate"], c["filter_order"]
        with torch.device("meta"):
            self.mlp = nn.ModuleList([nn.Linear(c["emb_dim"], order), nn.Linear(order, order),
                                      nn.Linear(order, order), nn.Linear(order, c["d_model"], bias=False)])
            self.freq = nn.Parameter(torch.empty(order))
            self.D = nn.Parameter(torch.empty(c["d_model"]))
        initialise(self, c, "filter", device, dtype)

    def reset_parameters(self):
        """The values of a C++ HyenaFilter of this configuration, freshly built."""
        initialise(self, self._config, "filter")

    def mlp_tensors(self):
        return [t for layer in self.mlp for t in (layer.weight, layer.bias) if t is not None]

    def toeplitz_weight(self, L):
        """d x 1 x L: each channel's filter with D added at lag 0, the
        causal_toeplitz weight (torch.ops.tmm.hyena_filter)."""
        return torch.ops.tmm.hyena_filter(self.mlp_tensors(), self.freq, self.D, L, self.l_max, self.modulate)

    def forward(self, v):  # y[b,t,c] = sum_{s<=t} h[c,t-s] v[b,s,c] + D[c] v[b,t,c]
        return torch.ops.tmm.causal_toeplitz(v, self.toeplitz_weight(v.shape[1]), None)


class ShortConv(nn.Module):
    """A causal depthwise Conv1d over B x L x C (``weight`` C x 1 x width),
    torch's Conv1d init."""

    def __init__(self, channels, width, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels, 1, width, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(channels, device=device, dtype=dtype))
        if self.weight.device.type != "meta":
            self.reset_parameters()

    def reset_parameters(self):
        nn.Conv1d.reset_parameters(self)

    def forward(self, u):
        padded = nn.functional.pad(u.transpose(1, 2), (self.weight.shape[2] - 1, 0))
        return nn.functional.conv1d(padded, self.weight, self.bias, groups=self.weight.shape[0]).transpose(1, 2)


class HyenaOperator(nn.Module):
    """Order-2 Hyena: in_proj d -> 3d, the short causal conv, split into x0,
    x1, v; v = h * (v x1) + D (v x1); out_proj(v x0). B x L x d -> same.

    Arguments are safari's (``HyenaOperator(d_model, l_max, order=2,
    filter_order=64, ...)``) where the zoo's Hyena has them: ``emb_dim``,
    ``w`` (the sine frequency, filter_sin_freq), ``modulate``, ``short_filter``
    (safari's short_filter_order); only order 2 exists here. ``init`` as the
    zoo Hyena's ("torch", "safari", "kaiming"); None takes the C++ defaults.
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
        self.d_model, self.l_max = c["d_model"], c["max_len"]
        with torch.device("meta"):
            self.in_proj = Linear(d_model, 3 * d_model)
            self.short_filter = ShortConv(3 * d_model, c["short_filter"])
            self.filter = HyenaFilter(d_model, self.l_max, emb_dim=c["emb_dim"], filter_order=c["filter_order"],
                                      w=c["filter_sin_freq"], modulate=c["modulate"], device="meta")
            self.out_proj = Linear(d_model, d_model)
        initialise(self, c, "mixer", device, dtype)

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The operator of a zoo Hyena config dict."""
        c = resolve("HyenaOperator.from_config", config, arch="hyena")
        return cls(c["d_model"], c["max_len"], filter_order=c["filter_order"], emb_dim=c["emb_dim"],
                   short_filter=c["short_filter"], w=c["filter_sin_freq"], modulate=c["modulate"], init=c["init"],
                   n_layers=c["n_layers"], device=device, dtype=dtype)

    def reset_parameters(self):
        """The values of a C++ HyenaOperator of this configuration, freshly built."""
        initialise(self, self._config, "mixer")

    def forward(self, x):
        check_sequence("HyenaOperator", x, self.d_model)
        if x.shape[1] > self.l_max:
            raise ValueError(f"HyenaOperator: sequence length {x.shape[1]} exceeds l_max = {self.l_max}")
        f = self.filter
        return torch.ops.tmm.hyena_operator(x, self.in_proj.weight, self.in_proj.bias, self.short_filter.weight,
                                            self.short_filter.bias, f.mlp_tensors(), f.freq, f.D,
                                            self.out_proj.weight, self.out_proj.bias, self.l_max, f.modulate)

    @torch.no_grad()
    def start_decoding(self, batch, capacity):
        """A decoding state for :meth:`step` (capacity <= l_max): the C++
        ShortConv's and OnlineToeplitz's, over this layer's tensors."""
        if not 1 <= capacity <= self.l_max:
            raise ValueError(f"HyenaOperator.start_decoding: capacity must be in [1, l_max = {self.l_max}], "
                             f"got {capacity}")
        weight = self.filter.toeplitz_weight(capacity)  # the filter does not depend on the length: made once
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
