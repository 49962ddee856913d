"""The models of the information-retention experiments (the paper's
information extraction and information capacity; the driver is
:mod:`tmm.experiments.retention`, its command line ``scripts/retention.py``).

    from tmm.experiments.retention_model import Autoencoder, RegenerateTask
    enc = tmm.models.build(config)                       # a zoo model (the encoder)
    ae = Autoencoder(enc, vocab_size=256, seq_len=32, frozen=True)
    task = RegenerateTask(tmm.tasks.make("lm", seq_len=32))
    tmm.train.train(ae, task, TrainConfig(...))          # trains the decoder (and the encoder unless frozen)

The encoder reads the n input tokens; its last hidden state (the d-vector the
LM head reads at position ``position``, default -1: after the whole input)
is the only thing the decoder sees. The decoder (:class:`BottleneckDecoder`,
the same for every encoder) must regenerate all n input tokens at once:
labels = the input itself, metric = argmax token accuracy.

- Extraction: the encoder is a trained language model, frozen
  (``frozen=True``): how much of its input its state still holds.
- Capacity: encoder and decoder trained end to end (``frozen=False``): how
  much the architecture can be made to hold.
- ``encoder=None`` gives the no-information baseline: the decoder sees a
  zero vector and can only learn the input-independent guess per position.

The authors (ToeplitzMixers, information_extraction.py) take the state at
position -2 of a causal LM (their inputs end with a token that carries
nothing) and repeat or "unroll" it along the sequence into a masked-mixer
decoder. Here the state is at -1 (our windows carry text up to the end), and
it is projected, repeated, and told its position by a learned embedding.
"""
from __future__ import annotations

import collections

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import CausalToeplitz
from ..tasks import IGNORE_INDEX, Task

__all__ = ["BottleneckDecoder", "Autoencoder", "RegenerateTask", "position_accuracy"]

Output = collections.namedtuple("Output", ["logits", "loss"])


class _DecoderBlock(nn.Module):
    """A TMM block in Python: x += FFN(LN x); x += out(Toeplitz(in(LN x)))."""

    def __init__(self, d, seq_len, heads):
        super().__init__()
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.mix_norm = nn.LayerNorm(d)
        self.in_proj = nn.Linear(d, d)
        self.mix = CausalToeplitz(d, seq_len, groups=heads)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x):
        x = x + self.ffn(self.ffn_norm(x))
        return x + self.out_proj(self.mix(self.in_proj(self.mix_norm(x))))


class BottleneckDecoder(nn.Module):
    """B x d_in -> B x seq_len x vocab logits. The vector is standardised
    per dimension with batch statistics (BatchNorm, no affine; running
    statistics in eval mode), because encoders' states differ in offset and
    scale: a trained TMM's last state (no final norm) is ~97% an
    input-independent offset, which a per-vector LayerNorm would keep. Then it
    is projected to ``d``, repeated at every position plus a learned position
    embedding, then ``layers`` TMM blocks, a LayerNorm and the head.
    Training batches need at least 2 examples."""

    def __init__(self, d_in, vocab_size, seq_len, d=128, layers=2, heads=4):
        super().__init__()
        for name, v in (("d_in", d_in), ("vocab_size", vocab_size), ("seq_len", seq_len), ("d", d), ("heads", heads)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"BottleneckDecoder: {name} must be a positive int, got {v!r}")
        if d % heads:
            raise ValueError(f"BottleneckDecoder: heads={heads} must divide d={d}")
        self.seq_len = seq_len
        self.norm_in = nn.BatchNorm1d(d_in, affine=False)
        self.proj = nn.Linear(d_in, d)
        self.pos = nn.Parameter(torch.randn(seq_len, d) * 0.02)
        self.blocks = nn.ModuleList(_DecoderBlock(d, seq_len, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)

    def forward(self, z):
        x = self.proj(self.norm_in(z))[:, None, :] + self.pos[None]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class Autoencoder(nn.Module):
    """Encoder (a tmm.models LanguageModel, or None for the baseline) ->
    its hidden state at ``position`` -> :class:`BottleneckDecoder`.
    ``model(ids, labels=ids)`` returns ``(logits, loss)`` as the zoo models
    do, so :func:`tmm.train.train` trains it."""

    def __init__(self, encoder, vocab_size, seq_len, frozen=True, position=-1, d_in=None, **decoder_opts):
        super().__init__()
        if encoder is None and d_in is None:
            raise ValueError("Autoencoder: without an encoder, give d_in (the bottleneck width)")
        self.encoder = encoder
        self.frozen = bool(frozen)
        self.position = int(position)
        self.d_in = int(d_in if d_in is not None else encoder.config["d_model"])
        if encoder is not None and self.frozen:
            for p in encoder.parameters():
                p.requires_grad_(False)
        self.decoder = BottleneckDecoder(self.d_in, vocab_size, seq_len, **decoder_opts)

    def encode(self, ids):
        """B x L ids -> B x d_in: the bottleneck."""
        if self.encoder is None:
            return torch.zeros(ids.shape[0], self.d_in, device=ids.device)
        if self.frozen:
            self.encoder.eval()  # a frozen model keeps its inference behaviour
            with torch.no_grad():
                return self.encoder.hidden_states(ids)[:, self.position].detach()
        return self.encoder.hidden_states(ids)[:, self.position]

    def forward(self, ids, labels=None):
        logits = self.decoder(self.encode(ids))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return Output(logits, loss)

    def num_parameters(self, trainable_only=True):
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)


class RegenerateTask(Task):
    """The windows of ``source`` (e.g. an ``lm`` task) with labels = the
    input: every position scored, no shift (the decoder sees no tokens)."""

    name = "regenerate"

    def __init__(self, source):
        self.source = source
        self.seq_len = source.seq_len
        self.vocab_size = source.vocab_size
        self.options = {"source": source.name, **source.options}

    def batch(self, batch_size, generator):
        ids, _ = self.source.batch(batch_size, generator)
        return ids, ids.clone()

    def eval_batch(self, batch_size, generator):
        ids, _ = getattr(self.source, "eval_batch", self.source.batch)(batch_size, generator)
        return ids, ids.clone()


@torch.no_grad()
def position_accuracy(model, eval_set):
    """Argmax accuracy at each position (a list of seq_len floats) over
    ``eval_set``, a list of (ids, labels) batches."""
    was = model.training
    model.eval()
    hits, count = None, None
    try:
        for ids, labels in eval_set:
            pred = model(ids).logits.argmax(-1)
            mask = labels != IGNORE_INDEX
            h = ((pred == labels) & mask).sum(0)
            hits = h if hits is None else hits + h
            count = mask.sum(0) if count is None else count + mask.sum(0)
    finally:
        model.train(was)
    return (hits.double() / count.clamp(min=1)).tolist()
