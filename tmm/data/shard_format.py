"""The token shard file: a 32-byte little-endian header (magic
``b"TMMTOKS\\0"``, format version, bytes per token, token count, reserved),
then the tokens as uint16 or uint32. docs/training.md, section 2, has the
byte layout and a reader that needs nothing but NumPy.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..files import atomic_write_bytes

__all__ = ["MAGIC", "VERSION", "HEADER_BYTES", "HEADER_DTYPE", "ShardFormatError", "token_dtype",
           "encode_shard", "write_shard", "read_header", "open_shard"]

MAGIC = b"TMMTOKS\0"
VERSION = 1
HEADER_BYTES = 32
HEADER_DTYPE = np.dtype([("magic", "S8"), ("version", "<u4"), ("dtype", "<u4"), ("count", "<u8"),
                         ("reserved", "<u8")])
_DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}
assert HEADER_DTYPE.itemsize == HEADER_BYTES


class ShardFormatError(ValueError):
    """A file that is not a valid token shard; the message names the file,
    the field, what it holds and what was expected."""


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id of a ``vocab_size`` vocabulary fits, else uint32."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or not 1 <= vocab_size <= 2**32:
        raise ValueError(f"token_dtype: vocab_size must be an int in [1, 2**32], got {vocab_size!r}")
    return _DTYPES[2] if vocab_size <= 2**16 else _DTYPES[4]


def encode_shard(tokens, dtype) -> bytes:
    """The bytes of a shard holding ``tokens`` (1-D integers) stored as
    ``dtype`` (uint16 or uint32); a token that does not fit is an error."""
    dtype = np.dtype(dtype).newbyteorder("<")
    if dtype not in _DTYPES.values():
        raise ValueError(f"encode_shard: dtype must be uint16 or uint32, got {dtype}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"encode_shard: tokens must be 1-D, got shape {tokens.shape}")
    if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) > np.iinfo(dtype).max):
        raise ValueError(f"encode_shard: token ids span [{int(tokens.min())}, {int(tokens.max())}], "
                         f"outside {dtype.name}'s [0, {np.iinfo(dtype).max}]")
    header = np.zeros(1, HEADER_DTYPE)
    header["magic"], header["version"] = MAGIC, VERSION
    header["dtype"], header["count"] = dtype.itemsize, tokens.size
    return header.tobytes() + tokens.astype(dtype, copy=False).tobytes()


def write_shard(path, tokens, dtype) -> None:
    """Writes a shard atomically (a reader or a kill never sees half of one)."""
    atomic_write_bytes(path, encode_shard(tokens, dtype))


def read_header(path) -> dict:
    """The header of the shard at ``path`` as {"version", "dtype", "count"},
    checked against the file's size; :class:`ShardFormatError` says what is wrong."""
    path = Path(path)
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise ShardFormatError(f"token shard {path}: truncated: {size} bytes, shorter than the "
                               f"{HEADER_BYTES}-byte header")
    header = np.fromfile(path, dtype=HEADER_DTYPE, count=1)[0]
    if header["magic"] != MAGIC.rstrip(b"\0"):  # numpy's S8 drops trailing NULs
        raise ShardFormatError(f"token shard {path}: bad magic {bytes(header['magic'])!r}, expected {MAGIC!r} "
                               "(not a tmm token shard)")
    if int(header["version"]) != VERSION:
        raise ShardFormatError(f"token shard {path}: format version {int(header['version'])}, "
                               f"this code reads version {VERSION}")
    code = int(header["dtype"])
    if code not in _DTYPES:
        raise ShardFormatError(f"token shard {path}: dtype code {code}, expected 2 (uint16) or 4 (uint32)")
    if int(header["reserved"]) != 0:
        raise ShardFormatError(f"token shard {path}: reserved field (bytes 24-31) holds {int(header['reserved'])}, "
                               "expected 0")
    count = int(header["count"])
    expected = HEADER_BYTES + count * code
    if size != expected:
        what = "truncated" if size < expected else "too long"
        raise ShardFormatError(f"token shard {path}: {what}: {size} bytes, expected {expected} "
                               f"(a {HEADER_BYTES}-byte header + {count} tokens x {code} bytes)")
    return {"version": VERSION, "dtype": _DTYPES[code], "count": count}


def open_shard(path) -> np.ndarray:
    """The tokens of a shard as a read-only ``np.memmap`` (nothing is read
    until indexed; the page cache, not this process, holds what was)."""
    header = read_header(path)
    if header["count"] == 0:
        return np.zeros(0, dtype=header["dtype"])  # mmap cannot map zero bytes
    return np.memmap(path, dtype=header["dtype"], mode="r", offset=HEADER_BYTES, shape=(header["count"],))
