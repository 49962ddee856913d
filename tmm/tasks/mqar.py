"""Multi-query associative recall (MQAR) in the layout of Zoology (Arora,
Eyuboglu et al. 2023; HazyResearch/zoology, ``multiquery_ar``): K key-value
pairs, then the K keys again as queries at power-law-distributed places,
scored on each query's value at the query's own position. The generator is
tmm's own (vectorised torch), not bit-identical to Zoology's NumPy stream.
docs/training.md, section 14, has the layout, an example and the options.
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
        layout of docs/training.md, section 14."""
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
