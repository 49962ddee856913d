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
        loss = model(x[:, :-1], labels=x[:, 1:]).loss
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
