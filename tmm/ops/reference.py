"""The pure-PyTorch references of the causal Toeplitz operator beside the op:
defined once, in tmm.testing (importable without the native build)."""

from ..testing import causal_toeplitz_backward_reference, causal_toeplitz_dense, causal_toeplitz_fft

__all__ = ["causal_toeplitz_dense", "causal_toeplitz_fft", "causal_toeplitz_backward_reference"]
