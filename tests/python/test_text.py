"""tmm.text: the C++ tokenizer against the Python `tokenizers` package.

A byte-level BPE is trained with `tokenizers` on a generated corpus of varied
text (scripts, emoji, digits, whitespace runs, contractions, special tokens);
tmm must give the same ids and the same decoded text for many other strings,
with and without add_prefix_space, for both merges formats and the BPE
options tmm supports. The byte-level tokenizer must be the UTF-8 bytes.
"""
import json
import random

import pytest

import tmm
from tmm.text import Tokenizer, train_bpe, train_bpe_json

tokenizers = pytest.importorskip("tokenizers")

WORDS = [
    "hello", "world", "The", "quick", "brown", "fox", "it's", "we're", "I'll", "they've", "I'm", "she'd",
    "don't", "'S", "'LL", "O'Neil", "héllo", "café", "naïve", "Ærøskøbing", "e\u0301", "ß", "ﬁ",
    "你好", "世界", "東京都", "こんにちは", "한국어", "😀", "🎉👍", "👨‍👩‍👧", "🇫🇷", "Привет", "мир", "Ёлка",
    "مرحبا", "بالعالم", "שלום", "नमस्ते", "ไทย", "Ελλάδα", "123", "4567", "3.14", "1,000", "٣٤", "Ⅻ", "½",
    "!!", "...", "?", "(x)", "[a]", "{}", "#tag", "@user", "a+b=c", "--", "—", "“quoted”", "$5", "€3",
    "<|endoftext|>", "<|pad|>", "x\u00a0y", "\u3000", "a\u2028b", "\u200b", "\x00", "\x1f", "\x7f", "~",
]
SEPARATORS = ["", " ", " ", " ", "  ", "   ", "\n", "\n\n", "\t", " \t ", "\r\n", ",", ". ", "\u00a0"]
SPECIAL = ["<|endoftext|>", "<|pad|>"]


def random_text(rng, max_words=30):
    return "".join(rng.choice(WORDS) + rng.choice(SEPARATORS) for _ in range(rng.randint(0, max_words)))


def corpus(n=4000, seed=0):
    rng = random.Random(seed)
    return [random_text(rng) for _ in range(n)]


def probes(n=1500, seed=1):
    rng = random.Random(seed)
    fixed = ["", " ", "  ", "\n", " \n ", "a", " a", "a ", "<|endoftext|>", "x<|endoftext|>y", " <|endoftext|> ",
             "<|endoftext|><|endoftext|>", "<|endoftext|", "it's it'S IT'S", "   leading", "trailing   ",
             "tabs\t\tand\nnewlines\n\n\n", "unseen: ☃ ❄ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ṩ", "12345678901234567890", "a" * 300]
    return fixed + [random_text(rng) for _ in range(n)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """{add_prefix_space: path of a trained tokenizer.json}"""
    out = {}
    for aps in (False, True):
        path = tmp_path_factory.mktemp("bpe") / f"tokenizer-{aps}.json"
        tok = train_bpe(iter(corpus()), 800, path, special_tokens=SPECIAL, add_prefix_space=aps)
        assert tok.kind == "bpe" and tok.vocab_size == 800
        out[aps] = path
    return out


def rewrite(path, tmp_path, edit):
    """A copy of a tokenizer.json changed by edit(dict) (in place)."""
    j = json.loads(path.read_text(encoding="utf-8"))
    edit(j)
    new = tmp_path / f"edited-{len(list(tmp_path.iterdir()))}.json"
    new.write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    return new


def assert_parity(path, texts=None, roundtrip=False):
    ours = Tokenizer.from_file(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    assert ours.vocab_size == ref.get_vocab_size()
    for text in texts if texts is not None else probes():
        ids = ours.encode(text)
        assert ids == ref.encode(text).ids, text
        decoded = ours.decode(ids)
        assert decoded == ref.decode(ids, skip_special_tokens=False), text
        if roundtrip:
            assert decoded == text
    return ours, ref


@pytest.mark.parametrize("aps", [False, True])
def test_bpe_parity(trained, aps):
    # Without add_prefix_space the text comes back exactly.
    assert_parity(trained[aps], roundtrip=not aps)


@pytest.mark.parametrize("aps", [False, True])
def test_bpe_parity_string_merges(trained, tmp_path, aps):
    def to_strings(j):
        assert isinstance(j["model"]["merges"][0], list)  # what tokenizers writes now
        j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
    path = rewrite(trained[aps], tmp_path, to_strings)
    assert_parity(path)
    pairs = Tokenizer.from_file(str(trained[aps]))
    strings = Tokenizer.from_file(str(path))
    for text in probes(200):
        assert strings.encode(text) == pairs.encode(text)


def test_bpe_parity_without_regex(trained, tmp_path):
    def no_regex(j):
        j["pre_tokenizer"]["use_regex"] = False
    assert_parity(rewrite(trained[False], tmp_path, no_regex), probes(300), roundtrip=True)


def test_bpe_parity_in_sequences(trained, tmp_path):
    def wrap(j):
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [j["pre_tokenizer"]]}
        j["decoder"] = {"type": "Sequence", "decoders": [j["decoder"]]}
    assert_parity(rewrite(trained[True], tmp_path, wrap), probes(300))


def test_bpe_parity_ignore_merges(trained, tmp_path):
    def ignore(j):
        j["model"]["ignore_merges"] = True
    assert_parity(rewrite(trained[False], tmp_path, ignore), probes(300), roundtrip=True)


@pytest.mark.parametrize("fuse", [False, True])
def test_bpe_parity_unk(tmp_path, fuse):
    # Trained without the byte alphabet: bytes never seen become <unk>.
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>", fuse_unk=fuse))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>"], show_progress=False)
    tok.train_from_iterator(["plain ascii words only, 0123 and more."] * 50, trainer)
    path = tmp_path / "unk.json"
    tok.save(str(path))
    texts = ["héllo wörld", "你好你好", "plain 😀😀 words", "ÿÿ", "nothing new"] + probes(300)
    ours, _ = assert_parity(path, texts)
    unk = ours.token_to_id("<unk>")
    assert ours.encode("你好").count(unk) == (1 if fuse else 6)


