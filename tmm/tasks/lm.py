"""Language modelling on real text: next-token prediction on packed windows
of a tokenised corpus (byte level, or a BPE trained on the training split),
with a held-out split fixed by the corpus alone (every
``round(1 / eval_fraction)``-th section) and bits per byte, so that byte-level
and BPE models compare. docs/training.md, section 14, has the split, the
windows, the bits-per-byte formula and the options.
"""
import math

import numpy as np
import torch

from . import IGNORE_INDEX, Task, check_batch_args, resolve_options
from ..data.corpus import default_corpus, held_out, read_documents, split_sections
from ..data.lm_tokenizer import make_tokenizer

DEFAULTS = {
    "corpus": None, "tokenizer": "byte", "vocab": 1024, "seq_len": 128,
    "eval_fraction": 0.05, "section_bytes": 16384, "max_bytes": 0,
}


class BitsPerByte:
    """Bits per byte for a task whose ``tokenizer`` (an
    :class:`~tmm.data.lm_tokenizer.LMTokenizer`) knows each token's bytes
    (``lm``, ``shards``)."""

    def bytes_per_token(self, labels) -> float:
        """Mean UTF-8 bytes per scored label token."""
        labels = labels[labels != IGNORE_INDEX].cpu()
        if labels.numel() == 0:
            return float("nan")
        return float(torch.from_numpy(self.tokenizer.token_bytes)[labels].sum()) / labels.numel()

    def bits_per_byte(self, loss_nats: float, eval_set) -> float:
        """Bits per byte from a mean loss (nats per scored token) over
        ``eval_set``, a list of ``(input_ids, labels)`` batches of equal size."""
        tokens = sum(int((y != IGNORE_INDEX).sum()) for _, y in eval_set)
        nbytes = sum(self.bytes_per_token(y) * int((y != IGNORE_INDEX).sum()) for _, y in eval_set)
        if tokens == 0 or nbytes == 0:
            return float("nan")
        return loss_nats * tokens / (math.log(2) * nbytes)

    def eval_metrics(self, eval_loss: float, eval_set) -> dict:
        """Extra numbers for the training loop's evaluation rows."""
        return {"eval_bpb": self.bits_per_byte(eval_loss, eval_set)}


class LMTask(BitsPerByte, Task):
    name = "lm"

    def __init__(self, **options):
        opts = resolve_options(self.name, DEFAULTS, options)
        if opts["tokenizer"] not in ("byte", "bpe"):
            raise ValueError(f"lm: tokenizer must be 'byte' or 'bpe', got {opts['tokenizer']!r}")
        if opts["tokenizer"] == "byte" and "vocab" in options and opts["vocab"] != 256:
            raise ValueError("lm: vocab applies to tokenizer='bpe' only (the byte vocabulary is 256)")
        if opts["seq_len"] < 1:
            raise ValueError(f"lm: seq_len must be >= 1, got {opts['seq_len']}")
        if not 0.0 < opts["eval_fraction"] <= 0.5:
            raise ValueError(f"lm: eval_fraction must be in (0, 0.5], got {opts['eval_fraction']}")
        if opts["section_bytes"] < 16:
            raise ValueError(f"lm: section_bytes must be >= 16, got {opts['section_bytes']}")
        if opts["max_bytes"] < 0:
            raise ValueError(f"lm: max_bytes must be >= 0 (0 = all), got {opts['max_bytes']}")
        corpus = opts["corpus"] if opts["corpus"] is not None else str(default_corpus())
        self.corpus = corpus
        self.seq_len = opts["seq_len"]
        self.stride = max(2, round(1.0 / opts["eval_fraction"]))

        docs = read_documents(corpus, opts["max_bytes"])
        sep = "\n\n" if len(docs) > 1 else ""
        sections = [s for d in docs for s in split_sections((d + sep).encode("utf-8"), opts["section_bytes"])]
        train = [s.decode("utf-8", errors="replace") for i, s in enumerate(sections) if not held_out(i, self.stride)]
        held = [s.decode("utf-8", errors="replace") for i, s in enumerate(sections) if held_out(i, self.stride)]
        if not held or not train:
            raise ValueError(
                f"lm: corpus '{corpus}' gives {len(sections)} sections of <= {opts['section_bytes']} bytes, too few "
                f"for a held-out split every {self.stride} sections: lower section_bytes or use a larger corpus"
            )
        self.tokenizer = make_tokenizer(opts["tokenizer"], train, opts["vocab"])
        opts["vocab"] = self.tokenizer.vocab_size
        self.vocab_size = self.tokenizer.vocab_size
        self.train_ids = self._stream(train, "training")
        self.eval_ids = self._stream(held, "held-out")
        self.train_bytes = sum(len(s.encode("utf-8")) for s in train)
        self.eval_bytes = sum(len(s.encode("utf-8")) for s in held)
        self.num_sections = len(sections)
        self.options = opts

    def _stream(self, texts, which):
        parts = self.tokenizer.encode_batch(texts)
        ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        if len(ids) < self.seq_len + 1:
            raise ValueError(
                f"lm: the {which} split has {len(ids)} tokens, fewer than seq_len + 1 = {self.seq_len + 1}"
            )
        return torch.from_numpy(ids.astype(np.int64))

    def _windows(self, stream, batch_size, generator):
        check_batch_args(batch_size, generator)
        device = generator.device
        starts = torch.randint(0, len(stream) - self.seq_len, (batch_size,), generator=generator, device=device)
        index = starts.cpu()[:, None] + torch.arange(self.seq_len + 1)[None, :]
        w = stream[index].to(device)
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def batch(self, batch_size: int, generator: torch.Generator):
        """Training windows: ``(input_ids, labels)``, ``batch_size x seq_len``."""
        return self._windows(self.train_ids, batch_size, generator)

    def eval_batch(self, batch_size: int, generator: torch.Generator):
        """Held-out windows, in the layout of :meth:`batch`."""
        return self._windows(self.eval_ids, batch_size, generator)

    def describe(self) -> str:
        return (
            f"lm: corpus {self.corpus}, {self.options['tokenizer']} tokenizer (vocab {self.vocab_size}), "
            f"{self.num_sections} sections, every {self.stride}th held out: train {len(self.train_ids):,} tokens "
            f"({self.train_bytes:,} bytes), held-out {len(self.eval_ids):,} tokens ({self.eval_bytes:,} bytes)"
        )
