"""Tokenizers: text <-> token ids for the language models. ``Tokenizer`` is the
C++ ``tmm::text::Tokenizer`` (byte level, or a byte-level BPE tokenizer.json:
the same ids from Python and C++); ``train_bpe`` trains a byte-level BPE with
the ``tokenizers`` package. docs/tokenizers.md is the manual.

    tok = tmm.text.Tokenizer.from_file("tokenizer.json")   # or Tokenizer.byte_level()
    ids = tok.encode("héllo"); text = tok.decode(ids)
"""
import os
from collections.abc import Iterable

from ._C import Tokenizer
from .files import atomic_write_text

Tokenizer.__module__ = __name__

__all__ = ["Tokenizer", "train_bpe", "train_bpe_json"]


def _files(source):
    """The list of paths when ``source`` names files, else None (an iterable of texts)."""
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    elif not isinstance(source, (list, tuple)) or not all(isinstance(p, (str, os.PathLike)) for p in source):
        return None
    paths = [os.fspath(p) for p in source]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(f"train_bpe: no such file {missing[0]!r} (a str or a list of str names files; "
                                "pass iter(texts) to train on strings)")
    return paths


def train_bpe_json(files_or_iterator, vocab_size, *, special_tokens=("<|endoftext|>",),
                   add_prefix_space=False, min_frequency=2, pretty=False) -> str:
    """Trains a byte-level BPE (GPT-2 style) with the ``tokenizers`` package
    and returns its tokenizer.json text: tmm's one BPE trainer.

    files_or_iterator: a path or a list/tuple of paths of text files, or any
    other iterable of str (a generator, ``iter(list_of_texts)``).
    vocab_size: the size to reach: 256 byte tokens + special tokens + merges.
    min_frequency: merges of pairs seen fewer times are not learned (0 or 1:
    every pair counts).
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"train_bpe: vocab_size must be an int, got {vocab_size!r}")
    try:
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise ImportError("train_bpe needs the `tokenizers` package (pip install tokenizers, or tmm's extra: tmm[bpe])") from None

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(special_tokens):
        raise ValueError(f"train_bpe: vocab_size {vocab_size} is below the {len(alphabet)} byte tokens "
                         f"+ {len(special_tokens)} special tokens")
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(special_tokens), initial_alphabet=alphabet,
                                  show_progress=False)
    files = _files(files_or_iterator)
    if files is not None:
        tok.train(files, trainer)
    elif isinstance(files_or_iterator, Iterable):
        tok.train_from_iterator(files_or_iterator, trainer)
    else:
        raise TypeError(f"train_bpe: expected a path, a list of paths or an iterable of str, "
                        f"got {type(files_or_iterator).__name__}")
    return tok.to_str(pretty=pretty)


def train_bpe(files_or_iterator, vocab_size, path, **options):
    """Trains a byte-level BPE (:func:`train_bpe_json`, same arguments and
    options), writes its tokenizer.json to ``path`` (atomically) and returns
    the loaded ``Tokenizer``."""
    atomic_write_text(path, train_bpe_json(files_or_iterator, vocab_size, pretty=True, **options))
    return Tokenizer.from_file(os.fspath(path))
