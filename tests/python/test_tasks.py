"""tmm.tasks: the synthetic task generators (copy, MQAR).

Layout (labels where they should be, already aligned for next-token
prediction), ids in range, determinism per seed, and the accuracy metric
(a perfect predictor scores 1, a constant one about chance)."""
import json

import pytest
import torch
import torch.nn.functional as F

import tmm.tasks as tasks
from tmm.data.corpus import default_corpus

IGNORE = tasks.IGNORE_INDEX


pytestmark = pytest.mark.usefixtures("one_thread")


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def perfect_logits(labels, vocab):
    return F.one_hot(labels.clamp_min(0), vocab).float()


def constant_logits(labels, vocab, token):
    logits = torch.zeros(labels.shape + (vocab,))
    logits[..., token] = 1.0
    return logits


def test_registry():
    assert tasks.names() == ["copy", "lm", "mqar", "shards"]
    with pytest.raises(ValueError, match="unknown task"):
        tasks.make("nope")
    with pytest.raises(TypeError, match="unknown option"):
        tasks.make("copy", nn=3)
    with pytest.raises(TypeError, match="unknown option"):
        tasks.make("mqar", n=3)


@pytest.mark.parametrize("name", ["copy", "mqar"])
def test_common_contract(name):
    task = tasks.make(name)
    assert task.name == name
    x, y = task.batch(8, gen())
    assert x.shape == y.shape == (8, task.seq_len)
    assert x.dtype == y.dtype == torch.long
    assert 0 <= int(x.min()) and int(x.max()) < task.vocab_size
    scored = y[y != IGNORE]
    assert scored.numel() > 0 and 0 <= int(scored.min()) and int(scored.max()) < task.vocab_size
    # the options are JSON and rebuild the same task
    options = json.loads(json.dumps(task.options))
    again = tasks.make(name, **options)
    assert (again.seq_len, again.vocab_size) == (task.seq_len, task.vocab_size)
    x2, y2 = again.batch(8, gen())
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert name in repr(task)


@pytest.mark.parametrize("name", ["copy", "mqar"])
def test_deterministic_per_seed(name):
    task = tasks.make(name)
    g1, g2 = gen(123), gen(123)
    a = [task.batch(4, g1) for _ in range(3)]
    b = [task.batch(4, g2) for _ in range(3)]
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert not torch.equal(a[0][0], a[1][0])  # the stream moves on
    xo, _ = task.batch(4, gen(124))
    assert not torch.equal(a[0][0], xo)  # another seed, another batch


def test_copy_layout():
    n = 10
    task = tasks.make("copy", n=n, vocab=5, offset=3)
    assert task.seq_len == 2 * n and task.vocab_size == 8
    x, y = task.batch(64, gen())
    assert torch.equal(x[:, :n], x[:, n:])
    assert 3 <= int(x.min()) and int(x.max()) < 8
    # labels only on the second copy, aligned: labels[t] = input[t + 1]
    scored = y != IGNORE
    expect = torch.zeros_like(scored)
    expect[:, n - 1 : 2 * n - 1] = True
    assert torch.equal(scored, expect)
    assert torch.equal(y[:, n - 1 : 2 * n - 1], x[:, n:])
    assert torch.equal(y[:, n - 1 : 2 * n - 1], x[:, :n])
    # defaults
    d = tasks.make("copy")
    assert (d.seq_len, d.vocab_size, d.options["n"], d.options["vocab"]) == (128, 16, 64, 16)


def test_copy_accuracy():
    task = tasks.make("copy")
    x, y = task.batch(256, gen(1))
    assert task.accuracy(perfect_logits(y, task.vocab_size), y) == 1.0
    const = task.accuracy(constant_logits(y, task.vocab_size, 5), y)
    assert abs(const - task.chance) < 0.01, (const, task.chance)
    # predicting the true next token everywhere is perfect (labels are aligned)
    next_token = torch.cat([x[:, 1:], x[:, :1]], dim=1)
    assert task.accuracy(perfect_logits(next_token, task.vocab_size), y) == 1.0
    # predicting the current token (no shift) is only right by coincidence
    assert task.accuracy(perfect_logits(x, task.vocab_size), y) < 0.2


def test_copy_text(tmp_path):
    text = ("The quick brown fox jumps over the lazy dog. " * 20).encode()
    path = tmp_path / "corpus.txt"
    path.write_bytes(text)
    task = tasks.make("copy", n=16, source="text", path=str(path))
    assert task.vocab_size == 256 and task.options["vocab"] == 256
    x, y = task.batch(32, gen())
    assert torch.equal(x[:, :16], x[:, 16:])
    for row in x[:4]:
        assert bytes(row[:16].tolist()) in text
    assert torch.equal(y[:, 15:31], x[:, 16:])
    default = tasks.make("copy", n=16, source="text")  # the default corpus
    assert default.options["path"] is None and default.vocab_size == 256
    x, _ = default.batch(4, gen())
    corpus = default_corpus().read_bytes()
    assert all(bytes(row[:16].tolist()) in corpus for row in x)
    with pytest.raises(ValueError, match="source"):
        tasks.make("copy", source="wiki")


