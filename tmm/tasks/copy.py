"""The copy task (the authors' definition of information retention).

An example is n tokens ``a_0 .. a_{n-1}`` written twice; the model reads the
whole ``2n``-token sequence causally and is scored only on the second copy::

    position  0    1   ..  n-2      n-1    n    n+1  ..  2n-2      2n-1
    input     a_0  a_1 ..  a_{n-2}  a_{n-1} a_0 a_1  ..  a_{n-2}   a_{n-1}
    label     -100 -100 .. -100     a_0    a_1  a_2  ..  a_{n-1}   -100

``labels[t] = input[t + 1]`` for ``t`` in ``[n-1, 2n-2]`` (the logits at the
position before token i of the second copy predict that token), -100
elsewhere: n scored positions per example. The first scored position
(``t = n-1``) has to recall ``a_0`` from n positions back without having seen
any of the second copy: the task measures how much of the first half the
model carries forward, exactly as the authors' labels (the input with its
first half masked, shifted by the usual next-token shift) do.

Options (``tmm.tasks.make("copy", **options)``):

- ``n`` (int, default 64): tokens per copy; ``seq_len = 2 * n``. The paper
  uses n = 512 (a 1024-token input).
- ``source`` (str, default ``"random"``): ``"random"``: tokens drawn i.i.d.
  uniformly from ``vocab`` symbols; ``"text"``: n consecutive bytes of the
  file ``path`` taken at a uniformly random offset (byte-level ids 0..255, so
  ``vocab`` is 256), the "text" variant of the authors' copy experiments.
- ``vocab`` (int, default 16): the number of symbols for ``source="random"``.
- ``offset`` (int, default 0): the ids are ``offset + symbol``, i.e. they lie
  in ``[offset, offset + vocab)``, and ``task.vocab_size = offset + vocab``.
  Use it to keep some low ids free (e.g. for special tokens) or to put the
  symbols anywhere inside a larger model vocabulary; the model's
  ``vocab_size`` must be at least ``task.vocab_size``.
- ``path`` (str, default: the default corpus of :mod:`tmm.data.corpus`):
  the text file for ``source="text"`` (read through a memory map; must hold
  at least n bytes).

Chance accuracy (a uniform guess among the symbols) is ``1 / vocab``.
"""
import os

import numpy as np
import torch

from . import IGNORE_INDEX, Task, check_batch_args, resolve_options
from ..data.corpus import default_corpus

DEFAULTS = {"n": 64, "vocab": 16, "offset": 0, "source": "random", "path": None}


class CopyTask(Task):
    name = "copy"

    def __init__(self, **options):
        opts = resolve_options(self.name, DEFAULTS, options)
        n, vocab, offset, source, path = (opts[k] for k in ("n", "vocab", "offset", "source", "path"))
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"copy: n must be a positive int, got {n!r}")
        if offset < 0:
            raise ValueError(f"copy: offset must be >= 0, got {offset}")
        self._data = None
        if source == "random":
            if vocab < 2:
                raise ValueError(f"copy: vocab must be >= 2, got {vocab}")
            if path is not None:
                raise ValueError("copy: path is only used with source='text'")
        elif source == "text":
            if "vocab" in options and opts["vocab"] != 256:
                raise ValueError("copy: source='text' is byte-level: vocab is 256 (leave it unset)")
            vocab = opts["vocab"] = 256
            # The default corpus stays path None in the options, so that settings recorded with them (the
            # claims suite's jobs) do not name a machine's cache folder.
            path = os.fspath(path) if path is not None else os.fspath(default_corpus())
            if opts["path"] is not None:
                opts["path"] = path
            if not os.path.isfile(path):
                raise FileNotFoundError(f"copy: no such text file: '{path}'")
            size = os.path.getsize(path)
            if size < n:
                raise ValueError(f"copy: '{path}' has {size} bytes, fewer than n = {n}")
            self._data = np.memmap(path, dtype=np.uint8, mode="r")
        else:
            raise ValueError(f"copy: source must be 'random' or 'text', got {source!r}")
        self.options = opts
        self.n = n
        self.offset = offset
        self.vocab = vocab
        self.seq_len = 2 * n
        self.vocab_size = offset + vocab
        self.chance = 1.0 / vocab

    def _first_copies(self, batch_size, generator):
        """B x n int64 ids (already offset) on the generator's device."""
        device = generator.device
        if self._data is None:
            return torch.randint(
                self.offset, self.offset + self.vocab, (batch_size, self.n), generator=generator, device=device
            )
        starts = torch.randint(0, len(self._data) - self.n + 1, (batch_size,), generator=generator, device=device)
        index = starts.cpu().numpy()[:, None] + np.arange(self.n)[None, :]
        tokens = torch.from_numpy(np.asarray(self._data[index], dtype=np.int64))
        return tokens.to(device) + self.offset

    def batch(self, batch_size: int, generator: torch.Generator):
        """``(input_ids, labels)``, ``batch_size x 2n`` each: the first copy
        drawn from ``generator``, written twice; labels ``a_0 .. a_{n-1}`` at
        positions ``n-1 .. 2n-2``, -100 elsewhere."""
        check_batch_args(batch_size, generator)
        a = self._first_copies(batch_size, generator)
        input_ids = torch.cat([a, a], dim=1)
        labels = torch.full_like(input_ids, IGNORE_INDEX)
        labels[:, self.n - 1 : 2 * self.n - 1] = a
        return input_ids, labels
