"""The tmm CLI (build/bin/tmm) and the example application built against the
installed package (tests/consumer/generate.cpp): a model trained in Python,
saved with its BPE tokenizer, generates the same tokens from C++ as from
Python. scripts/test.sh sets TMM_CLI and TMM_CONSUMER_DIR; run by hand,
the build/ paths are used when they exist."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import tmm
import tmm.models as M
import tmm.text

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("TMM_CLI", REPO / "build" / "bin" / "tmm"))
EXAMPLE = Path(os.environ.get("TMM_CONSUMER_DIR", REPO / "build" / "consumer")) / "tmm_generate_example"
REQUIRED = "TMM_CLI" in os.environ  # under scripts/test.sh a missing binary is a failure

TEXT = ("The quick brown fox jumps over the lazy dog. " * 8 + "Café, naïve, 東京, emoji 🙂. " * 4).strip()


def _binary(path):
    if not path.exists():
        if REQUIRED:
            pytest.fail(f"{path} was not built")
        pytest.skip(f"{path} not built (run scripts/test.sh)")
    return str(path)


def _run(*args, check=True):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"{args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    """A small TMM trained in Python for a few steps on TEXT, with a BPE tokenizer."""
    d = tmp_path_factory.mktemp("ckpt")
    tok = tmm.text.train_bpe(iter([TEXT] * 4), 300, d / "tokenizer.json", min_frequency=1)
    ids = torch.tensor(tok.encode(TEXT))
    torch.manual_seed(0)
    model = M.build({"arch": "tmm", "vocab_size": tok.vocab_size, "d_model": 32, "n_layers": 2, "max_len": 128,
                     "heads": 2})
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x = ids[: min(len(ids), 128)].unsqueeze(0)
    for _ in range(30):
        loss = model(x, labels=x).loss  # next-token prediction
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save(d)
    return d, tok, model.eval()


def test_cli_generates_the_tokens_python_generates(trained_dir):
    d, tok, model = trained_dir
    prompt = "The quick brown"
    expected = model.generate(tok.encode(prompt), 24, temperature=0)["tokens"]
    r = _run(_binary(CLI), "generate", "--model", d, "--prompt", prompt, "--max-new-tokens", 24, "--greedy")
    assert r.stdout == tok.decode(expected) + "\n"
    assert "prefill 1 x" in r.stderr and "tokens/s" in r.stderr
    for method in ("cached", "fast", "recompute"):
        r = _run(CLI, "generate", "--model", d, "--prompt", prompt, "--max-new-tokens", 24, "--greedy", "--quiet",
                 "--method", method)
        assert r.stdout == tok.decode(expected) + "\n" and r.stderr == ""


def test_installed_example_generates_the_tokens_python_generates(trained_dir):
    d, tok, model = trained_dir
    prompt = "Café, naïve"
    expected = model.generate(tok.encode(prompt), 16, temperature=0)["tokens"]
    r = _run(_binary(EXAMPLE), d, prompt, 16)
    ids_line, text = r.stdout.split("\n", 1)
    assert [int(t) for t in ids_line.split()] == expected
    assert text == tok.decode(expected) + "\n"


def test_cli_sampling_batch_and_stop(trained_dir):
    d, tok, model = trained_dir
    args = ["generate", "--model", d, "--max-new-tokens", 12, "--temperature", 0.8, "--top-k", 20, "--top-p", 0.9,
            "--seed", 4, "--quiet"]
    a = _run(_binary(CLI), *args, "--prompt", "The lazy")
    assert a.stdout == _run(CLI, *args, "--prompt", "The lazy").stdout  # seeded
    expected = model.generate(tok.encode("The lazy"), 12, temperature=0.8, top_k=20, top_p=0.9, seed=4)["tokens"]
    assert a.stdout == tok.decode(expected) + "\n"
    batch = _run(CLI, *args, "--prompt", "The lazy", "--prompt", "over the")
    assert batch.stdout.startswith("--- 0\n" + tok.decode(expected) + "\n--- 1\n")
    greedy = tok.decode(model.generate(tok.encode("The"), 24, temperature=0)["tokens"])
    stop = greedy[5:8]
    r = _run(CLI, "generate", "--model", d, "--prompt", "The", "--max-new-tokens", 24, "--greedy", "--quiet",
             "--stop", stop)
    assert r.stdout == greedy[: greedy.index(stop)] + "\n"


def test_cli_info_and_bench(trained_dir):
    d, tok, model = trained_dir
    info = _run(_binary(CLI), "info", "--model", d).stdout
    assert "arch           tmm" in info and f"parameters     {model.num_parameters()}" in info
    assert "tokenizer      bpe (300 ids)" in info and "fast" in info
    bench = _run(CLI, "bench-decode", "--model", d, "--contexts", "8,32", "--steps", 3).stdout
    assert "cached" in bench and "fast" in bench and len(bench.strip().splitlines()) == 6


def test_cli_errors(trained_dir, tmp_path):
    d, _, _ = trained_dir
    cli = _binary(CLI)
    r = _run(cli, "generate", "--model", tmp_path / "missing", "--prompt", "x", check=False)
    assert r.returncode == 1 and "is not a directory" in r.stderr
    r = _run(cli, "generate", "--model", tmp_path, "--prompt", "x", check=False)
    assert r.returncode == 1 and "has no config.json" in r.stderr
    r = _run(cli, "generate", "--model", d, "--prompt", "x", "--max-new-tokens", "many", check=False)
    assert r.returncode == 2 and "--max-new-tokens: expected an integer >= 1, got 'many'" in r.stderr
    r = _run(cli, "generate", "--model", d, "--prompt", "x", "--colour", check=False)
    assert r.returncode == 2 and "unknown option --colour" in r.stderr
    r = _run(cli, "generate", "--model", d, check=False)
    assert r.returncode == 2 and "missing --prompt" in r.stderr
    r = _run(cli, "generate", "--model", d, "--prompt", "x", "--max-new-tokens", 500, check=False)
    assert r.returncode == 1 and "max_len 128" in r.stderr
    r = _run(cli, "frobnicate", check=False)
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    broken = tmp_path / "broken"
    shutil.copytree(d, broken)
    (broken / "model.safetensors").write_bytes(b"\x00" * 10)
    r = _run(cli, "info", "--model", broken, check=False)
    assert r.returncode == 1 and "model.safetensors" in r.stderr


# --- the documented flags and syntax -------------------------------------

def _generate(d, *args):
    return _run(_binary(CLI), "generate", "--model", d, "--greedy", "--quiet", *args)


def test_cli_version():
    r = _run(_binary(CLI), "--version")
    assert r.stdout == f"tmm {tmm.__version__} (torch {torch.__version__})\n" and r.stderr == ""


def test_cli_prompt_file(trained_dir, tmp_path):
    d, tok, model = trained_dir
    prompt = "Café, naïve\n"  # read as bytes: the newline and the accents are the prompt's
    f = tmp_path / "prompt.txt"
    f.write_bytes(prompt.encode("utf-8"))
    expected = model.generate(tok.encode(prompt), 12, temperature=0)["tokens"]
    assert _generate(d, "--prompt-file", f, "--max-new-tokens", 12).stdout == tok.decode(expected) + "\n"
    # With --prompt: a batch, the file's prompt last.
    batch = model.generate([tok.encode("The lazy"), tok.encode(prompt)], 12, temperature=0)["tokens"]
    r = _generate(d, "--prompt", "The lazy", "--prompt-file", f, "--max-new-tokens", 12)
    assert r.stdout == f"--- 0\n{tok.decode(batch[0])}\n--- 1\n{tok.decode(batch[1])}\n"
    r = _run(CLI, "generate", "--model", d, "--prompt-file", tmp_path / "missing.txt", check=False)
    assert r.returncode == 1 and f"--prompt-file: cannot read '{tmp_path / 'missing.txt'}'" in r.stderr
    (tmp_path / "empty.txt").write_bytes(b"")
    r = _run(CLI, "generate", "--model", d, "--prompt-file", tmp_path / "empty.txt", check=False)
    assert r.returncode == 2 and "prompt 0 is empty" in r.stderr


def test_cli_stop_id(trained_dir):
    d, tok, model = trained_dir
    greedy = model.generate(tok.encode("The"), 24, temperature=0)["tokens"]
    firsts = [i for i, t in enumerate(greedy) if t not in greedy[:i]]  # first occurrences
    k = firsts[min(2, len(firsts) - 1)]
    stop = greedy[k]
    assert model.generate(tok.encode("The"), 24, temperature=0, stop_tokens=[stop])["tokens"] == greedy[:k + 1]
    # The sequence ends after the stop token, which is printed.
    r = _generate(d, "--prompt", "The", "--max-new-tokens", 24, "--stop-id", stop)
    assert r.stdout == tok.decode(greedy[:k + 1]) + "\n"
    # Repeatable: the first of them generated ends it.
    later = next((t for t in greedy[k + 1:] if t not in greedy[:k + 1]), stop)
    assert _generate(d, "--prompt", "The", "--max-new-tokens", 24, "--stop-id", later, "--stop-id", stop).stdout == \
        r.stdout
    r = _run(CLI, "generate", "--model", d, "--prompt", "x", "--stop-id", "-1", check=False)
    assert r.returncode == 2 and "--stop-id: expected an integer >= 0, got '-1'" in r.stderr


def test_cli_threads(trained_dir):
    d, tok, model = trained_dir
    expected = tok.decode(model.generate(tok.encode("The quick"), 16, temperature=0)["tokens"]) + "\n"
    for n in (1, 2):
        assert _generate(d, "--prompt", "The quick", "--max-new-tokens", 16, "--threads", n).stdout == expected
    for bad in ("0", "two"):
        r = _run(CLI, "generate", "--model", d, "--prompt", "x", "--threads", bad, check=False)
        assert r.returncode == 2 and f"--threads: expected an integer >= 1, got '{bad}'" in r.stderr


def test_cli_option_equals_value(trained_dir):
    d, tok, model = trained_dir
    spaced = _generate(d, "--prompt", "The", "--max-new-tokens", 8).stdout
    joined = _run(CLI, "generate", f"--model={d}", "--prompt=The", "--max-new-tokens=8", "--greedy", "--quiet").stdout
    assert joined == spaced
    # The value is everything after the first '='.
    expected = tok.decode(model.generate(tok.encode("a=b"), 4, temperature=0)["tokens"]) + "\n"
    assert _generate(d, "--prompt=a=b", "--max-new-tokens=4").stdout == expected
    for args, message in [(["--greedy=yes"], "--greedy takes no value"),
                          (["--prompt="], "prompt 0 is empty"),
                          (["--prompt", "x", "--max-new-tokens"], "--max-new-tokens needs a value (N)"),
                          (["--prompt", "x", "--max-new-tokens=", "--quiet"], "expected an integer >= 1, got ''"),
                          (["--prompt", "x", "--top-p=high"], "--top-p: expected a number, got 'high'"),
                          (["--prompt", "x", "--colour=red"], "unknown option --colour")]:
        r = _run(CLI, "generate", "--model", d, *args, check=False)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)


def test_cli_repeated_flags(trained_dir):
    d, tok, model = trained_dir
    # Repeatable flags accumulate: --prompt (a batch), --stop, --stop-id.
    greedy = tok.decode(model.generate(tok.encode("The"), 24, temperature=0)["tokens"])
    first, second = greedy[3:5], greedy[10:12]
    r = _generate(d, "--prompt", "The", "--max-new-tokens", 24, "--stop", second, "--stop", first)
    assert r.stdout == greedy[: min(greedy.index(first), greedy.index(second))] + "\n"
    # Any other flag given twice is an error naming it, even with the same value.
    for args in (["--seed", "1", "--seed", "2"], ["--model", d], ["--quiet"], ["--max-new-tokens=3", "--max-new-tokens", "3"]):
        r = _run(CLI, "generate", "--model", d, "--prompt", "x", "--quiet", *args, check=False)
        name = args[0].split("=")[0]
        assert r.returncode == 2 and f"{name} given more than once" in r.stderr, (args, r.stderr)


# --- models without a text tokenizer ---------------------------------------

def test_cli_refuses_the_byte_fallback_above_256_ids(tmp_path):
    """A BPE model saved without its tokenizer.json: the error names the file
    it looked for, instead of bytes that decode its ids as garbage."""
    d = tmp_path / "bpe-without-tokenizer"
    M.build({"arch": "tmm", "vocab_size": 300, "d_model": 16, "n_layers": 1, "max_len": 32}).save(d)
    r = _run(_binary(CLI), "generate", "--model", d, "--prompt", "In the", check=False)
    assert r.returncode == 1, r.stderr
    assert f"has no tokenizer.json (looked for {d}/tokenizer.json)" in r.stderr
    assert "vocab_size 300 is not the byte-level tokenizer's 256" in r.stderr and "--prompt-ids" in r.stderr


def test_cli_token_ids_in_and_out_for_a_model_without_a_tokenizer(tmp_path):
    """The zoo's tmm-tiny (vocabulary 64, no tokenizer): --prompt is refused,
    --prompt-ids gives the ids Python's generate gives."""
    d = tmp_path / "tiny"
    torch.manual_seed(0)
    model = M.build("tmm-tiny")
    model.save(d)
    r = _run(_binary(CLI), "generate", "--model", d, "--prompt", "hello", check=False)
    assert r.returncode == 1 and "vocab_size 64 is not the byte-level tokenizer's 256" in r.stderr
    assert "give the prompt as token ids (--prompt-ids 1,2,3)" in r.stderr
    greedy = model.generate([[1, 2, 3]], 8, temperature=0)["tokens"][0]
    assert _generate(d, "--prompt-ids", "1,2,3", "--max-new-tokens", 8).stdout == " ".join(map(str, greedy)) + "\n"
    batch = model.generate([[1, 2, 3], [4, 5]], 4, temperature=0)["tokens"]
    r = _generate(d, "--prompt-ids", "1,2,3", "--prompt-ids", "4,5", "--max-new-tokens", 4)
    assert r.stdout == "".join(f"--- {i}\n{' '.join(map(str, t))}\n" for i, t in enumerate(batch))
    assert "tokenizer      none: prompts and output are token ids" in _run(CLI, "info", "--model", d).stdout
    for args, status, message in [(["--prompt-ids", "1,64"], 1, "has token id 64, expected ids in [0, 64)"),
                                  (["--prompt-ids", "1,x"], 2, "--prompt-ids: expected an integer >= 0, got 'x'"),
                                  (["--prompt-ids", "1", "--stop", "a"], 2, "with --prompt-ids, use --stop-id"),
                                  (["--prompt-ids", "1", "--prompt", "a"], 2, "give one kind")]:
        r = _run(CLI, "generate", "--model", d, "--quiet", *args, check=False)
        assert r.returncode == status and message in r.stderr, (args, r.stderr)


