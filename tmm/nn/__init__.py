"""torch.nn modules built on the tmm operators: plain Python layers, each the
mathematics and parameter names of its C++ counterpart, that drop into any
PyTorch model (docs/interop.md)."""
from .causal_toeplitz import CausalToeplitz
from .hyena import HyenaFilter, HyenaOperator, HyenaState, ShortConv
from .layers import RMSNorm
from .mamba2 import Mamba2Mixer, Mamba2State
from .sequence_model import SequenceModel, resolve_mixer_factory
from .mixer_block import MixerBlock
from .toeplitz_mixer import ToeplitzMixer, ToeplitzMixerState, causal_matrix_mix

TMMBlock = MixerBlock  # its former name, which docs/interop.md documented: kept for code written against it

__all__ = ["CausalToeplitz", "HyenaFilter", "HyenaOperator", "HyenaState", "Mamba2Mixer", "Mamba2State", "MixerBlock",
           "RMSNorm", "SequenceModel", "ShortConv", "TMMBlock", "ToeplitzMixer", "ToeplitzMixerState",
           "causal_matrix_mix", "resolve_mixer_factory"]
