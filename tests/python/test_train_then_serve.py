"""The Python-to-C++ path of README.md's stories: a BPE model trained by the
comparison script on a text file serves from its checkpoint folder with the
C++ CLI (tmm generate), which reads the tokenizer.json that training wrote
beside the weights, and gives the tokens Python gives."""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import tmm
import tmm.models
import tmm.tasks
import tmm.text
from tmm.train import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("TMM_CLI", REPO / "build" / "bin" / "tmm"))


def _cli():
    if not CLI.exists():
        if "TMM_CLI" in os.environ:
            pytest.fail(f"{CLI} was not built")
        pytest.skip(f"{CLI} not built (run scripts/test.sh)")
    return str(CLI)


def _corpus(path):
    rng = random.Random(0)
    words = "the quick brown fox jumps over lazy dog and cat runs far away in a green field near river".split()
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(12)) + "." for _ in range(600)) + "\n")
    return path


def test_a_bpe_model_trained_by_compare_generates_from_its_checkpoint_in_cpp(tmp_path):
    corpus = _corpus(tmp_path / "my_text.txt")
    out = tmp_path / "run"
    cmd = [sys.executable, str(REPO / "scripts" / "compare.py"), "--task", "lm", "--corpus", str(corpus),
           "--tokenizer", "bpe", "--task-option", "vocab=300", "--task-option", "seq_len=32",
           "--task-option", "section_bytes=1024", "--configs", "tmm-tiny", "--steps", "6", "--batch-size", "4",
           "--checkpoint-every", "3", "--out", str(out), "--no-plots", "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())  # a language model's verdict: bits per byte
    assert summary["verdict"].startswith("Held-out bits per byte, lowest first: tmm "), summary["verdict"]
    root = out / "checkpoints" / "tmm"
    step = root / (root / "latest").read_text().strip()
    assert step.name == "step-00000006"
    for folder in (root / "step-00000003", step):  # every step folder carries what serving needs
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    tok = tmm.text.Tokenizer.from_file(str(step / "tokenizer.json"))
    assert tok.kind == "bpe" and tok.vocab_size == 300

    model = tmm.models.load(step)
    prompt = "the quick brown"
    expected = tok.decode(model.generate(tok.encode(prompt), 12, temperature=0)["tokens"])
    for folder in (root, step):  # the training checkpoint folder stands for its newest step
        r = subprocess.run([_cli(), "generate", "--model", str(folder), "--prompt", prompt, "--max-new-tokens", "12",
                            "--greedy", "--quiet"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout == expected + "\n"


def test_a_byte_level_run_writes_no_tokenizer(tmp_path):
    corpus = _corpus(tmp_path / "my_text.txt")
    task = tmm.tasks.make("lm", corpus=str(corpus), seq_len=16, section_bytes=1024)
    model = tmm.models.build({"arch": "tmm", "vocab_size": 256, "d_model": 8, "n_layers": 1, "max_len": 16})
    train(model, task, TrainConfig(steps=1, batch_size=2, eval_batches=1, progress=False,
                                   checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1))
    step = tmp_path / "ckpt" / "step-00000001"
    assert (step / "model.safetensors").is_file() and not (step / "tokenizer.json").exists()
