"""Token shards for training at scale: a corpus tokenised once into
memory-mapped files (:mod:`tmm.data.shard_format`, :mod:`tmm.data.prepare`)
and a streaming loader over them, seeded, per rank, resumable mid-shard
(:mod:`tmm.data.loader`, :mod:`tmm.data.window_order`). docs/training.md,
sections 1 to 3, is the manual.

    tmm.data.prepare_corpus("fineweb-edu/", "shards/", tokenizer="bpe", vocab=8192, workers=8)
    inputs, targets = next(tmm.data.ShardLoader("shards/", seq_len=512, batch_size=16, seed=0))
"""
from .loader import ShardLoader, ShardWindows
from .manifest import read_manifest, split_shards
from .prepare import PrepareError, prepare_corpus
from .shard_format import ShardFormatError, open_shard, read_header, token_dtype, write_shard

__all__ = ["prepare_corpus", "PrepareError", "ShardLoader", "ShardWindows", "read_manifest", "split_shards",
           "open_shard", "read_header", "write_shard", "token_dtype", "ShardFormatError"]
