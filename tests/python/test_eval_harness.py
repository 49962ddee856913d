"""The lm-eval adapter (tmm.eval.harness), offline: local
tasks written here (a JSONL multiple-choice set and a generation set, read
by the harness's `json` data set loader through a TaskManager include path).

- The adapter's loglikelihoods (batched, right-padded, sorted by length,
  contexts cut on the left) equal each zoo model's own forward on each
  request alone, and is_greedy its argmax; rolling loglikelihoods too.
- A TMM trained briefly (tmm.train on a corpus of the tasks' pattern) beats
  chance on the multiple-choice task through lm_eval.simple_evaluate(model="tmm",
  model_args="pretrained=DIR"), and generates the answers (generate_until
  through the C++ decoder).
- `python -m tmm.eval` is the harness's CLI with `tmm` registered, and
  scripts/evaluate.py writes its table.
"""
import json
import os
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # nothing is downloaded: the tasks are local files
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tmm.models  # noqa: E402
import tmm.tasks  # noqa: E402
from tmm.train import TrainConfig, train  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("tmm", "transformer", "hyena", "mamba2")
LETTERS = string.ascii_lowercase
CHANCE = 0.25  # one right answer among 4 choices


def byte_model(arch, max_len=64, seed=0, vocab_size=256):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=vocab_size, max_len=max_len)
    torch.manual_seed(seed)
    return tmm.models.build(cfg)


def write_tasks(folder: Path):
    """Two local tasks: tmm_local_mc (which capital letter goes with "q =", 4 choices) and tmm_local_gen
    (the same question, the answer generated until a newline, exact match)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    docs = []
    for q in LETTERS:
        wrong = rng.sample([c for c in LETTERS if c != q], 3)
        choices = [c.upper() for c in wrong]
        gold = rng.randrange(4)
        choices.insert(gold, q.upper())
        docs.append({"q": q, "a": q.upper(), "choices": choices, "gold": gold})
    data = folder / "letters.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "tmm_local_mc.yaml").write_text(f"""task: tmm_local_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{q}}}} ="
