"""Multi-query associative recall (MQAR), in the layout of Zoology
(Arora, Eyuboglu et al. 2023, "Zoology: Measuring and improving recall in
efficient language models"; HazyResearch/zoology, ``multiquery_ar``).

An example of ``seq_len`` tokens holds K = ``num_kv_pairs`` key-value pairs,
then the K keys again as queries, in random order and at random places; the
model is scored on the value at each query::

    K = 2, seq_len = 16, vocab = 12, random_non_queries = False:

                 key  val  key  val                query                          query
    position     0    1    2    3    4    5    6    7    8    9   10   11   12   13   14   15
    input        2    8    4    7    0    0    4    0    0    0    0    0    2    0    0    0
    label     -100 -100 -100 -100 -100 -100    7 -100 -100 -100 -100 -100    8 -100 -100 -100

- Keys are drawn without replacement from ``[1, vocab // 2)`` (unique within
  an example), values without replacement from ``[vocab // 2, vocab)``: the
  two ranges are disjoint. Pair j sits at positions ``2j`` (key) and
  ``2j + 1`` (value), j = 0..K-1: the first ``2K`` tokens.
- The rest, ``seq_len - 2K`` positions, is the query region, seen as
  ``(seq_len - 2K) // 2`` two-token slots. Key j is placed at the start of
  slot ``gap_j``: position ``2K + 2 gap_j``. The gaps are distinct and drawn
  (without replacement) with probability proportional to ``i ** (power_a - 1)``
  for slot i = 1, 2, ... (Zoology's power law: small ``power_a`` puts most
  queries near the start of the region, ``power_a = 1`` is uniform).
- The label of a query is at the query's own position: ``labels[t] = value``
  where ``input[t]`` is the key, i.e. the logits at the query token must
  predict its value (already aligned; the value itself never follows the
  query in the input). Every other label is -100: K scored positions.
- ``random_non_queries=True`` (Zoology's default) replaces every filler
  position (the zeros above) with a token drawn uniformly from
  ``[0, vocab)``; a filler may then equal a key or a value by chance, as in
  Zoology. With ``False`` the fillers stay 0 (never a key or a value).

Options (``tmm.tasks.make("mqar", **options)``):

- ``num_kv_pairs`` (int, default 8; Zoology varies 4..64).
- ``seq_len`` (int, default 64; Zoology varies 64..512). Needs
  ``seq_len >= 4 * num_kv_pairs``.
- ``vocab`` (int, default 256, which fits the zoo's ``*-cpu-small`` models as
  they are; Zoology's ``vocab_size``, 8192 in its experiments, where a large
  vocabulary widens the gap between architectures). Needs
  ``vocab // 2 - 1 >= num_kv_pairs``. ``task.vocab_size = vocab``.
- ``power_a`` (float, default 0.01).
- ``random_non_queries`` (bool, default True).

Chance accuracy (a uniform guess among the values) is ``1 / (vocab - vocab // 2)``.
The generator is our own (vectorised torch, seeded by the caller's
``torch.Generator``); its batches follow Zoology's layout but are not
bit-identical to Zoology's numpy stream.
"""
import torch

from . import IGNORE_INDEX, Task, check_batch_args, resolve_options

DEFAULTS = {"num_kv_pairs": 8, "seq_len": 64, "vocab": 256, "power_a": 0.01, "random_non_queries": True}


def _sample_distinct(batch_size, low, high, k, generator):
    """B x k ids, distinct within each row, uniform from [low, high)."""
    scores = torch.rand(batch_size, high - low, generator=generator, device=generator.device)
    return scores.topk(k, dim=1).indices + low


class MQARTask(Task):
    name = "mqar"

    def __init__(self, **options):
        opts = resolve_options(self.name, DEFAULTS, options)
        k, seq_len, vocab, power_a = (opts[x] for x in ("num_kv_pairs", "seq_len", "vocab", "power_a"))
        if k < 1:
            raise ValueError(f"mqar: num_kv_pairs must be >= 1, got {k}")
        if seq_len < 4 * k:
            raise ValueError(f"mqar: seq_len ({seq_len}) must be >= 4 * num_kv_pairs ({4 * k})")
        if vocab // 2 - 1 < k:
            raise ValueError(f"mqar: vocab ({vocab}) too small for {k} distinct keys in [1, vocab // 2)")
        if not power_a > 0:
            raise ValueError(f"mqar: power_a must be > 0, got {power_a}")
        self.options = opts
        self.num_kv_pairs = k
        self.seq_len = seq_len
        self.vocab_size = vocab
        self.random_non_queries = opts["random_non_queries"]
        self.context_size = 2 * k
        self.num_slots = (seq_len - self.context_size) // 2
        i = torch.arange(1, self.num_slots + 1, dtype=torch.float64)
        p = power_a * i ** (power_a - 1)
        self._gap_probs = (p / p.sum()).float()
        self.chance = 1.0 / (vocab - vocab // 2)

    def batch(self, batch_size: int, generator: torch.Generator):
        """``(input_ids, labels)``, ``batch_size x seq_len`` each, in the
        layout of the module docstring."""
        check_batch_args(batch_size, generator)
        device = generator.device
        k, half, v = self.num_kv_pairs, self.vocab_size // 2, self.vocab_size
        keys = _sample_distinct(batch_size, 1, half, k, generator)
        values = _sample_distinct(batch_size, half, v, k, generator)
        probs = self._gap_probs.to(device).expand(batch_size, -1)
        gaps = torch.multinomial(probs, k, replacement=False, generator=generator)
        query_pos = self.context_size + 2 * gaps

        input_ids = torch.zeros(batch_size, self.seq_len, dtype=torch.long, device=device)
        input_ids[:, 0 : self.context_size : 2] = keys
        input_ids[:, 1 : self.context_size : 2] = values
        input_ids.scatter_(1, query_pos, keys)
        labels = torch.full_like(input_ids, IGNORE_INDEX)
        labels.scatter_(1, query_pos, values)
        if self.random_non_queries:
            noise = torch.randint(0, v, input_ids.shape, generator=generator, device=device)
            input_ids = torch.where(input_ids == 0, noise, input_ids)
        return input_ids, labels
