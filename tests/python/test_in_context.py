"""The claim-3 proxies (lab.experiments.in_context) on models whose scores
are known: an induction oracle, a uniform model, and one whose confidence
grows with the position."""
import math

import pytest
import torch

from lab.experiments.in_context import in_context_scores

VOCAB, SEQ, PERIOD = 1000, 64, 8


class PeriodicTask:
    """Held-out text that counts 0 .. PERIOD-1 over and over, from a random phase."""
    seq_len, vocab_size = SEQ, VOCAB

    def eval_batch(self, batch_size, generator):
        phase = torch.randint(0, PERIOD, (batch_size, 1), generator=generator)
        seq = (phase + torch.arange(SEQ + 1)[None, :]) % PERIOD
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


class Uniform(torch.nn.Module):
    def forward(self, ids):
        return torch.zeros(*ids.shape, VOCAB)


class InductionOracle(torch.nn.Module):
    """Predicts, with logit 30, the token that followed the latest earlier occurrence of the current one."""

    def forward(self, ids):
        out = torch.zeros(*ids.shape, VOCAB)
        for b in range(ids.shape[0]):
            last = {}
            for t in range(ids.shape[1]):
                tok = int(ids[b, t])
                if tok in last and last[tok] + 1 < ids.shape[1]:
                    out[b, t, ids[b, last[tok] + 1]] = 30.0
                last[tok] = t
        return out


class GrowingConfidence(torch.nn.Module):
    """Predicts the periodic text's next token with logit t / 4 at position t."""

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, VOCAB)
        t = torch.arange(ids.shape[1], dtype=torch.float32)[None, :].expand(ids.shape)
        logits.scatter_(2, ((ids + 1) % PERIOD)[..., None], (t / 4)[..., None])
        return logits


def test_uniform_model_scores_zero():
    r = in_context_scores(Uniform(), PeriodicTask(), windows=8, span=6)
    assert r.induction == pytest.approx(0.0, abs=1e-6) and r.icl == pytest.approx(0.0, abs=1e-6)
    assert r.first_copy_loss == pytest.approx(math.log(VOCAB), rel=1e-6)


def test_induction_oracle_recalls_the_second_copy_only():
    r = in_context_scores(InductionOracle(), PeriodicTask(), windows=16, span=8, seed=3)
    # the first copy's random tokens (from 1,000) were not seen before; the second copy repeats them (but for
    # the odd span token that is also one of the text's, whose latest occurrence is then the text's)
    assert r.second_copy_loss < 0.05 * r.first_copy_loss
    assert r.first_copy_loss > 0.9 * math.log(VOCAB)
    assert r.induction == pytest.approx(r.first_copy_loss - r.second_copy_loss)


def test_confidence_growing_with_position_gives_negative_icl():
    r = in_context_scores(GrowingConfidence(), PeriodicTask(), windows=4, span=4)

    def loss(t):  # cross-entropy of the right token at logit t / 4 against VOCAB - 1 zeros
        return math.log(VOCAB - 1 + math.exp(t / 4)) - t / 4

    early = sum(loss(t) for t in range(SEQ // 8, SEQ // 4)) / (SEQ // 8)
    late = sum(loss(t) for t in range(SEQ - SEQ // 4, SEQ)) / (SEQ // 4)
    # float32 cross-entropy: absolute error about 1e-6 per position
    assert r.early_loss == pytest.approx(early, abs=1e-5) and r.late_loss == pytest.approx(late, abs=1e-5)
    assert r.icl == pytest.approx(late - early, abs=2e-5) and r.icl < -1


@pytest.mark.parametrize("kwargs, needle", [
    ({"windows": 0}, "windows must be >= 1, got 0"),
    ({"span": 1}, "span must be >= 2, got 1"),
    ({"span": 32}, "two copies of span 32 need seq_len >= 65, got the task's seq_len 64"),
])
def test_bad_arguments_name_themselves(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        in_context_scores(Uniform(), PeriodicTask(), **kwargs)