def test_bpe_parity_dropped_bytes(tmp_path):
    # No unk_token: bytes without a token are left out, as in tokenizers.
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, show_progress=False)
    tok.train_from_iterator(["only some letters here"] * 20, trainer)
    path = tmp_path / "partial.json"
    tok.save(str(path))
    ours, _ = assert_parity(path, ["héllo wörld", "xyz only", ""] + probes(200))
    assert ours.decode(ours.encode("only xzq")) == "only "


def test_added_tokens_strip_and_normalized(trained, tmp_path):
    tok = tokenizers.Tokenizer.from_file(str(trained[False]))
    tok.add_tokens([tokenizers.AddedToken("<L>", lstrip=True), tokenizers.AddedToken("<R>", rstrip=True),
                    tokenizers.AddedToken("<LR>", lstrip=True, rstrip=True, normalized=False),
                    tokenizers.AddedToken("hello", normalized=True), tokenizers.AddedToken("héllo wor")])
    tok.add_special_tokens([tokenizers.AddedToken("<|end|>", special=True)])
    path = tmp_path / "added.json"
    tok.save(str(path))
    rng = random.Random(3)
    pieces = ["<L>", "<R>", "<LR>", "<|end|>", "hello", "héllo world", "  ", " ", "\t", "\n", "x", "<|endoftext|>"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(600)]
    assert_parity(path, texts + probes(200))


def test_decode_lossy_like_tokenizers(trained):
    # Random ids cut UTF-8 characters: both replace the broken parts by U+FFFD alike.
    ours = Tokenizer.from_file(str(trained[False]))
    ref = tokenizers.Tokenizer.from_file(str(trained[False]))
    rng = random.Random(5)
    for _ in range(500):
        ids = [rng.randrange(ours.vocab_size) for _ in range(rng.randint(0, 20))]
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False), ids
        raw = b"".join(ours.token_bytes(i) for i in ids)
        assert ours.decode(ids) == raw.decode("utf-8", "replace")


def test_token_bytes_concatenate_to_the_text(trained):
    tok = Tokenizer.from_file(str(trained[False]))
    for text in probes(200):
        assert b"".join(tok.token_bytes(i) for i in tok.encode(text)) == text.encode("utf-8")
    assert tok.token_to_id("<|endoftext|>") == 0
    assert tok.token_to_id("Ġ") is not None and tok.token_bytes(tok.token_to_id("Ġ")) == b" "
    assert tok.token_to_id("no such token") is None


