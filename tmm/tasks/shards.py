"""Language modelling on token shards (:mod:`tmm.data`): the ``lm`` task's
windows, read from a folder written by ``scripts/prepare_corpus.py --out``.
Training reads its positioned stream (``batch_at``: the seeded epoch order of
:class:`tmm.data.ShardLoader`, each rank its rows, the position saved in the
checkpoints); ``batch`` and ``eval_batch`` draw random windows.
docs/training.md, sections 4 and 14.
"""
from __future__ import annotations

import torch

from . import Task, check_batch_args, resolve_options
from .lm import BitsPerByte
from ..data.lm_tokenizer import LMTokenizer

DEFAULTS = {"path": None, "seq_len": 128, "seed": 0}


def _tokenizer(folder, manifest):
    from .. import text

    if manifest["tokenizer"] == "byte":
        return LMTokenizer(text.Tokenizer.byte_level())
    js = (folder / manifest["tokenizer"]).read_text(encoding="utf-8")
    return LMTokenizer(text.Tokenizer.from_str(js), js)


class ShardsTask(BitsPerByte, Task):
    name = "shards"

    def __init__(self, **options):
        from pathlib import Path

        from ..data import ShardWindows, read_manifest

        opts = resolve_options(self.name, DEFAULTS, options)
        if not opts["path"]:
            raise ValueError("shards: option path (the folder of scripts/prepare_corpus.py --out) is required")
        if isinstance(opts["path"], Path):
            opts["path"] = str(opts["path"])
        if not isinstance(opts["path"], str):
            raise TypeError(f"shards: option path must be a str (a folder), got {opts['path']!r}")
        if opts["seq_len"] < 1:
            raise ValueError(f"shards: seq_len must be >= 1, got {opts['seq_len']}")
        if opts["seed"] < 0:
            raise ValueError(f"shards: seed must be >= 0, got {opts['seed']}")
        folder = Path(opts["path"])
        manifest = read_manifest(folder)
        self.train = ShardWindows(folder, opts["seq_len"], "train")
        self.held_out = ShardWindows(folder, opts["seq_len"], "val")
        self.tokenizer = _tokenizer(folder, manifest)
        self.seq_len, self.seed = opts["seq_len"], opts["seed"]
        self.vocab_size = int(manifest["vocab_size"])
        self.options = opts

    def batch_at(self, position: int, batch_size: int, rank: int = 0, world_size: int = 1):
        """This rank's rows of the global batch of ``batch_size`` training
        windows at stream position ``position`` (``position // batch_size``
        global batches in): ``(input_ids, labels)``, int64 on the CPU,
        ``batch_size / world_size x seq_len``."""
        from ..data.loader import rank_window_ids

        ids = rank_window_ids(position, batch_size, rank, world_size, self.train.num_windows, self.seed)
        w = torch.from_numpy(self.train.windows(ids))
        return w[:, :-1], w[:, 1:]

    def _random(self, data, batch_size, generator):
        check_batch_args(batch_size, generator)
        ids = torch.randint(0, data.num_windows, (batch_size,), generator=generator, device=generator.device)
        w = torch.from_numpy(data.windows(ids.cpu().numpy())).to(generator.device)
        return w[:, :-1], w[:, 1:]

    def batch(self, batch_size: int, generator: torch.Generator):
        """Training windows drawn uniformly from the generator."""
        return self._random(self.train, batch_size, generator)

    def eval_batch(self, batch_size: int, generator: torch.Generator):
        """Held-out windows drawn uniformly from the generator."""
        return self._random(self.held_out, batch_size, generator)

    def describe(self) -> str:
        return (f"shards: {self.options['path']}, {self.tokenizer.name} tokenizer (vocab {self.vocab_size}), "
                f"train {int(self.train.counts.sum()):,} tokens ({self.train.num_windows:,} windows of "
                f"{self.seq_len + 1}) in {len(self.train.paths)} shards, held-out {int(self.held_out.counts.sum()):,} "
                "tokens")
