"""Small layers the modules share, each computing as its C++ counterpart in
csrc/models/layers.cpp does (same names)."""
import torch
from torch import nn
from torch.nn import functional as F

from .. import _C

# The C++ norms' epsilons ("rmsnorm" and "layernorm" of make_norm, "mamba2" of
# every Mamba2 norm), defined there once.
NORM_EPS = _C._norm_eps()
ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}


def choice(owner, name, value, allowed):
    """value if it is one of allowed, else a ValueError naming the argument."""
    if value not in allowed:
        raise ValueError(f"{owner}: {name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def check_sequence(owner, x, d_model, name="x"):
    """Raises a ValueError naming `name` unless x is a B x L x d_model tensor."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{owner}: expected {name} of shape B x L x {d_model}, got {got}")


def positive(owner, **values):
    """Raises a ValueError naming each argument that is not an int >= 1."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{owner}: {name} must be an integer >= 1, got {v!r}")


class Linear(nn.Linear):
    """nn.Linear computing as torch::nn::Linear does: for inputs of other than
    two dimensions x W^T first, then + b (nn.Linear fuses the bias into one
    addmm, which rounds differently), so that a module computes bitwise what
    its C++ counterpart computes, gradients included."""

    def forward(self, x):
        if self.bias is None or x.dim() == 2:
            return F.linear(x, self.weight, self.bias)
        return F.linear(x, self.weight) + self.bias


class RMSNorm(nn.Module):
    """y = x / rms(x) * weight over the last dimension, computed in float32
    at least (tmm::models::RMSNorm)."""

    def __init__(self, dim, eps=NORM_EPS["rmsnorm"], device=None, dtype=None):
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
    """LayerNorm (with bias) or RMSNorm, with the C++ make_norm's eps (NORM_EPS)."""
    if kind == "rmsnorm":
        return RMSNorm(dim, device=device, dtype=dtype)
    return nn.LayerNorm(dim, eps=NORM_EPS["layernorm"], device=device, dtype=dtype)
