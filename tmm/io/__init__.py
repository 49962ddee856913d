"""File formats read and written by tmm's C++ code.

- :mod:`tmm.io.safetensors`: safetensors files (``save_file``, ``load_file``),
  the C++ reader and writer of ``tmm/io/safetensors.h``.
"""
from . import safetensors

__all__ = ["safetensors"]