def test_encode_bytes_with_ill_formed_utf8(trained):
    tok = Tokenizer.from_file(str(trained[False]))
    for data in [b"\xff", b"abc\xc3", b"\xe4\xbd", b"x\xed\xa0\x80y", b"\xf4\x90\x80\x80", b"ok \x80\x80 ok"]:
        ids = tok.encode(data)
        assert b"".join(tok.token_bytes(i) for i in ids) == data
        assert tok.decode(ids) == data.decode("utf-8", "replace")


def test_byte_level():
    tok = Tokenizer.byte_level()
    assert (tok.kind, tok.vocab_size) == ("byte", 256)
    for text in probes(300):
        assert tok.encode(text) == list(text.encode("utf-8"))
        assert tok.decode(tok.encode(text)) == text
    ids = [104, 0xC3, 0xA9, 0xFF, 0xE4, 0xBD]  # "hé", then broken bytes
    assert tok.decode(ids) == bytes(ids).decode("utf-8", "replace")
    assert tok.token_bytes(0xFF) == b"\xff" and tok.token_to_id("a") == 97
    with pytest.raises(IndexError, match="256"):
        tok.decode([256])
    with pytest.raises(IndexError, match="-1"):
        tok.token_bytes(-1)


def test_errors_name_the_key(trained, tmp_path):
    def normalizer(j):
        j["normalizer"] = {"type": "NFKC"}  # NFC and NFD are supported (test_tokenizer_parity.py)
    with pytest.raises(ValueError, match=r"normalizer\.type: expected \"NFC\", \"NFD\".*NFKC"):
        Tokenizer.from_file(str(rewrite(trained[False], tmp_path, normalizer)))
    with pytest.raises(ValueError, match=r"model.type: expected \"BPE\".*WordPiece"):
        Tokenizer.from_str('{"model": {"type": "WordPiece"}, "pre_tokenizer": {"type": "ByteLevel"}, '
                           '"decoder": {"type": "ByteLevel"}}')
    with pytest.raises(ValueError, match="not valid JSON"):
        Tokenizer.from_str("{")
    # A message quoting ill-formed UTF-8 is still a ValueError with a str message.
    with pytest.raises(ValueError, match="not valid JSON") as info:
        Tokenizer.from_str(b'{"model": {"type": "W\xc3"}}')
    assert type(info.value) is ValueError
    with pytest.raises(RuntimeError, match="missing.json"):
        Tokenizer.from_file(str(tmp_path / "missing.json"))
    tok = Tokenizer.from_file(str(trained[False]))
    with pytest.raises(IndexError, match="800"):
        tok.decode([5, 800])


def test_train_bpe_from_files(tmp_path):
    files = []
    for i, chunk in enumerate([corpus(300, seed=7), corpus(300, seed=8)]):
        f = tmp_path / f"part{i}.txt"
        f.write_text("\n".join(chunk), encoding="utf-8")
        files.append(f)
    tok = train_bpe(files, 600, tmp_path / "tok.json")
    assert tok.vocab_size == 600
    assert_parity(tmp_path / "tok.json", probes(100), roundtrip=True)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        train_bpe([tmp_path / "nope.txt"], 600, tmp_path / "x.json")
    with pytest.raises(ValueError, match="vocab_size 100"):
        train_bpe(iter(["a"]), 100, tmp_path / "x.json")
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        train_bpe(iter(["a"]), 600.0, tmp_path / "x.json")
    # the one trainer: train_bpe writes what train_bpe_json returns (pretty-printed), atomically
    js = train_bpe_json(files, 600)
    assert json.loads(js) == json.loads((tmp_path / "tok.json").read_text(encoding="utf-8"))
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_encode_a_megabyte(trained):
    """A long input in one call gives the reference's ids and round-trips
    (its speed is scripts/bench_tokenizer.py's, docs/benchmarks.md)."""
    tok = Tokenizer.from_file(str(trained[False]))
    ref = tokenizers.Tokenizer.from_file(str(trained[False]))
    text = "".join(corpus(6000, seed=11))
    while len(text.encode("utf-8")) < 1_000_000:
        text += text
    ids = tok.encode(text)
    assert ids == ref.encode(text).ids
    assert tok.decode(ids) == text


def test_exposed_as_tmm_text():
    assert tmm.text.Tokenizer is Tokenizer
    assert repr(Tokenizer.byte_level()) == "tmm.text.Tokenizer(kind='byte', vocab_size=256)"
