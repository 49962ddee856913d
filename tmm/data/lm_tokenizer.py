"""The ``lm`` task's view of a tokenizer: tmm's C++ ``tmm.text.Tokenizer``
(the same ids in Python, C++ and the CLI) with NumPy ids and the number of
UTF-8 bytes each token stands for (for bits per byte).

    tok = make_tokenizer("byte")                   # ids = UTF-8 bytes, vocab 256
    tok = make_tokenizer("bpe", texts, 1024)       # a byte-level BPE trained on texts
    ids = tok.encode("In the beginning")           # np.int32 array
    tok.token_bytes[ids].sum()                     # the UTF-8 bytes those tokens stand for
"""
from __future__ import annotations

import json

import numpy as np

from .. import text

__all__ = ["LMTokenizer", "make_tokenizer"]


class LMTokenizer:
    """A ``tmm.text.Tokenizer`` with NumPy ids. ``name`` is "byte" or "bpe";
    ``token_bytes[i]`` is the number of bytes token i stands for;
    ``json_text`` is the BPE's tokenizer.json (None for bytes)."""

    def __init__(self, tokenizer: "text.Tokenizer", json_text: str | None = None):
        self._tok = tokenizer
        self.name = tokenizer.kind
        self.json_text = json_text
        self.vocab_size = tokenizer.vocab_size
        self.token_bytes = np.array([len(tokenizer.token_bytes(i)) for i in range(self.vocab_size)], dtype=np.int64)

    def encode(self, text_or_bytes) -> np.ndarray:
        return np.asarray(self._tok.encode(text_or_bytes), dtype=np.int32)

    def encode_batch(self, texts):
        return [self.encode(t) for t in texts]

    def decode(self, ids) -> str:
        return self._tok.decode([int(i) for i in ids])

    def to_json(self):
        """The tokenizer.json object of a BPE (what ``Tokenizer.from_str`` reads), {"kind": "byte"} for bytes."""
        return json.loads(self.json_text) if self.json_text is not None else {"kind": self.name}


def make_tokenizer(kind: str, texts=None, vocab_size: int = 1024) -> LMTokenizer:
    """``"byte"``, or ``"bpe"`` of ``vocab_size`` tokens (>= 257: the 256 bytes
    and at least one merge; no special tokens) trained on ``texts``."""
    if kind == "byte":
        return LMTokenizer(text.Tokenizer.byte_level())
    if kind != "bpe":
        raise ValueError(f"tokenizer must be 'byte' or 'bpe', got {kind!r}")
    if texts is None:
        raise ValueError("make_tokenizer: 'bpe' needs the texts to train on")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 257:
        raise ValueError(f"make_tokenizer: vocab_size must be an int >= 257 (256 bytes + merges), got {vocab_size!r}")
    # min_frequency 0: every pair may merge (a small corpus still reaches vocab_size).
    js = text.train_bpe_json(iter(texts), vocab_size, special_tokens=(), min_frequency=0)
    return LMTokenizer(text.Tokenizer.from_str(js), js)
