"""The causal Toeplitz operator as a layer (its own weight and bias, no projections)."""
import torch
from torch import nn

from .. import ops
from .cpp_config import initial_values, resolve


class CausalToeplitz(nn.Module):
    """Causal Toeplitz mixing along the sequence of a B x L x C input.

    Holds ``weight`` (groups x kernel x max_len) and ``bias`` (groups x
    max_len). groups=1, kernel=1 is the flat TMM mixer; groups=h gives h heads
    (without projections); kernel > 1 the kernel variant; groups=channels a
    per-channel long convolution. Initialised as the TMM authors (and the
    zoo's ToeplitzMixer) do: N(0, 2/max_len) per tap, bias zero.
    """

    def __init__(self, channels: int, max_len: int, groups: int = 1, kernel: int = 1, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        if groups == 0:  # heads 0 is the flat mixer, which groups=1 spells
            raise ValueError("CausalToeplitz: groups must be >= 1, got 0")
        # The Toeplitz layer of a zoo ToeplitzMixer with `groups` heads: the C++
        # config reader checks the sizes, the C++ init gives the values.
        self._config = resolve("CausalToeplitz", {
            "arch": "tmm", "vocab_size": 1, "d_model": channels, "n_layers": 1, "max_len": max_len,
            "heads": 0 if groups == 1 else groups, "kernel": kernel}, {"d_model": "channels", "heads": "groups"})
        self.channels, self.max_len, self.groups, self.kernel = channels, max_len, groups, kernel
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(groups, kernel, max_len, **kw))
        self.bias = nn.Parameter(torch.empty(groups, max_len, **kw)) if bias else None
        if self.weight.device.type != "meta":
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The C++ ToeplitzMixer's init of its vectors and bias."""
        values = initial_values(self._config, "mixer")
        for name in ("weight", "bias"):
            if getattr(self, name) is not None:
                getattr(self, name).copy_(values[name])

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B x L x C -> B x L x C
        return ops.causal_toeplitz(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"channels={self.channels}, max_len={self.max_len}, groups={self.groups}, kernel={self.kernel}, "
                f"bias={self.bias is not None}")
