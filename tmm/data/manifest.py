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
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder}: no {MANIFEST}: not a folder written by tmm.data.prepare_corpus "
                                "(scripts/prepare_corpus.py --out)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "tmm-token-shards":
        raise ValueError(f"{path}: format {manifest.get('format') if isinstance(manifest, dict) else None!r}, "
                         "expected 'tmm-token-shards'")
    if manifest.get("version") != 1:
        raise ValueError(f"{path}: version {manifest.get('version')!r}, this code reads version 1")
    return manifest


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
