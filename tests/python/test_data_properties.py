"""Property-based fuzzing (Hypothesis) of the Python readers of token shard
folders (tmm.data): the shard file (tmm.data.shard_format) and its folder's
manifest.json (tmm.data.manifest), the Python side of tests/fuzz.

- a shard round-trips any tokens in either dtype;
- every byte of the 32-byte header is checked: any single-byte change (the
  magic's last NUL and the reserved field included) is a ShardFormatError,
  but for the dtype code of an empty shard (2 <-> 4 describes the same
  empty file), which its folder's manifest catches;
- any truncation or extension of a shard is a ShardFormatError;
- any bytes as manifest.json, and any one field of a valid manifest replaced
  by any JSON value or removed, are read or refused with a ValueError naming
  the file, never another exception; what is read lists shards a reader can
  open.
"""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmm.data import ShardWindows, read_manifest, split_shards
from tmm.data import shard_format as sf
from tmm.data.manifest import MANIFEST, shard_name

# Bounded for CI: a few hundred examples per property, derandomised (the same inputs on every run).
PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

DTYPES = st.sampled_from([np.dtype("<u2"), np.dtype("<u4")])


@st.composite
def shards(draw, min_size=0):
    dtype = draw(DTYPES)
    tokens = draw(st.lists(st.integers(0, np.iinfo(dtype).max), min_size=min_size, max_size=64))
    return np.array(tokens, dtype=np.int64), dtype


def write(tmp_path, data, name="s.tok"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@PROPERTY
@given(shard=shards())
def test_a_shard_round_trips(tmp_path, shard):
    tokens, dtype = shard
    path = write(tmp_path, sf.encode_shard(tokens, dtype))
    assert sf.read_header(path) == {"version": 1, "dtype": dtype, "count": len(tokens)}
    assert np.array_equal(np.asarray(sf.open_shard(path)), tokens)


@PROPERTY
@given(shard=shards(), where=st.integers(0, sf.HEADER_BYTES - 1), value=st.integers(0, 255))
def test_every_header_byte_is_checked(tmp_path, shard, where, value):
    tokens, dtype = shard
    data = bytearray(sf.encode_shard(tokens, dtype))
    if data[where] == value:
        value ^= 0xFF
    data[where] = value
    path = write(tmp_path, bytes(data))
    dtype_field = where in range(12, 16)
    if len(tokens) == 0 and dtype_field and int.from_bytes(data[12:16], "little") in (2, 4):
        sf.read_header(path)  # an empty shard of the other dtype: the folder's manifest catches it (below)
        return
    with pytest.raises(sf.ShardFormatError, match=f"token shard {path}"):
        sf.read_header(path)


@PROPERTY
@given(shard=shards(), cut=st.integers(0, 200), extra=st.binary(min_size=1, max_size=16))
def test_a_truncated_or_extended_shard_is_refused(tmp_path, shard, cut, extra):
    tokens, dtype = shard
    data = sf.encode_shard(tokens, dtype)
    for damaged in (data[:cut % len(data)], data + extra):
        with pytest.raises(sf.ShardFormatError, match="truncated|too long"):
            sf.read_header(write(tmp_path, damaged))


def folder_of(tmp_path, train, val, dtype=np.dtype("<u2")):
    """A complete one-chunk folder (as tmm.data.prepare_corpus writes it): its manifest as a dict."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for split, tokens in (("train", train), ("val", val)):
        sf.write_shard(tmp_path / shard_name(split, 0), np.asarray(tokens), dtype)
    manifest = {"format": "tmm-token-shards", "version": 1, "settings": {}, "vocab_size": 256 if dtype.itemsize == 2
                else 70000, "dtype": dtype.name, "tokenizer": "byte", "tokenizer_sha256": "0" * 64,
                "complete": True, "chunks": {"0": {"train": len(train), "val": len(val), "text_bytes": 10}}}
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    return manifest


def test_an_empty_shard_of_the_other_dtype_is_caught_by_the_manifest(tmp_path):
    folder_of(tmp_path, list(range(40)), [])
    sf.write_shard(tmp_path / shard_name("val", 0), np.zeros(0), np.dtype("<u4"))
    with pytest.raises(sf.ShardFormatError, match="0 tokens of uint32, its folder's manifest lists 0 of uint16"):
        ShardWindows(tmp_path, seq_len=4, split="val")
    sf.write_shard(tmp_path / shard_name("train", 0), np.arange(39), np.dtype("<u2"))  # one token short
    with pytest.raises(sf.ShardFormatError, match="39 tokens of uint16, its folder's manifest lists 40"):
        ShardWindows(tmp_path, seq_len=4)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
FIELDS = ("format", "version", "settings", "vocab_size", "dtype", "tokenizer", "tokenizer_sha256", "complete",
          "chunks")


def read_or_refuse(folder):
    """What reading the folder gives: None when refused with a ValueError naming the manifest."""
    try:
        manifest = read_manifest(folder)
        listed = [split_shards(folder, split) for split in ("train", "val")] if manifest["complete"] else None
    except ValueError as e:
        assert str(folder / MANIFEST) in str(e), e
        return None
    return manifest, listed


@PROPERTY
@given(data=st.binary(max_size=200))
def test_any_bytes_as_the_manifest_are_read_or_refused(tmp_path, data):
    (tmp_path / MANIFEST).write_bytes(data)
    read_or_refuse(tmp_path)


@PROPERTY
@given(field=st.sampled_from(FIELDS), value=JSON, remove=st.booleans(), chunk_field=st.booleans())
def test_any_field_changed_is_read_or_refused(tmp_path, field, value, remove, chunk_field):
    manifest = folder_of(tmp_path / "f", list(range(30)), list(range(20)))
    target = manifest["chunks"]["0"] if chunk_field else manifest
    key = ("train", "val", "text_bytes")[FIELDS.index(field) % 3] if chunk_field else field
    if remove:
        del target[key]
    else:
        target[key] = value
    (tmp_path / "f" / MANIFEST).write_text(json.dumps(manifest))
    read = read_or_refuse(tmp_path / "f")
    if read is not None:  # accepted: what it lists opens, or is refused as a shard
        _, listed = read
        for paths, counts in listed or []:
            for path, count in zip(paths, counts):
                assert isinstance(count, int) and count >= 0
                if os.path.exists(path):
                    sf.read_header(path)
