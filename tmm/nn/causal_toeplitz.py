"""The causal Toeplitz token mixer as a module."""
import torch
from torch import nn

from .. import ops
from ._cpp import load_initial_values, resolve


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
        if groups == 0:  # heads 0 is the flat mixer, which groups=1 spells
            raise ValueError("CausalToeplitz: groups must be >= 1, got 0")
        # The Toeplitz layer of a zoo ToeplitzMixer with `groups` heads: the C++
        # config reader checks the sizes, the C++ init gives the values.
        self._config = resolve("CausalToeplitz", {
            "arch": "tmm", "vocab_size": 1, "d_model": channels, "n_layers": 1, "max_len": max_len,
            "heads": 0 if groups == 1 else groups, "kernel": kernel}, {"d_model": "channels", "heads": "groups"})
        self.channels, self.max_len, self.groups, self.kernel = channels, max_len, groups, kernel
        self.weight = nn.Parameter(torch.empty(groups, kernel, max_len))
        self.bias = nn.Parameter(torch.empty(groups, max_len)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The C++ ToeplitzMixer's init of its vectors and bias."""
        load_initial_values(self, self._config, "mixer")

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B x L x C -> B x L x C
        return ops.causal_toeplitz(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"channels={self.channels}, max_len={self.max_len}, groups={self.groups}, "
            f"kernel={self.kernel}, bias={self.bias is not None}"
        )