def test_cli_streams_characters_split_across_byte_tokens(tmp_path):
    """No tokenizer.json: the byte-level tokenizer, so every character beyond
    ASCII reaches the stream split across tokens and is held back whole."""
    text = "東京 naïve 🙂 Ωμέγα " * 12
    d = tmp_path / "bytes"
    ids = torch.tensor(list(text.encode("utf-8")))[:128].unsqueeze(0)
    torch.manual_seed(1)
    model = M.build({"arch": "tmm", "vocab_size": 256, "d_model": 32, "n_layers": 2, "max_len": 128, "heads": 2})
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(40):
        loss = model(ids[:, :-1], labels=ids[:, 1:]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save(d)
    prompt = "東京"
    generated = model.eval().generate(list(prompt.encode("utf-8")), 40, temperature=0)["tokens"]
    assert any(b >= 0xC2 for b in generated), "the model should generate multi-byte characters"
    r = subprocess.run([_binary(CLI), "generate", "--model", str(d), "--prompt", prompt, "--max-new-tokens", "40",
                        "--greedy", "--quiet"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == bytes(generated).decode("utf-8", "replace").encode("utf-8") + b"\n"


# --- a checkpoint directory with a Llama-3-style tokenizer.json -----------

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


def _llama3_style_tokenizer(path, texts, vocab_size):
    """Trained locally with `tokenizers`: NFC, Llama 3's Split regex then
    ByteLevel(use_regex=False), <|begin_of_text|> added before every text."""
    from tokenizers import Regex, Tokenizer as HFTokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers
    bos = "<|begin_of_text|>"
    tok = HFTokenizer(models.BPE(ignore_merges=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_REGEX), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[bos, "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])])
    tok.save(str(path))
    return tok


def test_cli_uses_a_llama3_style_tokenizer_json(tmp_path):
    d = tmp_path / "llama3"
    d.mkdir()
    hf = _llama3_style_tokenizer(d / "tokenizer.json", [TEXT] * 4 + ["It'S 1234567 e\u0301te\u0301\n\n"], 320)
    tok = tmm.text.Tokenizer.from_file(str(d / "tokenizer.json"))
    prompt = "The quick brown fox's cafe\u0301"
    ids = tok.encode(prompt)
    assert ids == hf.encode(prompt).ids and ids[0] == tok.token_to_id("<|begin_of_text|>")
    torch.manual_seed(2)
    model = M.build({"arch": "tmm", "vocab_size": tok.vocab_size, "d_model": 32, "n_layers": 2, "max_len": 128,
                     "heads": 2})
    train_ids = torch.tensor(tok.encode(TEXT)[:128]).unsqueeze(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(30):
        loss = model(train_ids, labels=train_ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save(d)
    expected = model.eval().generate(ids, 20, temperature=0)["tokens"]
    r = _run(_binary(CLI), "generate", "--model", d, "--prompt", prompt, "--max-new-tokens", 20, "--greedy")
    assert r.stdout == hf.decode(expected, skip_special_tokens=False) + "\n"
    assert f"prefill 1 x {len(ids)} tokens" in r.stderr  # the prompt's ids, <|begin_of_text|> included
    info = _run(CLI, "info", "--model", d).stdout
    assert f"tokenizer      bpe ({tok.vocab_size} ids)" in info
