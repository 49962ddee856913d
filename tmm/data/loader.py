"""Training windows streamed from token shards (:class:`ShardLoader`):
windows of ``seq_len + 1`` tokens every ``seq_len`` tokens of a shard, each
epoch in a seeded order, each rank its contiguous block of the global batch,
the whole state one counter (``position``), one batch in memory whatever the
corpus size. docs/training.md, section 3, is the manual.

    loader = ShardLoader("shards/", seq_len=512, batch_size=16, seed=0)
    inputs, targets = next(loader)               # int64 batch_size x seq_len
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..distributed import rank_and_world_size
from . import shard_format
from .manifest import read_manifest, split_shards
from .window_order import window_at

__all__ = ["ShardWindows", "ShardLoader", "stream_window_ids", "rank_window_ids"]


def _check_int(owner, name, value, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{owner}: {name} must be an int >= {low}, got {value!r}")


class ShardWindows:
    """The windows of ``seq_len + 1`` tokens of a set of shards: ``shards``
    is a folder written by :func:`tmm.data.prepare_corpus` (its ``split``
    shards) or a list of shard paths. ``windows(indices)`` reads some."""

    def __init__(self, shards, seq_len: int, split: str = "train"):
        _check_int("ShardWindows", "seq_len", seq_len, 1)
        self.seq_len = int(seq_len)
        self.vocab_size = None
        listed = None
        if isinstance(shards, (str, os.PathLike)):
            self.folder = Path(shards)
            paths, counts = split_shards(self.folder, split)
            manifest = read_manifest(self.folder)
            self.vocab_size = manifest["vocab_size"]
            listed = [(manifest["dtype"], c) for c in counts]
        else:
            self.folder, paths = None, [Path(p) for p in shards]
        headers = [shard_format.read_header(p) for p in paths]  # checks every file before training starts
        for p, h, expected in zip(paths, headers, listed or []):  # each shard as its folder's manifest lists it
            if (h["dtype"].name, h["count"]) != expected:
                raise shard_format.ShardFormatError(
                    f"token shard {p}: {h['count']} tokens of {h['dtype'].name}, its folder's manifest lists "
                    f"{expected[1]} of {expected[0]}")
        self.paths = paths
        self.dtypes = [h["dtype"] for h in headers]
        self.counts = np.array([h["count"] for h in headers], dtype=np.int64)
        per_shard = np.maximum(self.counts - 1, 0) // self.seq_len
        self.first = np.concatenate([[0], np.cumsum(per_shard)])  # window index where each shard starts
        self.num_windows = int(self.first[-1])
        if self.num_windows == 0:
            where = self.folder if self.folder is not None else f"{len(paths)} shard files"
            raise ValueError(f"ShardWindows: {where} ({split}) hold {int(self.counts.sum())} tokens, no window of "
                             f"seq_len + 1 = {self.seq_len + 1} tokens")

    def windows(self, indices) -> np.ndarray:
        """The windows ``indices`` (ints in [0, num_windows)) as an int64
        array ``len(indices) x (seq_len + 1)``."""
        indices = np.asarray(indices, dtype=np.int64)
        shard = np.searchsorted(self.first, indices, side="right") - 1
        start = (indices - self.first[shard]) * self.seq_len
        out = np.empty((len(indices), self.seq_len + 1), dtype=np.int64)
        for s in np.unique(shard):
            rows = np.nonzero(shard == s)[0]
            # Mapped for this batch only: the pages read leave this process's memory with the map.
            tokens = np.memmap(self.paths[s], dtype=self.dtypes[s], mode="r", offset=shard_format.HEADER_BYTES,
                               shape=(int(self.counts[s]),))
            out[rows] = tokens[start[rows, None] + np.arange(self.seq_len + 1)]
            del tokens
        return out


def stream_window_ids(start: int, count: int, n: int, seed: int) -> np.ndarray:
    """The windows at global stream positions start .. start + count - 1 of
    a stream of epochs of ``n`` windows (each epoch in its seeded order)."""
    pos = np.arange(start, start + count, dtype=np.int64)
    epochs, within = pos // n, pos % n
    out = np.empty(count, dtype=np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        out[sel] = window_at(within[sel], n, seed, int(e))
    return out


def rank_window_ids(position: int, global_batch: int, rank: int, world_size: int, n: int, seed: int) -> np.ndarray:
    """Rank ``rank``'s windows of the global batch of ``global_batch``
    windows that starts at stream position ``position``: the rank-th of
    ``world_size`` contiguous blocks."""
    if global_batch % world_size:
        raise ValueError(f"the global batch of {global_batch} windows does not divide among {world_size} ranks")
    per_rank = global_batch // world_size
    return stream_window_ids(position + rank * per_rank, per_rank, n, seed)


class ShardLoader:
    """This rank's batches of training windows (docs/training.md, section 3):
    an endless iterator of ``(inputs, targets)``, int64 tensors
    ``batch_size x seq_len`` on the CPU (``targets`` = the window shifted by one).

    shards: a folder of :func:`tmm.data.prepare_corpus` or a list of shard paths.
    batch_size: windows per batch on this rank (the global batch is
    ``batch_size * world_size``). rank, world_size: default to
    ``torch.distributed``'s when it is initialised, else 0 and 1.
    """

    def __init__(self, shards, seq_len: int, batch_size: int, *, seed: int = 0, rank=None, world_size=None,
                 split: str = "train"):
        _check_int("ShardLoader", "batch_size", batch_size, 1)
        _check_int("ShardLoader", "seed", seed, 0)
        dist_rank, dist_world = rank_and_world_size()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world if world_size is None else world_size
        _check_int("ShardLoader", "world_size", self.world_size, 1)
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or not 0 <= self.rank < self.world_size:
            raise ValueError(f"ShardLoader: rank must be an int in [0, world_size={self.world_size}), got {self.rank!r}")
        self.data = shards if isinstance(shards, ShardWindows) else ShardWindows(shards, seq_len, split)
        self.seq_len, self.batch_size, self.seed = self.data.seq_len, int(batch_size), int(seed)
        self.position = 0  # windows consumed by all ranks together

    @property
    def num_windows(self) -> int:
        return self.data.num_windows

    @property
    def epoch(self) -> int:
        """The epoch of the next window."""
        return self.position // self.data.num_windows

    def next_windows(self) -> np.ndarray:
        """This rank's next batch of windows (int64, batch_size x (seq_len + 1)); advances the stream."""
        ids = rank_window_ids(self.position, self.batch_size * self.world_size, self.rank, self.world_size,
                              self.data.num_windows, self.seed)
        self.position += self.batch_size * self.world_size
        return self.data.windows(ids)

    def __iter__(self):
        return self

    def __next__(self):
        w = torch.from_numpy(self.next_windows())
        return w[:, :-1], w[:, 1:]

    def state_dict(self) -> dict:
        """The stream's place (JSON-able): what :meth:`load_state_dict` needs to continue exactly."""
        return {"position": self.position, "seed": self.seed, "seq_len": self.seq_len,
                "num_windows": self.data.num_windows}

    def load_state_dict(self, state: dict) -> None:
        """Continues from a :meth:`state_dict` of a loader over the same
        shards, seed and seq_len (any world size with the same global batch)."""
        if not isinstance(state, dict) or "position" not in state:
            raise ValueError(f"ShardLoader.load_state_dict: expected a dict from state_dict(), got {state!r}")
        mine = self.state_dict()
        diff = [f"{k}: state {state.get(k)!r}, loader {mine[k]!r}" for k in ("seed", "seq_len", "num_windows")
                if state.get(k) != mine[k]]
        if diff:
            raise ValueError(f"ShardLoader.load_state_dict: the state is of another stream ({'; '.join(diff)})")
        position = state["position"]
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"ShardLoader.load_state_dict: position must be an int >= 0, got {position!r}")
        self.position = position
