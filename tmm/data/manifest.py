"""The shard folder's index, ``manifest.json`` (written by
:func:`tmm.data.prepare_corpus`): the settings, the vocabulary, and the
token counts of each finished chunk's two shards.

    {"format": "tmm-token-shards", "version": 1, "vocab_size": 256, "dtype": "uint16",
     "tokenizer": "byte" | "tokenizer.json", "complete": true, "settings": {...},
     "chunks": {"0": {"train": 1048310, "val": 55120, "text_bytes": 1103430}, ...}}
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["MANIFEST", "TOKENIZER", "SPLITS", "shard_name", "read_manifest", "split_shards"]

MANIFEST = "manifest.json"
TOKENIZER = "tokenizer.json"
SPLITS = ("train", "val")


def shard_name(split: str, index: int) -> str:
    return f"{split}-{int(index):05d}.tok"


def read_manifest(folder) -> dict:
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder}: no {MANIFEST}: not a folder written by tmm.data.prepare_corpus "
                                "(scripts/prepare_corpus.py --out)") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: not JSON ({type(e).__name__}: {e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "tmm-token-shards":
        raise ValueError(f"{path}: format {manifest.get('format') if isinstance(manifest, dict) else None!r}, "
                         "expected 'tmm-token-shards'")
    if not (_is_int(manifest.get("version")) and manifest["version"] == 1):
        raise ValueError(f"{path}: version {manifest.get('version')!r}, this code reads version 1")
    _check_fields(path, manifest)
    return manifest


def _is_int(value, low=0):
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _check_fields(path, manifest):
    """ValueError naming the first field that does not hold what the readers expect."""
    from .shard_format import token_dtype

    def bad(key, expected):
        raise ValueError(f"{path}: \"{key}\" holds {manifest.get(key, 'nothing')!r}, expected {expected}")

    vocab = manifest.get("vocab_size")
    if not _is_int(vocab, 1) or vocab > 2**32:
        bad("vocab_size", "an int in [1, 2**32]")
    if manifest.get("dtype") != token_dtype(vocab).name:
        bad("dtype", f"{token_dtype(vocab).name!r} (the token dtype of a vocabulary of {vocab})")
    if manifest.get("tokenizer") not in ("byte", TOKENIZER):
        bad("tokenizer", f"'byte' or {TOKENIZER!r}")
    if not isinstance(manifest.get("complete"), bool):
        bad("complete", "true or false")
    if not isinstance(manifest.get("settings"), dict):
        bad("settings", "an object")
    if not isinstance(manifest.get("tokenizer_sha256"), str):
        bad("tokenizer_sha256", "a string")
    if not isinstance(manifest.get("chunks"), dict):
        bad("chunks", "an object")
    for index, counts in manifest["chunks"].items():
        if not (index.isascii() and index.isdigit() and str(int(index)) == index):
            raise ValueError(f"{path}: chunk {index!r}: expected a chunk number (0, 1, ...)")
        if not isinstance(counts, dict) or not all(_is_int(counts.get(k)) for k in (*SPLITS, "text_bytes")):
            raise ValueError(f"{path}: chunk {index}: {counts!r}, expected an object of int token counts "
                             f"{', '.join(SPLITS)} and text_bytes")


def split_shards(folder, split: str):
    """(paths, token counts) of a complete folder's ``split`` shards, in chunk order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    manifest = read_manifest(folder)
    if not manifest["complete"]:
        raise ValueError(f"{folder}: the shards are not all written ({len(manifest['chunks'])} chunks so far): "
                         "run prepare_corpus again on it to finish")
    chunks = sorted(manifest["chunks"].items(), key=lambda kv: int(kv[0]))
    return ([Path(folder) / shard_name(split, int(k)) for k, _ in chunks], [c[split] for _, c in chunks])