def test_options_from_strings():
    task = tasks.make("copy", n="8", vocab="4")
    assert (task.seq_len, task.vocab_size) == (16, 4)
    m = tasks.make("mqar", random_non_queries="false", power_a="1")
    assert m.options["random_non_queries"] is False and m.options["power_a"] == 1.0
    with pytest.raises(TypeError):
        tasks.make("copy", n="eight")


def test_mqar_zoology_example_layout():
    # docs/training.md's (and Zoology's) example: K = 2, L = 16, vocab = 12
    task = tasks.make("mqar", num_kv_pairs=2, seq_len=16, vocab=12, random_non_queries=False)
    x, y = task.batch(200, gen())
    keys, values = x[:, 0:4:2], x[:, 1:4:2]
    assert ((keys >= 1) & (keys < 6)).all() and ((values >= 6) & (values < 12)).all()
    assert (keys[:, 0] != keys[:, 1]).all()
    assert (y[:, :4] == IGNORE).all()
    rest = x[:, 4:]
    assert ((rest == 0) | ((rest >= 1) & (rest < 6))).all()  # only fillers (0) and queried keys


@pytest.mark.parametrize("random_non_queries", [True, False])
def test_mqar_layout(random_non_queries):
    k, L, V = 8, 64, 256
    task = tasks.make("mqar", num_kv_pairs=k, seq_len=L, vocab=V, random_non_queries=random_non_queries)
    assert (task.seq_len, task.vocab_size) == (L, V)
    x, y = task.batch(128, gen(7))
    keys, values = x[:, 0 : 2 * k : 2], x[:, 1 : 2 * k : 2]
    # keys unique within an example, disjoint key and value ranges
    assert (keys.sort(dim=1).values.diff(dim=1) != 0).all()
    assert (values.sort(dim=1).values.diff(dim=1) != 0).all()
    assert ((keys >= 1) & (keys < V // 2)).all()
    assert ((values >= V // 2) & (values < V)).all()
    scored = y != IGNORE
    assert (scored.sum(dim=1) == k).all()
    assert not scored[:, : 2 * k].any()
    for b in range(x.shape[0]):
        pos = scored[b].nonzero().flatten()
        assert ((pos - 2 * k) % 2 == 0).all()  # queries start two-token slots
        pairs = dict(zip(keys[b].tolist(), values[b].tolist()))
        queried = x[b, pos].tolist()
        assert sorted(queried) == sorted(pairs)  # every key queried exactly once
        # aligned: the logits at the query token predict the key's value
        assert [pairs[q] for q in queried] == y[b, pos].tolist()
    fillers = ~scored
    fillers[:, : 2 * k] = False
    if random_non_queries:
        assert x[fillers].float().std() > 10  # random tokens, not zeros
    else:
        assert (x[fillers] == 0).all()


def test_mqar_power_law_gaps():
    task = tasks.make("mqar", num_kv_pairs=4, seq_len=128, power_a=0.01)
    _, y = task.batch(256, gen())
    pos = (y != IGNORE).nonzero()[:, 1].float()
    uniform = tasks.make("mqar", num_kv_pairs=4, seq_len=128, power_a=1.0)
    _, yu = uniform.batch(256, gen())
    pos_u = (yu != IGNORE).nonzero()[:, 1].float()
    assert pos.mean() < pos_u.mean() - 10  # power law: queries close to the pairs


def test_mqar_accuracy_and_checks():
    task = tasks.make("mqar")
    x, y = task.batch(512, gen(3))
    assert task.accuracy(perfect_logits(y, task.vocab_size), y) == 1.0
    const = task.accuracy(constant_logits(y, task.vocab_size, task.vocab_size // 2 + 5), y)
    assert abs(const - task.chance) < 0.01, (const, task.chance)
    assert task.accuracy(constant_logits(y, task.vocab_size, 1), y) == 0.0  # a key is never an answer
    with pytest.raises(ValueError, match="seq_len"):
        tasks.make("mqar", num_kv_pairs=20, seq_len=64)
    with pytest.raises(ValueError, match="vocab"):
        tasks.make("mqar", num_kv_pairs=8, vocab=16)


def test_accuracy_edge_cases():
    y = torch.full((2, 5), IGNORE)
    assert torch.isnan(torch.tensor(tasks.Task.accuracy(torch.zeros(2, 5, 3), y)))
    with pytest.raises(ValueError, match="do not match"):
        tasks.Task.accuracy(torch.zeros(2, 4, 3), y)
    with pytest.raises(ValueError, match="batch_size"):
        tasks.make("copy").batch(0, gen())
