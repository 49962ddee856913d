"""Tasks: seeded generators of (input_ids, labels) batches for tmm.train,
built by name (``make("copy", n=64)``, :func:`names`): ``copy`` and ``mqar``
(synthetic), ``lm`` (a corpus) and ``shards`` (token shards). Every task
keeps the :class:`Task` contract: int64 ``batch x seq_len`` tensors, labels
already aligned to each position's logits (-100 where not scored; do not
shift them again), batches a pure function of the generator's state.
docs/training.md, section 14, is the manual: the contract, each task's layout
and options.
"""
import importlib
import math

import torch

IGNORE_INDEX = -100

# name -> "module:class", imported on first use.
_REGISTRY = {
    "copy": "tmm.tasks.copy:CopyTask",
    "mqar": "tmm.tasks.mqar:MQARTask",
    "lm": "tmm.tasks.lm:LMTask",
    "shards": "tmm.tasks.shards:ShardsTask",
}


class Task:
    """A synthetic task. Subclasses set ``name``, ``seq_len``, ``vocab_size``,
    ``options`` (in ``__init__``) and implement :meth:`batch`.

    Attributes:
        name: the registry name ("copy", "mqar").
        seq_len: tokens per example (the length of the model's input).
        vocab_size: every id in ``input_ids`` and every label is < this.
        options: the resolved options, a JSON-serialisable dict.
        chance: the expected accuracy of guessing uniformly among the
            possible answers (a reference line for plots).
    """

    name = None
    seq_len = None
    vocab_size = None
    options = None
    chance = float("nan")

    def batch(self, batch_size: int, generator: torch.Generator):
        """``(input_ids, labels)``: two int64 tensors ``batch_size x seq_len``
        on ``generator.device``. docs/training.md, section 14, has each task's layout."""
        raise NotImplementedError

    @staticmethod
    def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
        """Argmax accuracy over the labelled positions (``labels != -100``).

        ``logits``: ``B x L x V`` (any leading shape matching ``labels``);
        ``labels``: ``B x L``. Returns a float in [0, 1], or NaN when no
        position is labelled.
        """
        if logits.shape[:-1] != labels.shape:
            raise ValueError(
                f"accuracy: logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)} "
                "(expected logits = labels.shape + (vocab,))"
            )
        labels = labels.to(logits.device)
        mask = labels != IGNORE_INDEX
        count = int(mask.sum())
        if count == 0:
            return float("nan")
        pred = logits.detach().argmax(dim=-1)
        return float((pred[mask] == labels[mask]).sum()) / count

    def __repr__(self):
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"<Task {self.name}({opts}): seq_len={self.seq_len}, vocab_size={self.vocab_size}>"


def names():
    """The task names :func:`make` knows, sorted."""
    return sorted(_REGISTRY)


def task_class(name):
    """The :class:`Task` subclass registered as ``name``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown task '{name}' (known: {', '.join(names())})")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, **options) -> Task:
    """The task ``name`` with ``options`` (each task documents its own; an
    unknown option is an error naming it). Option values given as strings
    (from a command line) are converted to the type of the option's default."""
    return task_class(name)(**options)


def resolve_options(task_name, defaults, given):
    """``defaults`` updated with ``given``: unknown keys are an error; a str
    value for a non-str option is converted to the default's type (int,
    float, bool); int is accepted for a float option. Used by the tasks."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(f"task '{task_name}': unknown option(s) {', '.join(unknown)} (known: {', '.join(defaults)})")
    out = dict(defaults)
    for key, value in given.items():
        default = defaults[key]
        if default is None or value is None:
            out[key] = value
            continue
        kind = type(default)
        if isinstance(value, str) and kind is not str:
            try:
                if kind is bool:
                    low = value.strip().lower()
                    if low not in ("1", "0", "true", "false", "yes", "no"):
                        raise ValueError(value)
                    value = low in ("1", "true", "yes")
                else:
                    value = kind(value)
            except ValueError:
                raise TypeError(f"task '{task_name}': option {key}={value!r} is not a valid {kind.__name__}") from None
        elif kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"task '{task_name}': option {key} must be {kind.__name__}, got {value!r}")
        if kind is float and not math.isfinite(value):
            raise ValueError(f"task '{task_name}': option {key} must be finite, got {value!r}")
        out[key] = value
    return out


def check_batch_args(batch_size, generator):
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")


__all__ = ["Task", "IGNORE_INDEX", "make", "names", "task_class"]
