"""Token shards for training at scale: a corpus tokenised once into
memory-mapped files, and a streaming loader over them (docs/training.md).

    tmm.data.prepare_corpus("fineweb-edu/", "shards/", tokenizer="bpe", vocab=8192, workers=8)
    loader = tmm.data.ShardLoader("shards/", seq_len=512, batch_size=16, seed=0)   # this rank's part
    inputs, targets = next(loader)                   # int64, batch_size x seq_len
    state = loader.state_dict(); loader.load_state_dict(state)   # exact resume

- :mod:`tmm.data.shard_format`: the file (a 32-byte header, uint16 or uint32 tokens);
- :mod:`tmm.data.prepare`: the corpus to shards, in parallel, resumable;
- :mod:`tmm.data.window_order`: the seeded order of the windows (O(1) memory);
- :mod:`tmm.data.loader`: the windows, per rank, resumable mid-shard.
"""
from .loader import ShardLoader, ShardWindows
from .manifest import read_manifest, split_shards
from .prepare import PrepareError, prepare_corpus
from .shard_format import ShardFormatError, open_shard, read_header, token_dtype, write_shard

__all__ = ["prepare_corpus", "PrepareError", "ShardLoader", "ShardWindows", "read_manifest", "split_shards",
           "open_shard", "read_header", "write_shard", "token_dtype", "ShardFormatError"]
