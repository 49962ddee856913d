"""Small layers the drop-in modules share, each computing as its C++
counterpart in csrc/models/layers.cpp does (same names, same init)."""
import math

import torch
from torch import nn
from torch.nn import functional as F

ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}
NORMS = ("layernorm", "rmsnorm")


def choice(owner, name, value, allowed):
    """value if it is one of allowed, else a ValueError naming the argument."""
    if value not in allowed:
        raise ValueError(f"{owner}: {name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def positive(owner, **values):
    """Raises a ValueError naming each argument that is not an int >= 1."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{owner}: {name} must be an integer >= 1, got {v!r}")


class RMSNorm(nn.Module):
    """y = x / rms(x) * weight over the last dimension, computed in float32
    at least (tmm::models::RMSNorm)."""

    def __init__(self, dim, eps=1e-6, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def reset_parameters(self):
        with torch.no_grad():
            self.weight.fill_(1.0)

    def forward(self, x):
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        xf = x.to(acc)
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.to(acc)).to(x.dtype)

    def extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"


def make_norm(kind, dim, device=None, dtype=None):
    """LayerNorm (with bias, eps 1e-5) or RMSNorm (eps 1e-6), as the C++ make_norm."""
    if kind == "rmsnorm":
        return RMSNorm(dim, device=device, dtype=dtype)
    return nn.LayerNorm(dim, device=device, dtype=dtype)


def make_linear(n_in, n_out, bias=True, device=None, dtype=None):
    """nn.Linear initialised as the TMM authors (and the C++ make_linear) do:
    Kaiming-normal weights (fan-in, gain sqrt 2), zero biases."""
    layer = nn.Linear(n_in, n_out, bias=bias, device=device, dtype=dtype)
    reset_linear(layer)
    return layer


def reset_linear(layer):
    with torch.no_grad():
        nn.init.kaiming_normal_(layer.weight, a=0.0, mode="fan_in", nonlinearity="relu")
        if layer.bias is not None:
            layer.bias.zero_()


def reset_linear_torch(layer):
    """torch's default Linear init, U(+-1/sqrt(fan_in)) weight and bias (Hyena's "torch")."""
    layer.reset_parameters()


def reset_linear_normal(layer, std):
    """N(0, std^2) weight, zero bias (safari's GPT-2 style _init_weights)."""
    with torch.no_grad():
        layer.weight.normal_(0.0, std)
        if layer.bias is not None:
            layer.bias.zero_()


def residual_scale(n_layers):
    """GPT-2's 1/sqrt(2 n_layers) for a residual branch's last weight (n_layers >= 1)."""
    return 1.0 / math.sqrt(2.0 * max(int(n_layers), 1))


def toeplitz_init_(t, fan_in):
    """Toeplitz vectors: N(0, 2 / fan_in), the authors' init for w (fan_in = N:
    their kernel weight is K x N, so torch's fan-in is its N)."""
    with torch.no_grad():
        return t.normal_(0.0, math.sqrt(2.0 / fan_in))


def uniform_init_(t, fan_in):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): torch's Conv1d default, the masked
    mixer's matrix and bias (fan_in = N)."""
    bound = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        return t.uniform_(-bound, bound)
