"""The copy task (the authors' definition of information retention): n tokens
written twice, scored on the second copy only (``labels[t] = input[t + 1]``
for t in [n-1, 2n-2]: the first scored position recalls a_0 from n positions
back), the tokens random symbols or bytes of a text. docs/training.md,
section 14, has the layout and the options.
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
