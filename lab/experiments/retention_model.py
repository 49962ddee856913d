"""The models of the information-retention experiments (the paper's
information extraction and information capacity; the driver is
:mod:`lab.experiments.retention`, its command line ``scripts/retention.py``).

    from lab.experiments.retention_model import Autoencoder, RegenerateTask
    enc = tmm.models.build(config)                       # a zoo model (the encoder)
    ae = Autoencoder(enc, vocab_size=256, seq_len=32, frozen=True)
    task = RegenerateTask(tmm.tasks.make("lm", seq_len=32))
    tmm.train.train(ae, task, TrainConfig(...))          # trains the decoder (and the encoder unless frozen)

The encoder reads the n input tokens; one of its hidden states (a d-vector
at position ``position``, which the mode sets below) is the only thing the
decoder sees. The decoder (the same for every encoder) must regenerate all
n input tokens at once: labels = the input itself, metric = argmax token
accuracy.

- Extraction: the encoder is a trained language model, frozen
  (``frozen=True``): how much of its input its state still holds.
- Capacity: encoder and decoder trained end to end (``frozen=False``): how
  much the architecture can be made to hold.
- ``encoder=None`` gives the no-information baseline: the decoder sees a
  zero vector and can only learn the input-independent guess per position.

Two decoder modes (``mode``):

- ``"batchnorm"`` (the default, comparable with earlier results): the state
  the LM head reads at position -1 (our windows carry text up to the end),
  standardised, projected, repeated and told its position by a learned
  embedding (:class:`BottleneckDecoder`).
- ``"authors"``: the authors' setup (ToeplitzMixers, information_extraction.py):
  the raw output of the last block (before any final norm,
  :func:`last_block_states`) at position -2 (their inputs end with a token
  that carries nothing), "unrolled" (position i reads the d/2-slice of the
  vector starting at i mod d, wrapping around; one shared Linear(d/2, d):
  :class:`UnrollBottleneck`), then a deep decoder of masked-mixer blocks
  (:class:`MaskedMixerDecoder`).
"""
from __future__ import annotations

import collections
import math

import torch
import torch.nn.functional as F
from torch import nn

from tmm.nn import CausalToeplitz, MixerBlock, ToeplitzMixer
from tmm.tasks import IGNORE_INDEX, Task

__all__ = ["DECODER_MODES", "BottleneckDecoder", "UnrollBottleneck", "MaskedMixerDecoder", "Autoencoder",
           "RegenerateTask", "RandomTokens", "last_block_states", "unroll_indices",
           "position_accuracy", "position_metrics", "bits_recovered"]

DECODER_MODES = ("batchnorm", "authors")

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


