"""safetensors files through tmm's C++ reader and writer (``tmm/io/safetensors.h``).

    from tmm.io.safetensors import load_file, save_file
    save_file({"w": torch.ones(3)}, "w.safetensors", {"note": "any str -> str map"})
    tensors, metadata = load_file("w.safetensors")

The files are the standard format (readable by the ``safetensors`` package and
vice versa); the C++ side validates every header it reads and writes
atomically (temporary file, fsync, rename).
"""
import os

import torch

from .. import _C


def save_file(tensors: dict, path, metadata: dict = None) -> None:
    """Write ``{name: tensor}`` (any device or strides) and a str -> str
    metadata map to ``path``, replacing it atomically."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"save_file: '{name}' is a {type(t).__name__}, not a torch.Tensor")
    _C._save_safetensors(os.fspath(path), list(tensors.items()), dict(metadata or {}))


def load_file(path) -> tuple:
    """Read and validate ``path``: ``({name: CPU tensor}, metadata)``."""
    return _C._load_safetensors(os.fspath(path))


__all__ = ["save_file", "load_file"]
