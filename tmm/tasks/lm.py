"""Language modelling on real text: next-token prediction on packed windows
of a tokenised corpus, with a deterministic held-out split.

    task = tmm.tasks.make("lm")                           # the default corpus, byte-level, 128 tokens
    task = tmm.tasks.make("lm", corpus="fineweb/", tokenizer="bpe", vocab=4096, seq_len=512)
    ids, labels = task.batch(16, g)                       # training windows
    ids, labels = task.eval_batch(16, g)                  # held-out windows
    bpb = task.bits_per_byte(mean_loss, [(ids, labels)])  # from the mean loss in nats per token

The corpus (:mod:`tmm.data.corpus`) is read as documents; each document, with
``"\\n\\n"`` appended when there are several, is cut into sections of at most
``section_bytes`` UTF-8 bytes (at the last newline in the second half of the
section when there is one, never inside a character). Section i (counted
over the whole corpus) is held out when ``i % stride == stride - 1``,
``stride = round(1 / eval_fraction)``: a split fixed by the corpus alone and
spread evenly through it. The BPE tokeniser is trained on the training
sections only. Each split's sections are tokenised and concatenated into one
stream ("packing": a window may span a section or document boundary).

A batch is ``batch_size`` windows of ``seq_len + 1`` consecutive tokens at
offsets drawn uniformly from the generator: ``input_ids`` the first
``seq_len``, ``labels`` the last ``seq_len`` (already shifted: the contract of
:class:`tmm.tasks.Task`), every position scored. ``accuracy`` is the argmax
next-token accuracy.

Bits per byte: ``loss_nats * tokens / (ln 2 * bytes)`` over the scored
positions, where ``bytes`` adds up the UTF-8 bytes each label token stands
for (``tokenizer.token_bytes``), so that byte-level and BPE models compare.
With the byte tokeniser it is ``loss / ln 2``.

Options (``tmm.tasks.make("lm", **options)``):

- ``corpus`` (str, default None: :func:`tmm.data.corpus.default_corpus`, the
  King James Bible from Debian packages): a text, JSONL or Parquet file, or
  a folder of them.
- ``tokenizer`` (``"byte"``, default, or ``"bpe"``).
- ``vocab`` (int, default 1024): the BPE vocabulary (``bpe`` only).
- ``seq_len`` (int, default 128).
- ``eval_fraction`` (float, default 0.05): the held-out share of sections.
- ``section_bytes`` (int, default 16384).
- ``max_bytes`` (int, default 0 = all): read at most this many bytes.
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
