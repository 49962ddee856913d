"""The Mamba2 (SSD) mixer, whose forward is the op torch.ops.tmm.mamba2_mixer,
with mamba_ssm's ``Mamba2`` constructor arguments, and the zoo's Mamba2
block; configuration, init and decoding are the C++ Mamba2Mixer's
(csrc/models/mamba2.cpp)."""
import json

import torch
from torch import nn

from .. import _C
from .cpp_config import initialise, resolve
from .layers import NORM_EPS, RMSNorm, check_sequence


class GatedRMSNorm(nn.Module):
    """RMSNorm of y * silu(z) in ``groups`` groups, times ``weight``."""

    def __init__(self, dim, groups, eps=NORM_EPS["mamba2"], device=None, dtype=None):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, y, z):
        return torch.ops.tmm.mamba2_gated_rms_norm(y, z, self.weight, self.groups, self.eps)


class Mamba2Mixer(nn.Module):
    """B x L x d_model -> same. The arguments are mamba_ssm's ``Mamba2``
    (d_model, d_state, d_conv, expand, headdim, ngroups, chunk_size,
    layer_idx); None takes the zoo's defaults (docs/models.md: d_state 64,
    chunk_size 64, where mamba_ssm has 128 and 256). ``n_layers`` and ``mlp``
    (whether each block also has the gated MLP) only scale out_proj's init by
    1/sqrt(n_layers * residuals), as mamba_ssm's LM does."""

    # What SequenceModel passes it per layer (tmm.nn.sequence_model.MIXER_INPUTS), as mamba_ssm's LM does.
    mixer_inputs = ("layer_idx", "n_layers", "device", "dtype")

    def __init__(self, d_model, d_state=None, d_conv=None, expand=None, headdim=None, ngroups=None, chunk_size=None,
                 n_layers=1, mlp=False, layer_idx=None, device=None, dtype=None):
        super().__init__()
        options = {"d_state": d_state, "d_conv": d_conv, "expand": expand, "headdim": headdim, "ngroups": ngroups,
                   "chunk_size": chunk_size}
        c = self._config = resolve("Mamba2Mixer", {
            "arch": "mamba2", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers, "max_len": 1,
            "d_intermediate": 1 if mlp else 0, **{k: v for k, v in options.items() if v is not None}})
        self.d_model, self.d_state, self.d_conv, self.expand = c["d_model"], c["d_state"], c["d_conv"], c["expand"]
        self.headdim, self.ngroups, self.chunk_size, self.layer_idx = c["headdim"], c["ngroups"], c["chunk_size"], \
            layer_idx
        self.d_inner = self.expand * self.d_model
        self.nheads = self.d_inner // self.headdim
        conv_dim = self.d_inner + 2 * self.ngroups * self.d_state
        with torch.device("meta"):
            self.in_proj = nn.Linear(self.d_model, self.d_inner + conv_dim + self.nheads, bias=False)
            self.conv1d = nn.Conv1d(conv_dim, conv_dim, self.d_conv, groups=conv_dim)
            self.dt_bias = nn.Parameter(torch.empty(self.nheads))
            self.A_log = nn.Parameter(torch.empty(self.nheads))
            self.D = nn.Parameter(torch.empty(self.nheads))
            self.norm = GatedRMSNorm(self.d_inner, self.ngroups)
            self.out_proj = nn.Linear(self.d_inner, self.d_model, bias=False)
        initialise(self, c, "mixer", device, dtype)

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The mixer of a zoo Mamba2 config dict."""
        c = resolve("Mamba2Mixer.from_config", config, arch="mamba2")
        keys = ("d_state", "d_conv", "expand", "headdim", "ngroups", "chunk_size")
        return cls(c["d_model"], **{k: c[k] for k in keys}, n_layers=c["n_layers"], mlp=c["d_intermediate"] > 0,
                   device=device, dtype=dtype)

    def reset_parameters(self):
        """mamba_ssm's init, as the C++ mixer does it (the values of a C++
        Mamba2Mixer of this configuration, freshly built)."""
        initialise(self, self._config, "mixer")

    def forward(self, u):
        check_sequence("Mamba2Mixer", u, self.d_model, "u")
        return torch.ops.tmm.mamba2_mixer(u, self.in_proj.weight, self.conv1d.weight, self.conv1d.bias, self.dt_bias,
                                          self.A_log, self.D, self.norm.weight, self.out_proj.weight, self.ngroups,
                                          self.chunk_size, self.norm.eps)

    @torch.no_grad()
    def start_decoding(self, batch, capacity=None):
        """A decoding state for :meth:`step`: the C++ decoder (conv inputs,
        SSM state) over this layer's own tensors; the capacity is unbounded
        (accepted for a common interface)."""
        try:
            return Mamba2State(_C._Mamba2Decoder(json.dumps(self._config), dict(self.named_parameters()), batch))
        except RuntimeError as e:
            raise ValueError(f"Mamba2Mixer.start_decoding: {e}") from None

    @torch.no_grad()
    def step(self, u, state):
        """u: B x T x d at the next positions: any T at position 0 (the
        prompt), then one token at a time. Returns B x T x d, as forward() on
        everything fed so far gives them."""
        check_sequence("Mamba2Mixer", u, self.d_model, "u")
        try:
            return state.decoder.forward(u)
        except RuntimeError as e:
            raise ValueError(f"Mamba2Mixer.step: {e}") from None


class Mamba2State:
    """What :meth:`Mamba2Mixer.step` keeps: the C++ decoder (the conv's last
    inputs and the SSM state)."""

    def __init__(self, decoder):
        self.decoder = decoder

    @property
    def position(self):
        return self.decoder.position


class GatedMLP(nn.Module):
    """mamba_ssm's GatedMLP: fc2(value * silu(gate)), (value, gate) = fc1(x)."""

    def __init__(self, d_model, hidden, device=None, dtype=None):
        super().__init__()
        self.fc1 = nn.Linear(d_model, 2 * hidden, bias=False, device=device, dtype=dtype)
        self.fc2 = nn.Linear(hidden, d_model, bias=False, device=device, dtype=dtype)

    def forward(self, x):
        value, gate = self.fc1(x).chunk(2, -1)
        return self.fc2(value * nn.functional.silu(gate))


class Mamba2Block(nn.Module):
    """The zoo Mamba2's block: x + mixer(norm(x)), then + mlp(norm2(x)) with
    the gated MLP (d_intermediate > 0); dropout on each branch in training.
    Built on the meta device: its values come from the model (tmm.models)."""

    def __init__(self, config):
        super().__init__()
        c, eps = config, NORM_EPS["mamba2"]
        self.dropout = c["dropout"]
        with torch.device("meta"):
            self.norm = RMSNorm(c["d_model"], eps)
            self.mixer = Mamba2Mixer.from_config(c, device="meta")
            if c["d_intermediate"] > 0:
                self.norm2 = RMSNorm(c["d_model"], eps)
                self.mlp = GatedMLP(c["d_model"], c["d_intermediate"])

    def forward(self, x):
        drop = nn.functional.dropout
        h = x + drop(self.mixer(self.norm(x)), self.dropout, self.training)
        if hasattr(self, "mlp"):
            h = h + drop(self.mlp(self.norm2(h)), self.dropout, self.training)
        return h
