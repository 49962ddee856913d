"""The language-modelling task (tmm.tasks.lm), its corpora (tmm.data.corpus)
and its tokenizers (tmm.data.lm_tokenizer over tmm.text): labels aligned, a
held-out split disjoint from training, determinism, bits per byte, file
formats (text, JSONL, Parquet), the default corpus."""
import json
import math
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import tmm.models
import tmm.tasks as tasks
import tmm.text
from tmm.data import corpus as corpora
from tmm.data.corpus import held_out, split_sections
from tmm.data.lm_tokenizer import make_tokenizer
from tmm.train import TrainConfig, train


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """~40 KB of numbered, distinct lines (each line says which it is), with
    some multi-byte characters."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = [f"Line {i:05d}: the quick brown fox — jumps over the lazy dog ({i % 7} é)." for i in range(600)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def small(corpus, **kw):
    opts = dict(corpus=str(corpus), seq_len=32, section_bytes=1024, eval_fraction=0.1)
    opts.update(kw)
    return tasks.make("lm", **opts)


def test_labels_are_the_next_tokens(corpus):
    task = small(corpus)
    assert (task.vocab_size, task.seq_len) == (256, 32) and "lm" in tasks.names()
    for draw in (task.batch, task.eval_batch):
        x, y = draw(8, gen())
        assert x.shape == y.shape == (8, 32) and x.dtype == y.dtype == torch.long
        assert torch.equal(x[:, 1:], y[:, :-1])  # labels[t] = input[t + 1]
        assert (y != tasks.IGNORE_INDEX).all()  # every position scored
        assert int(x.max()) < task.vocab_size


def test_held_out_split_is_disjoint_and_deterministic(corpus):
    task = small(corpus)
    data = corpus.read_bytes()
    sections = split_sections(data, 1024)
    train_text = b"".join(s for i, s in enumerate(sections) if not held_out(i, task.stride))
    eval_text = b"".join(s for i, s in enumerate(sections) if held_out(i, task.stride))
    assert bytes(task.train_ids.to(torch.uint8).numpy()) == train_text
    assert bytes(task.eval_ids.to(torch.uint8).numpy()) == eval_text
    assert task.train_bytes + task.eval_bytes == len(data)
    assert 0.05 < task.eval_bytes / len(data) < 0.15  # eval_fraction 0.1
    # The lines are distinct: no held-out line occurs in the training split.
    train_lines = set(train_text.split(b"\n"))
    eval_lines = [ln for ln in eval_text.split(b"\n")[1:-1]]  # whole lines only
    assert eval_lines and not train_lines.intersection(eval_lines)
    # Same corpus, same split and same batches for the same seed.
    again = small(corpus)
    assert torch.equal(again.eval_ids, task.eval_ids)
    assert all(torch.equal(a, b) for a, b in zip(task.batch(4, gen(3)), again.batch(4, gen(3))))
    assert not torch.equal(task.batch(4, gen(3))[0], task.batch(4, gen(4))[0])


def test_split_sections_keeps_characters_whole():
    data = ("αβγδ" * 100 + "\n" + "x" * 50 + "\n" + "é" * 300).encode("utf-8")
    parts = split_sections(data, 64)
    assert b"".join(parts) == data
    for p in parts:
        assert 0 < len(p) <= 64
        p.decode("utf-8")  # no character cut in two


def test_bits_per_byte_arithmetic(corpus):
    task = small(corpus)
    eval_set = [task.eval_batch(4, gen(i)) for i in range(2)]
    assert task.bits_per_byte(2.0, eval_set) == pytest.approx(2.0 / math.log(2))  # bytes: 1 token = 1 byte
    bpe = small(corpus, tokenizer="bpe", vocab=300)
    x, y = bpe.eval_batch(4, gen())
    nbytes = int(bpe.tokenizer.token_bytes[y.flatten().numpy()].sum())
    assert bpe.bytes_per_token(y) == pytest.approx(nbytes / y.numel())
    assert bpe.bits_per_byte(1.5, [(x, y)]) == pytest.approx(1.5 * y.numel() / (math.log(2) * nbytes))
    masked = y.clone()
    masked[:, :5] = tasks.IGNORE_INDEX  # unscored positions count neither tokens nor bytes
    kept = masked[masked != tasks.IGNORE_INDEX]
    assert bpe.bytes_per_token(masked) == pytest.approx(bpe.tokenizer.token_bytes[kept.numpy()].sum() / kept.numel())


def test_bpe_tokenizer(corpus):
    task = small(corpus, tokenizer="bpe", vocab=320)
    tok = task.tokenizer
    assert task.vocab_size == tok.vocab_size == 320 and task.options["vocab"] == 320
    text = "Line 00042: the quick brown fox — jumps (é)."
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert int(tok.token_bytes[ids].sum()) == len(text.encode("utf-8"))
    assert len(ids) < len(text.encode("utf-8")) / 2  # merges learned
    assert len(task.train_ids) < task.train_bytes  # fewer tokens than bytes
    x, y = task.batch(4, gen())
    assert torch.equal(x[:, 1:], y[:, :-1]) and int(x.max()) < 320
    with pytest.raises(ValueError, match="vocab_size must be an int >= 257"):
        make_tokenizer("bpe", ["abc"], 100)
    with pytest.raises(ValueError, match="lm: tokenizer must be"):
        small(corpus, tokenizer="bytes")
    # The BPE is tmm.text's: its tokenizer.json loads in tmm and in `tokenizers` with the same ids.
    tokenizers = pytest.importorskip("tokenizers")
    ref = tokenizers.Tokenizer.from_str(tok.json_text)
    assert tok.encode(text).tolist() == ref.encode(text).ids
    assert tok.to_json()["model"]["type"] == "BPE"


def test_byte_tokenizer_is_the_cpp_one(corpus):
    tok = small(corpus).tokenizer
    cpp = tmm.text.Tokenizer.byte_level()
    text = "héllo — wörld 😀\n"
    assert tok.name == "byte" and tok.vocab_size == 256 and tok.to_json() == {"kind": "byte"}
    assert tok.encode(text).tolist() == list(text.encode("utf-8")) == cpp.encode(text)
    assert tok.encode(b"\xff\x00").tolist() == [255, 0]
    assert (tok.token_bytes == 1).all()
    broken = [104, 0xC3, 0xA9, 0xFF, 0xE4, 0xBD]
    assert tok.decode(broken) == bytes(broken).decode("utf-8", "replace")


def test_option_errors(corpus, tmp_path):
    with pytest.raises(ValueError, match="tokenizer"):
        small(corpus, tokenizer="words")
    with pytest.raises(ValueError, match="vocab applies"):
        small(corpus, vocab=512)
    with pytest.raises(ValueError, match="eval_fraction"):
        small(corpus, eval_fraction=0.9)
    with pytest.raises(FileNotFoundError, match="no such corpus"):
        tasks.make("lm", corpus=str(tmp_path / "missing.txt"))
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("only a few words\n")
    with pytest.raises(ValueError, match="too few"):
        tasks.make("lm", corpus=str(tiny))
    with pytest.raises(TypeError, match="unknown option"):
        small(corpus, context=4)
    # make(name, **options) rebuilds the same task
    t = small(corpus)
    assert torch.equal(tasks.make("lm", **t.options).eval_ids, t.eval_ids)


def test_jsonl_folder_and_max_bytes(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    docs = [f"Document {i}: " + "words and more words. " * 20 for i in range(60)]
    for k in range(2):
        with open(folder / f"part-{k}.jsonl", "w") as f:
            for d in docs[k * 30 : (k + 1) * 30]:
                f.write(json.dumps({"id": len(d), "text": d}) + "\n")
    assert corpora.read_documents(folder) == docs
    cut = corpora.read_documents(folder, max_bytes=1000)
    assert sum(len(d.encode()) for d in cut) == 1000
    task = tasks.make("lm", corpus=str(folder), seq_len=16, section_bytes=256, eval_fraction=0.2)
    # documents are separated by a blank line and each is one section or more
    assert task.train_bytes + task.eval_bytes == sum(len(d) + 2 for d in docs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text field"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        corpora.read_documents(bad)


def test_parquet_corpus(tmp_path):
    """Parquet shards (FineWeb-edu's layout): the text column, nulls skipped,
    in file order; the lm task reads them as it reads the same documents as JSONL."""
    docs = [f"Parquet document {i}: " + "some words of text. " * 20 for i in range(40)]
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(2):
        part = docs[k * 20:(k + 1) * 20]
        texts = part[:10] + [None] + part[10:]  # a null row is skipped
        pq.write_table(pa.table({"text": texts, "score": [float(i) for i in range(len(texts))]}),
                       folder / f"part-{k}.parquet", row_group_size=7)  # several row groups per file
    assert corpora.read_documents(folder) == docs
    assert corpora.read_documents(folder / "part-1.parquet") == docs[20:]
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    opts = dict(seq_len=16, section_bytes=256, eval_fraction=0.2)
    from_parquet, from_jsonl = (tasks.make("lm", corpus=str(c), **opts) for c in (folder, jsonl))
    assert torch.equal(from_parquet.train_ids, from_jsonl.train_ids)
    assert torch.equal(from_parquet.eval_ids, from_jsonl.eval_ids)
    cut = corpora.read_documents(folder, max_bytes=500)
    assert sum(len(d.encode()) for d in cut) == 500

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"body": ["no text column"]}), bad)
    with pytest.raises(ValueError, match=r"bad\.parquet: no 'text' column \(columns: body\)"):
        corpora.read_documents(bad)


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "shard.parquet"
    pq.write_table(pa.table({"text": ["one"]}), path)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as if pyarrow were not installed
    with pytest.raises(ImportError, match="needs pyarrow"):
        corpora.read_documents(path)


def test_kjv_to_text():
    raw = "\nGenesis 1\n\n  1 In the beginning God created.\n  2 And the earth.\n\nGenesis 2\n\n  1 Thus the heavens.\n"
    assert corpora.kjv_to_text(raw) == "Genesis 1\nIn the beginning God created.\nAnd the earth.\n\nGenesis 2\nThus the heavens.\n"


def test_default_corpus_is_real_prose():
    """The KJV from the Debian packages scripts/_env.sh installs."""
    path = corpora.default_corpus()
    data = path.read_bytes()
    assert len(data) > 4_000_000
    assert data.startswith(b"Genesis 1\nIn the beginning God created the heaven and the earth.\n")
    assert data.rstrip().endswith(b"The grace of our Lord Jesus Christ be with you all. Amen.")
    task = tasks.make("lm", seq_len=64)
    assert task.options["corpus"] is None and task.corpus == str(path)
    assert task.eval_bytes > 150_000 and task.vocab_size == 256


def test_train_evaluates_on_the_held_out_split(corpus, restore_threads):
    torch.set_num_threads(1)
    task = small(corpus, seq_len=16)
    calls = []
    original = task.eval_batch

    def spy(bs, g):
        calls.append(bs)
        return original(bs, g)

    task.eval_batch = spy
    cfg = json.loads(open(tmm.models.models_dir() / "tmm-tiny.json").read())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    model = tmm.models.build(cfg)
    rows = []
    train(model, task, TrainConfig(steps=4, batch_size=2, eval_every=2, eval_batches=3, progress=False), log=rows.append)
    assert calls == [2, 2, 2]  # the eval set came from the held-out split
    for r in rows:
        assert r["eval_bpb"] == pytest.approx(r["eval_loss"] / math.log(2))
