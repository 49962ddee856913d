"""torch.nn modules over the tmm operators: the op as a layer, the mixers and
blocks of the zoo's models, and a language model around any mixer; plain
Python modules that drop into any PyTorch model (docs/interop.md)."""
from .causal_toeplitz import CausalToeplitz
from .hyena import HyenaFilter, HyenaOperator, HyenaState, ShortConv
from .language_model import LanguageModel
from .layers import RMSNorm
from .mamba2 import Mamba2Block, Mamba2Mixer, Mamba2State
from .mixer_block import HyenaBlock, MixerBlock
from .outputs import LMOutput
from .sequence_model import SequenceModel, resolve_mixer_factory
from .toeplitz_mixer import ToeplitzMixer, ToeplitzMixerState
from .transformer import Attention, TransformerBlock

__all__ = ["Attention", "CausalToeplitz", "HyenaBlock", "HyenaFilter", "HyenaOperator", "HyenaState", "LMOutput",
           "LanguageModel", "Mamba2Block", "Mamba2Mixer", "Mamba2State", "MixerBlock", "RMSNorm", "SequenceModel",
           "ShortConv", "ToeplitzMixer", "ToeplitzMixerState", "TransformerBlock", "resolve_mixer_factory"]
