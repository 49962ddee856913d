"""tmm: Toeplitz MLP Mixers and the sub-quadratic models they are compared with.

Importing tmm loads the native library (libtmm_torch) that registers the
operators under ``torch.ops.tmm``; ``tmm.ops`` and ``tmm.nn`` wrap them.
``tmm.models`` holds the C++ model zoo as ``torch.nn.Module`` objects;
``tmm.text`` the tokenizers.
"""
import torch

from . import _build_info

if torch.__version__ != _build_info.torch_version:
    raise ImportError(
        f"tmm was built against torch {_build_info.torch_version} but torch {torch.__version__} "
        "is imported; rebuild tmm for this torch (scripts/test.sh, or "
        "pip install --no-build-isolation .)"
    )

from . import _C  # noqa: E402  (registers torch.ops.tmm)
from . import io, models, nn, ops, text  # noqa: E402

__version__ = _build_info.version
with_cuda = _build_info.with_cuda

__all__ = ["io", "ops", "nn", "models", "text", "__version__", "with_cuda"]
