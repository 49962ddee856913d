"""Two proxies for retrieval and in-context learning, measured on a trained
language model's held-out text (the claims suite's claim-3 proxy; the
paper's claim 3 is about benchmarks that cannot run here).

- **Induction score** (Olsson et al. 2022's repeated random tokens): a span
  of ``span`` uniformly random tokens is written into a held-out window
  twice, the second copy later; the score is the mean loss on the first
  copy minus the mean loss on the second, in nats per token, over the
  span's tokens after its first (the first token of either copy cannot be
  predicted). A model that retrieves the earlier copy scores up to the
  first copy's loss (about ln V); one that does not scores about 0.
- **In-context-learning score** (Olsson et al.'s "loss late in the context
  minus loss early in it"): mean loss over the last quarter of the
  positions minus mean loss over the second eighth, on unmodified held-out
  windows; negative where later tokens are predicted better for having more
  context.

Both are averages over ``windows`` held-out windows drawn from a seeded
generator, so every model is scored on the same text and spans.
"""
from __future__ import annotations

import dataclasses

import torch

__all__ = ["InContextScores", "position_losses", "in_context_scores"]


@dataclasses.dataclass
class InContextScores:
    induction: float  # nats per token: loss on the first copy minus loss on the second
    first_copy_loss: float
    second_copy_loss: float
    icl: float  # nats per token: late loss minus early loss (negative: context helps)
    early_loss: float
    late_loss: float
    windows: int
    span: int
    seq_len: int


def position_losses(model, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (nats) of each position, B x T, without gradients."""
    with torch.no_grad():
        logits = model(input_ids)
        return torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, reduction="none")


def in_context_scores(model, task, *, windows: int = 64, span: int = 16, seed: int = 0,
                      batch_size: int = 16) -> InContextScores:
    """Both scores of the module docstring for ``model`` on ``task``'s
    held-out windows (a language-model task: ``eval_batch``, ``seq_len``,
    ``vocab_size``)."""
    seq_len = task.seq_len
    if windows < 1:
        raise ValueError(f"in_context_scores: windows must be >= 1, got {windows}")
    if span < 2:
        raise ValueError(f"in_context_scores: span must be >= 2, got {span}")
    if 2 * span + 1 > seq_len:
        raise ValueError(f"in_context_scores: two copies of span {span} need seq_len >= {2 * span + 1}, "
                         f"got the task's seq_len {seq_len}")
    if seq_len < 8:
        raise ValueError(f"in_context_scores: seq_len must be >= 8 for the early and late positions, got {seq_len}")
    g = torch.Generator().manual_seed(seed)
    inputs, labels = task.eval_batch(windows, g)
    # The two copies of the random span: the first at a, the second at b >= a + span, both inside the window
    # of labels (the input window shifted by one), so that labels score every token of each copy.
    first = torch.randint(0, seq_len - 2 * span + 1, (windows,), generator=g)
    second = first + span + (torch.rand(windows, generator=g) * (seq_len - 2 * span + 1 - first)).long()
    spans = torch.randint(0, task.vocab_size, (windows, span), generator=g)
    # Token t of the sequence is inputs[:, t] (t < seq_len) and labels[:, t - 1] (t >= 1): write into the
    # sequence of seq_len + 1 tokens and split it again.
    seq = torch.cat([inputs[:, :1], labels], dim=1)
    rows = torch.arange(windows)[:, None]
    offsets = torch.arange(span)[None, :]
    seq[rows, first[:, None] + 1 + offsets] = spans
    seq[rows, second[:, None] + 1 + offsets] = spans
    copied_in, copied_lab = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()

    device = next(iter(model.parameters()), torch.empty(0)).device
    copy_loss, plain_loss = [], []
    model.eval()
    for lo in range(0, windows, batch_size):
        hi = min(lo + batch_size, windows)
        for out, x, y in ((copy_loss, copied_in, copied_lab), (plain_loss, inputs, labels)):
            out.append(position_losses(model, x[lo:hi].to(device), y[lo:hi].to(device)).cpu())
    copy_loss, plain_loss = torch.cat(copy_loss), torch.cat(plain_loss)
    # Label position p predicts sequence token p + 1; a copy at sequence tokens [a + 1, a + 1 + span) is
    # predicted at label positions [a, a + span); its first token is skipped.
    after_first = torch.arange(1, span)[None, :]
    loss_first = copy_loss[rows, first[:, None] + after_first].mean().item()
    loss_second = copy_loss[rows, second[:, None] + after_first].mean().item()
    early = plain_loss[:, seq_len // 8: seq_len // 4].mean().item()
    late = plain_loss[:, seq_len - seq_len // 4:].mean().item()
    return InContextScores(induction=loss_first - loss_second, first_copy_loss=loss_first,
                           second_copy_loss=loss_second, icl=late - early, early_loss=early, late_loss=late,
                           windows=windows, span=span, seq_len=seq_len)
