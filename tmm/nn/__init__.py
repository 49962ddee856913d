"""torch.nn modules built on the tmm operators."""
from .causal_toeplitz import CausalToeplitz

__all__ = ["CausalToeplitz"]