doc_to_choice: "{{{{choices}}}}"
doc_to_target: gold
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
""")
    (folder / "tmm_local_gen.yaml").write_text(f"""task: tmm_local_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{q}}}} = "
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 4
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
""")
    return docs


def local_tasks(folder):
    """A TaskManager of the local tasks only (indexing the harness's own thousands of task files takes ~20 s)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(folder), include_defaults=False)


@pytest.fixture(scope="module")
def harness():
    import tmm.eval.harness as h

    return h


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm_eval_tasks")
    write_tasks(folder)
    return folder


def _requests(kind, args_list):
    from lm_eval.api.instance import Instance

    return [Instance(request_type=kind, doc={}, arguments=args, idx=i) for i, args in enumerate(args_list)]


def _own_loglikelihood(model, ids, n_cont, max_len):
    """The model's forward on this one request, unpadded: (sum of log p of the last n_cont tokens, greedy)."""
    whole = ids[-(max_len + 1):]
    with torch.no_grad():
        logits = model(torch.tensor([whole[:-1]]))[0].double()
    logp = torch.log_softmax(logits[len(whole) - 1 - n_cont:], -1)
    target = torch.tensor(whole[-n_cont:])
    return float(logp.gather(-1, target[:, None]).sum()), bool((logp.argmax(-1) == target).all())


@pytest.mark.parametrize("arch", ARCHS)
def test_loglikelihoods_are_the_models_forward(arch, harness, restore_threads):
    torch.set_num_threads(1)
    model = byte_model(arch).eval()
    lm = harness.TMMLM(pretrained=model, tokenizer="byte", batch_size=3, device="cpu")
    rng = random.Random(1)
    pairs = [("In the beginning", " God created"), ("a", "b"), ("x" * 90, " longer than the context"),
             ("", "no context at all"), ("Trailing space ", "moves"), ("The end.", "\n\n")]
    pairs += [("".join(rng.choice(LETTERS + " ") for _ in range(rng.randrange(1, 70))), " " + rng.choice(LETTERS))
              for _ in range(8)]
    got = lm.loglikelihood(_requests("loglikelihood", pairs), disable_tqdm=True)
    worst = 0.0
    for (ctx, cont), (score, greedy) in zip(pairs, got):
        if ctx:
            ctx_ids, cont_ids = lm._encode_pair(ctx, cont)
        else:
            ctx_ids, cont_ids = [lm.prefix_token_id], lm.tok_encode(cont)
        expected, exp_greedy = _own_loglikelihood(model, ctx_ids + cont_ids, len(cont_ids), 64)
        worst = max(worst, abs(score - expected))
        assert greedy == exp_greedy, (ctx, cont)
    print(f"{arch}: adapter vs own forward, max |diff| {worst:.2e} nats over {len(pairs)} requests")
    assert worst <= 1e-4 * len(pairs)  # float32 logits, summed; batching and padding change only the rounding

    strings = ["A short document.", "y" * 150]  # the second spans three rolling windows of 64
    rolling = lm.loglikelihood_rolling(_requests("loglikelihood_rolling", [(s,) for s in strings]), disable_tqdm=True)
    ids = [lm.prefix_token_id] + lm.tok_encode(strings[0])
    assert rolling[0] == pytest.approx(_own_loglikelihood(model, ids, len(ids) - 1, 64)[0], abs=1e-4)
    # every token predicted once, each window with as much context as fits
    ids = [lm.prefix_token_id] + lm.tok_encode(strings[1])
    expected, done = 0.0, 0
    while done < len(ids) - 1:
        end = min(done + 64, len(ids) - 1)
        window = ids[max(0, end - 64):end + 1]
        expected += _own_loglikelihood(model, window, end - done, 64)[0]
        done = end
    assert rolling[1] == pytest.approx(expected, abs=1e-3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny TMM trained on lines "q = Q" (a letter and its capital), saved as a checkpoint folder."""
    folder = tmp_path_factory.mktemp("trained")
    rng = random.Random(2)
    (folder / "corpus.txt").write_text("".join(f"{q} = {q.upper()}\n" for q in (rng.choice(LETTERS)
                                                                               for _ in range(6000))))
    torch.set_num_threads(1)
    task = tmm.tasks.make("lm", corpus=str(folder / "corpus.txt"), tokenizer="byte", seq_len=48, section_bytes=1024)
    model = byte_model("tmm")
    result = train(model, task, TrainConfig(steps=250, batch_size=16, lr=1e-2, warmup=20, eval_every=250,
                                            eval_batches=1, progress=False))
    model.save(folder / "ckpt")
    return folder / "ckpt", result


def test_trained_model_beats_chance_through_simple_evaluate(trained, tasks_dir, harness, restore_threads):
    import lm_eval

    ckpt, result = trained
    torch.set_num_threads(1)
    out = lm_eval.simple_evaluate(model="tmm", model_args=f"pretrained={ckpt},batch_size=8", device="cpu",
                                  tasks=["tmm_local_mc", "tmm_local_gen"], task_manager=local_tasks(tasks_dir),
                                  log_samples=True)
    acc = out["results"]["tmm_local_mc"]["acc,none"]
    em = out["results"]["tmm_local_gen"]["exact_match,none"]
    print(f"trained {result.steps} steps (final eval loss {result.final['eval_loss']:.3f}): multiple choice acc "
          f"{acc:.3f} (chance {CHANCE}), generation exact match {em:.3f}")
    assert acc >= CHANCE + 0.5  # chance is 0.25 over 26 questions
    assert em >= 0.5
    untrained = harness.TMMLM(pretrained=byte_model("tmm"), tokenizer="byte", device="cpu")
    base = lm_eval.simple_evaluate(model=untrained, tasks=["tmm_local_mc"],
                                   task_manager=local_tasks(tasks_dir))
    assert base["results"]["tmm_local_mc"]["acc,none"] < acc


def test_pretrained_folders_and_tokenizers(trained, tmp_path, harness):
    ckpt, _ = trained
    lm = harness.TMMLM(pretrained=str(ckpt), device="cpu")  # vocab 256, no tokenizer.json: bytes
    assert lm.tok.kind == "byte" and lm.max_length == 64 and lm.eot_token_id == ord("\n")
    # a training checkpoint folder: its newest step
    model = tmm.models.load(ckpt)
    task = tmm.tasks.make("copy", n=4)
    train(model, task, TrainConfig(steps=2, batch_size=2, eval_every=2, eval_batches=1, progress=False,
                                   checkpoint_dir=str(tmp_path / "run"), checkpoint_every=1))
    lm2 = harness.TMMLM(pretrained=str(tmp_path / "run"), device="cpu")
    assert lm2.pretrained.endswith("step-00000002")
    # a BPE beside the weights is the tokenizer
    big = byte_model("tmm", vocab_size=260)
    big.save(tmp_path / "bpe")
    tmm.text.train_bpe(iter(["In the beginning God created the heaven and the earth."] * 20), 260,
                       tmp_path / "bpe" / "tokenizer.json")
    lm3 = harness.TMMLM(pretrained=str(tmp_path / "bpe"), device="cpu")
    assert lm3.tok.kind == "bpe" and lm3.eot_token_id == lm3.tok.token_to_id("<|endoftext|>")
    with pytest.raises(TypeError, match="unknown model_args nonsense"):
        harness.TMMLM(pretrained=str(ckpt), nonsense=1)
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        harness.TMMLM(pretrained=str(tmp_path))


def test_cli_and_evaluate_script(trained, tasks_dir, tmp_path, capsys, monkeypatch, restore_threads):
    """python -m tmm.eval is lm-eval's CLI (its flags, its output files) with "tmm" registered; run here in
    process with the harness's TaskManager indexing the include path only (as scripts/evaluate.py
    --only-include-path does), since indexing its built-in tasks takes ~20 s."""
    import lm_eval.tasks

    from lab.cli import evaluate as evaluate_script
    from tmm.eval.__main__ import main as cli

    ckpt, _ = trained
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "tmm.eval", "run", "--help"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    for flag in ("--model", "--model_args", "--tasks", "--include_path", "--batch_size", "--output_path", "--limit"):
        assert flag in r.stdout, flag

    class LocalOnly(lm_eval.tasks.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "include_defaults": False})

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", LocalOnly)
    monkeypatch.setattr(sys, "argv", ["tmm.eval"])
    torch.set_num_threads(1)
    cli(["--model", "tmm", "--model_args", f"pretrained={ckpt}", "--tasks", "tmm_local_mc",
         "--include_path", str(tasks_dir), "--limit", "8", "--device", "cpu", "--output_path", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert "tmm_local_mc" in out and "acc" in out, out
    written = list((tmp_path / "cli").rglob("results_*.json"))
    assert written, list((tmp_path / "cli").rglob("*"))
    assert json.loads(written[0].read_text())["results"]["tmm_local_mc"]["acc,none"] >= 0.75

    evaluate_script.main([str(ckpt), "--tasks", "tmm_local_mc,tmm_local_gen", "--include-path", str(tasks_dir),
                          "--only-include-path", "--device", "cpu", "--out", str(tmp_path / "table")])
    table = (tmp_path / "table" / "results.md").read_text()
    summary = json.loads((tmp_path / "table" / "results.json").read_text())
    assert "| tmm_local_mc | acc | none |" in table and "| tmm_local_gen | exact_match |" in table, table
    metrics = {(r["task"], r["metric"]) for r in summary["rows"]}
    assert {("tmm_local_mc", "acc"), ("tmm_local_gen", "exact_match")} <= metrics
    assert summary["tasks"] == ["tmm_local_mc", "tmm_local_gen"]


def test_local_verse_tasks_run_through_the_harness(trained, tmp_path, restore_threads):
    """tmm.eval.local_tasks (the end-to-end run's tasks): every output type, rolling loglikelihood included."""
    import lm_eval

    from tmm.eval.local_tasks import VERSE_TASKS, write_verse_tasks

    ckpt, _ = trained
    rng = random.Random(3)
    text = "".join(" ".join(rng.choice(["the", "lord", "said", "unto", "him", "and", "go"]) for _ in range(10)) + "\n"
                   for _ in range(9000))  # 25 sections of 16 KiB: one held out
    folder = write_verse_tasks(tmp_path / "tasks", text, n=12)
    docs = [json.loads(line) for line in (folder / "verses.jsonl").read_text().splitlines()]
    assert len(docs) == 12 and all(d["choices"][d["gold"]] in d["line"] for d in docs)
    torch.set_num_threads(1)
    out = lm_eval.simple_evaluate(model="tmm", model_args=f"pretrained={ckpt}", device="cpu", tasks=list(VERSE_TASKS),
                                  task_manager=local_tasks(folder), limit=4)
    res = out["results"]
    assert 0.0 <= res["verse_choice"]["acc,none"] <= 1.0 and "exact_match,first_word" in res["verse_next_word"]
    assert res["verse_ppl"]["bits_per_byte,none"] > 0