def unroll_indices(d, seq_len):
    """seq_len x d//2 int64: row i is (i mod d + arange(d//2)) mod d, the
    entries of the d-vector that position i reads (the authors' unroll)."""
    if not isinstance(d, int) or d < 2:
        raise ValueError(f"unroll_indices: d must be an int >= 2 (position i reads d//2 entries), got {d!r}")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"unroll_indices: seq_len must be a positive int, got {seq_len!r}")
    i = torch.arange(seq_len)[:, None]
    return (i % d + torch.arange(d // 2)[None]) % d


class UnrollBottleneck(nn.Module):
    """B x d_in -> B x seq_len x d: position i gets W @ z[(i mod d_in +
    arange(d_in/2)) mod d_in] + b, one Linear(d_in//2, d) shared by all
    positions (the authors' "unroll": a sliding window over the vector, so
    each position sees a different half of it, and position comes from
    which half)."""

    def __init__(self, d_in, seq_len, d):
        super().__init__()
        self.register_buffer("index", unroll_indices(d_in, seq_len), persistent=False)  # L x d_in//2
        self.d_in = d_in
        self.proj = nn.Linear(d_in // 2, d)

    def forward(self, z):
        if z.dim() != 2 or z.shape[1] != self.d_in:
            raise ValueError(f"UnrollBottleneck: expected B x {self.d_in}, got {tuple(z.shape)}")
        return self.proj(z[:, self.index])  # B x L x d_in//2 -> B x L x d


class MaskedMixerDecoder(nn.Module):
    """B x d_in -> B x seq_len x vocab logits, the authors' information
    decoder: :class:`UnrollBottleneck` to width ``d`` (default d_in, as
    theirs), ``layers`` masked-mixer blocks (tmm.nn.MixerBlock around a
    ``ToeplitzMixer(masked=True)``: a learned lower-triangular seq_len x
    seq_len matrix plus a per-position bias per head; mixer first, GELU FFN
    of 4 d, LayerNorm, as their MixerBlock), no final norm, and a Linear head
    without bias. ``heads`` h > 0: their MixerHead, h heads each projecting
    the d channels to d/h (one Linear(d, d) here, the same map), mixing them
    with its own masked matrix, then a Linear(d, d) over the concatenation;
    ``heads`` 0: one matrix for all channels, no projections (the flat
    variant). PyTorch's default init everywhere (theirs: no init is applied),
    the projections' included."""

    def __init__(self, d_in, vocab_size, seq_len, d=None, layers=4, heads=4):
        super().__init__()
        d = d_in if d is None else d
        for name, v in (("d_in", d_in), ("vocab_size", vocab_size), ("seq_len", seq_len), ("d", d),
                        ("layers", layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"MaskedMixerDecoder: {name} must be a positive int, got {v!r}")
        if d_in < 2:
            raise ValueError(f"MaskedMixerDecoder: d_in must be >= 2 (the unroll reads d_in//2 entries), got {d_in}")
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 0 or (heads and d % heads):
            raise ValueError(f"MaskedMixerDecoder: heads must be 0 (flat) or an int dividing d = {d}, got {heads!r}")
        self.seq_len = seq_len
        self.heads = heads
        self.bottleneck = UnrollBottleneck(d_in, seq_len, d)
        self.blocks = nn.ModuleList(self._block(d, self._mixer(d, seq_len, heads)) for _ in range(layers))
        self.head = nn.Linear(d, vocab_size, bias=False)

    @staticmethod
    def _block(d, mixer):
        """Their MixerBlock: mixer first (also in the order of its parameters),
        GELU, LayerNorm, torch's own init of the FFN and norms."""
        block = MixerBlock(d, mixer=mixer, activation="gelu", block_order="mixer_first", device="meta")
        for name in ("ffn_norm", "ffn_in", "ffn_out", "mixer_norm"):
            getattr(block, name).to_empty(device="cpu").reset_parameters()
        for name in ("mixer", "mixer_norm"):  # their registration order: the mixer's branch first
            block._modules = {name: block._modules.pop(name), **block._modules}
        return block

    @staticmethod
    def _mixer(d, seq_len, heads):
        mixer = ToeplitzMixer(d, seq_len, heads=heads, masked=True)
        if heads:  # nn.Linear's own init, as their MixerHead's projections (ToeplitzMixer's is Kaiming's)
            mixer.in_proj.reset_parameters()
            mixer.out_proj.reset_parameters()
        return mixer

    def forward(self, z):
        x = self.bottleneck(z)  # B x L x d
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def last_block_states(encoder, ids):
    """B x L ids -> B x L x d: the output of the encoder's last block, before
    any final norm (a tmm.nn.LanguageModel's: the zoo's or a SequenceModel)."""
    encoder._check_ids(ids)
    h = encoder.embed(ids)
    for block in encoder.blocks:
        h = block(h)
    return h


class Autoencoder(nn.Module):
    """Encoder (a tmm.nn.LanguageModel: a zoo model or a SequenceModel, or None
    for the baseline) -> its state at ``position`` -> the decoder of ``mode``:
    "batchnorm" (the head's input state, :class:`BottleneckDecoder`; options
    d, layers, heads) or "authors" (the raw last block's state,
    :func:`last_block_states`, into :class:`MaskedMixerDecoder`; options d,
    layers). ``model(ids, labels=ids)`` returns ``(logits, loss)`` as the zoo
    models do, so :func:`tmm.train.train` trains it."""

    def __init__(self, encoder, vocab_size, seq_len, frozen=True, position=-1, d_in=None, mode="batchnorm",
                 **decoder_opts):
        super().__init__()
        if mode not in DECODER_MODES:
            raise ValueError(f"Autoencoder: mode must be one of {', '.join(DECODER_MODES)}, got {mode!r}")
        if encoder is None and d_in is None:
            raise ValueError("Autoencoder: without an encoder, give d_in (the bottleneck width)")
        if not -seq_len <= int(position) < seq_len:
            raise ValueError(f"Autoencoder: position must be in [-{seq_len}, {seq_len - 1}], got {position}")
        self.mode = mode
        self.encoder = encoder
        self.frozen = bool(frozen)
        self.position = int(position)
        if d_in is None:
            d_in = self.encoder.d_model
        self.d_in = int(d_in)
        self.state = None if encoder is None else ("raw last block" if mode == "authors" else "head input")
        if encoder is not None and self.frozen:
            for p in self.encoder.parameters():
                p.requires_grad_(False)
        decoder = MaskedMixerDecoder if mode == "authors" else BottleneckDecoder
        self.decoder = decoder(self.d_in, vocab_size, seq_len, **decoder_opts)

    def _states(self, ids):
        return last_block_states(self.encoder, ids) if self.mode == "authors" else self.encoder.hidden_states(ids)

    def encode(self, ids):
        """B x L ids -> B x d_in: the bottleneck."""
        if self.encoder is None:
            return torch.zeros(ids.shape[0], self.d_in, device=ids.device)
        if self.frozen:
            self.encoder.eval()  # a frozen model keeps its inference behaviour
            with torch.no_grad():
                return self._states(ids)[:, self.position].detach()
        return self._states(ids)[:, self.position]

    def forward(self, ids, labels=None, shift_labels=False):  # labels: each position's own token (no shift)
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


class RandomTokens(Task):
    """Windows of ``seq_len`` tokens drawn uniformly from ``vocab`` ids, the
    source of the capacity test on random tokens: nothing in a window
    predicts another, so every bit a decoder recovers came through the
    bottleneck, and a decoder that sees nothing can do no better than
    log2(vocab) bits per token. ``batch`` gives (ids, ids)."""

    name = "random-tokens"

    def __init__(self, seq_len, vocab):
        for key, v in (("seq_len", seq_len), ("vocab", vocab)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"RandomTokens: {key} must be an int >= 2, got {v!r}")
        self.seq_len = seq_len
        self.vocab_size = vocab
        self.options = {"seq_len": seq_len, "vocab": vocab}
        self.chance = 1.0 / vocab

    def batch(self, batch_size, generator):
        ids = torch.randint(0, self.vocab_size, (batch_size, self.seq_len), generator=generator,
                            device=generator.device)
        return ids, ids.clone()

    def describe(self):
        return f"random tokens: {self.seq_len} per window, uniform over {self.vocab_size} ids"


@torch.no_grad()
def position_metrics(model, eval_set):
    """(argmax accuracy, mean cross-entropy in nats) at each position: two
    lists of seq_len floats over ``eval_set``, a list of (ids, labels) batches."""
    was = model.training
    model.eval()
    hits, count, nats = None, None, None
    try:
        for ids, labels in eval_set:
            logits = model(ids).logits
            mask = labels != IGNORE_INDEX
            ce = F.cross_entropy(logits.transpose(1, 2), labels.clamp(min=0), reduction="none") * mask
            h = ((logits.argmax(-1) == labels) & mask).sum(0)
            hits = h if hits is None else hits + h
            nats = ce.sum(0) if nats is None else nats + ce.sum(0)
            count = mask.sum(0) if count is None else count + mask.sum(0)
    finally:
        model.train(was)
    n = count.clamp(min=1).double()
    return (hits.double() / n).tolist(), (nats.double() / n).tolist()


def bits_recovered(position_loss, vocab_size):
    """sum over positions of (log2 V - cross-entropy / ln 2): the bits about
    the window the decoder's predictions hold beyond a uniform guess. On
    random tokens the zero-state decoder's optimum is exactly 0, and each
    token recovered exactly adds log2 V."""
    return sum(math.log2(vocab_size) - ce / math.log(2) for ce in position_loss)


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
