"""The Mamba2 (SSD) mixer as a plain nn.Module, with mamba_ssm's ``Mamba2``
constructor arguments, defined by the C++ Mamba2Mixer (csrc/models/mamba2.cpp):
its configuration is the C++ config reader's, its initial values the C++
init's, its decoding the C++ decoder's. Forward: in_proj -> [z, xBC, dt],
causal depthwise conv + SiLU, the scan (dt and A from their parameters, the
chunked SSD, + D x), gated RMSNorm, out_proj, the conv, scan and norm being
the C++ definitions as ops (torch.ops.tmm.mamba2_*)."""
import json

import torch
from torch import nn
from torch.nn import functional as F

from .. import _C
from ._cpp import initial_values, load_initial_values, resolve
from .layers import NORM_EPS, check_sequence


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
    layer_idx); those left None take the zoo's defaults (docs/models.md:
    d_state 64, chunk_size 64, where mamba_ssm has 128 and 256).
    ``n_layers`` (and ``mlp``, whether each block also has the gated MLP)
    only scale the init of out_proj by 1/sqrt(n_layers * residuals), as
    mamba_ssm's LM does. Decoding: :meth:`start_decoding`, :meth:`step`.
    """

    # What SequenceModel passes it per layer (tmm.nn.sequence_model.MIXER_INPUTS), as mamba_ssm's LM does.
    mixer_inputs = ("layer_idx", "n_layers", "device", "dtype")

    def __init__(self, d_model, d_state=None, d_conv=None, expand=None, headdim=None, ngroups=None, chunk_size=None,
                 n_layers=1, mlp=False, layer_idx=None, device=None, dtype=None):
        super().__init__()
        options = {"d_state": d_state, "d_conv": d_conv, "expand": expand, "headdim": headdim, "ngroups": ngroups,
                   "chunk_size": chunk_size}
        # A zoo Mamba2 config of this mixer (vocab_size and max_len are not the mixer's: any valid values);
        # d_intermediate only says whether blocks have the MLP (the init's residual count).
        c = self._config = resolve("Mamba2Mixer", {
            "arch": "mamba2", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers, "max_len": 1,
            "d_intermediate": 1 if mlp else 0, **{k: v for k, v in options.items() if v is not None}})
        self.d_model, self.d_state, self.d_conv, self.expand = c["d_model"], c["d_state"], c["d_conv"], c["expand"]
        self.headdim, self.ngroups, self.chunk_size = c["headdim"], c["ngroups"], c["chunk_size"]
        self.layer_idx = layer_idx
        params, _ = values = initial_values(c, "mixer")
        # The widths (d_inner, nheads, conv_dim) as the C++ mixer has them.
        self.d_inner, self.nheads = params["out_proj.weight"].shape[1], params["dt_bias"].shape[0]
        kw = {"device": device, "dtype": dtype}
        conv_dim = params["conv1d.weight"].shape[0]
        self.in_proj = nn.Linear(self.d_model, params["in_proj.weight"].shape[0], bias=False, **kw)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, self.d_conv, groups=conv_dim, bias=True, **kw)
        self.dt_bias = nn.Parameter(torch.empty(self.nheads, **kw))
        self.A_log = nn.Parameter(torch.empty(self.nheads, **kw))
        self.D = nn.Parameter(torch.empty(self.nheads, **kw))
        self.norm = GatedRMSNorm(self.d_inner, self.ngroups, **kw)
        self.out_proj = nn.Linear(self.d_inner, self.d_model, bias=False, **kw)
        load_initial_values(self, c, "mixer", values=values)

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The mixer of a zoo Mamba2 config dict (validated and completed by
        the C++ config reader)."""
        c = resolve("Mamba2Mixer.from_config", config)
        keys = ("d_state", "d_conv", "expand", "headdim", "ngroups", "chunk_size")
        return cls(c["d_model"], **{k: c[k] for k in keys}, n_layers=c["n_layers"], mlp=c["d_intermediate"] > 0,
                   device=device, dtype=dtype)

    def reset_parameters(self):
        """mamba_ssm's init, as the C++ mixer does it: the values of a C++
        Mamba2Mixer of this configuration, freshly built."""
        load_initial_values(self, self._config, "mixer")

    def forward(self, u):
        check_sequence("Mamba2Mixer", u, self.d_model, "u")
        di, GN = self.d_inner, self.ngroups * self.d_state
        z, xBC, dt = self.in_proj(u).split([di, di + 2 * GN, self.nheads], -1)
        xBC = F.silu(torch.ops.tmm.mamba2_causal_depthwise_conv1d(xBC, self.conv1d.weight, self.conv1d.bias))
        x, Bm, Cm = xBC.split([di, GN, GN], -1)
        y = torch.ops.tmm.mamba2_ssd_scan(x, dt, self.dt_bias, self.A_log, Bm, Cm, self.D, self.ngroups,
                                          self.chunk_size)  # in at least float32, as the norm after it
        return self.out_proj(self.norm(y, z.to(y.dtype)).to(u.dtype))

    @torch.no_grad()
    def start_decoding(self, batch, capacity=None):
        """A decoding state for :meth:`step`: the C++ decoder (conv inputs,
        SSM state) over this layer's own tensors; the capacity is unbounded
        (accepted for a common interface)."""
        tensors = dict(self.named_parameters())
        try:
            return Mamba2State(_C._Mamba2Decoder(json.dumps(self._config), tensors, batch))
        except RuntimeError as e:
            raise ValueError(f"Mamba2Mixer.start_decoding: {e}") from None

    @torch.no_grad()
    def step(self, u, state):
        """u: B x T x d at the next positions: any T at position 0 (the
        prompt), then one token at a time (the C++ decoder's rule). Returns
        B x T x d, as forward() on everything fed so far gives them."""
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
