"""A copy task whose examples hold different numbers of labelled tokens, so
that a plain average of per-shard (per-rank, per-micro-batch) mean losses
would be wrong: shared by the distributed and gradient-accumulation tests."""

import torch

import tmm.tasks
from tmm.tasks import IGNORE_INDEX, Task


class RaggedCopy(Task):
    """copy (n = 4) whose example i keeps the labels before position n + i
    (n + i % period with a period): 1, 2, 3, ... labelled positions."""

    name = "ragged-copy"

    def __init__(self, period=None):
        self.inner = tmm.tasks.make("copy", n=4)
        self.period = period
        self.seq_len, self.vocab_size, self.options = self.inner.seq_len, self.inner.vocab_size, {}

    def batch(self, batch_size, generator):
        ids, labels = self.inner.batch(batch_size, generator)
        extra = torch.arange(batch_size)[:, None]
        if self.period is not None:
            extra = extra % self.period
        keep = torch.arange(self.seq_len) < self.inner.n + extra
        return ids, labels.masked_fill(~keep, IGNORE_INDEX)
