"""The causal Toeplitz token mixer as a module."""
import math

import torch
from torch import nn

from .. import ops


class CausalToeplitz(nn.Module):
    """Causal Toeplitz mixing along the sequence of a B x L x C input.

    Holds ``weight`` (groups x kernel x max_len) and ``bias`` (groups x
    max_len). groups=1, kernel=1 is the flat TMM mixer; groups=h gives h heads
    (without projections); kernel > 1 the kernel variant; groups=channels a
    per-channel long convolution. Initialised as the TMM authors (and the
    zoo's ToeplitzMixer) do: N(0, 2/max_len) per tap, Kaiming-normal with
    fan-in max_len (their kernel weight is kernel x max_len), bias zero.
    """

    def __init__(self, channels: int, max_len: int, groups: int = 1, kernel: int = 1, bias: bool = True):
        super().__init__()
        if channels < 1 or max_len < 1 or groups < 1 or kernel < 1:
            raise ValueError(
                f"CausalToeplitz: expected positive channels, max_len, groups and kernel, got "
                f"channels={channels}, max_len={max_len}, groups={groups}, kernel={kernel}"
            )
        if channels % groups:
            raise ValueError(f"CausalToeplitz: channels={channels} is not divisible by groups={groups}")
        if kernel > channels // groups:
            raise ValueError(
                f"CausalToeplitz: kernel={kernel} exceeds the channels per group {channels // groups}"
            )
        self.channels, self.max_len, self.groups, self.kernel = channels, max_len, groups, kernel
        self.weight = nn.Parameter(torch.empty(groups, kernel, max_len))
        self.bias = nn.Parameter(torch.empty(groups, max_len)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = math.sqrt(2.0 / self.max_len)  # fan-in max_len, for every tap
        with torch.no_grad():
            self.weight.normal_(0.0, std)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B x L x C -> B x L x C
        return ops.causal_toeplitz(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"channels={self.channels}, max_len={self.max_len}, groups={self.groups}, "
            f"kernel={self.kernel}, bias={self.bias is not None}"
        )
