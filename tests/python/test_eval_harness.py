"""The lm-eval adapter (tmm.eval.harness), offline: local
tasks written here (a JSONL multiple-choice set and a generation set, read
by the harness's `json` data set loader through a TaskManager include path).

- The adapter's loglikelihoods (batched, right-padded, sorted by length,
  contexts cut on the left, float32) equal, within the float32 row of the
  tolerance table, those of an independent float64 forward on each request
  alone, its tokens the request's bytes encoded here: the formulas of
  test_models_tmm_fidelity and test_models_hyena_reference, transformers'
  Llama and Mamba2 (the model saved by tmm.hf.save_pretrained); is_greedy
  its argmax; rolling loglikelihoods too.
- A TMM trained briefly (tmm.train on a corpus of the tasks' pattern) beats
  chance on the multiple-choice task through lm_eval.simple_evaluate(model="tmm",
  model_args="pretrained=DIR"), and generates the answers (generate_until
  through the C++ decoder); one trained on verses beats chance on the verse
  tasks (tmm.eval.local_tasks).
- Data parallel: two gloo ranks, each evaluating its part of the requests,
  give rank 0 the results of one process.
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
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # nothing is downloaded: the tasks are local files
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tmm.hf  # noqa: E402
import tmm.models  # noqa: E402
import tmm.tasks  # noqa: E402
from tmm.testing import rel_err, tolerance  # noqa: E402
from tmm.train import TrainConfig, train  # noqa: E402

import test_models_hyena_reference as hyena_formulas  # noqa: E402
import test_models_tmm_fidelity as tmm_formulas  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("tmm", "transformer", "hyena", "mamba2")
LETTERS = string.ascii_lowercase
CHANCE = 0.25  # one right answer among 4 choices


EOT = ord("\n")  # the byte tokenizer has no <|endoftext|>: the newline is the end-of-text (and prefix) token


def byte_config(arch, max_len=64, vocab_size=256):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=vocab_size, max_len=max_len)
    return cfg


def byte_model(arch, max_len=64, seed=0, vocab_size=256):
    torch.manual_seed(seed)
    return tmm.models.build(byte_config(arch, max_len, vocab_size))


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


def encode_pair(context, continuation):
    """The request's ids, from its bytes, by lm-eval's rule: trailing whitespace of the context moves to the
    continuation; an empty context is the end-of-text token."""
    if not context:
        return [EOT], list(continuation.encode())
    moved = len(context) - len(context.rstrip())
    if moved:
        context, continuation = context[:-moved], context[-moved:] + continuation
    return list(context.encode()), list(continuation.encode())


def independent_forward(arch, model, tmp_path):
    """ids (a list) -> float64 logits (1 x T x V) of `model`'s weights, computed by code other than tmm's
    zoo: the formulas written in the tests for TMM and Hyena, transformers' for the Transformer (Llama) and
    Mamba2."""
    cfg = byte_config(arch)
    state = {k: v.detach().double() for k, v in model.state_dict().items()}
    if arch in ("tmm", "hyena"):
        formulas = tmm_formulas if arch == "tmm" else hyena_formulas
        return lambda ids: formulas.reference_logits({**formulas.AUTHORS, **cfg}, state, torch.tensor([ids]))
    import transformers

    tmm.hf.save_pretrained(model, tmp_path / arch)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / arch, dtype=torch.float64).eval()
    return lambda ids: hf(input_ids=torch.tensor([ids])).logits


def expected_loglikelihood(forward, ids, n_cont, max_len):
    """(sum of log p of the last n_cont of `ids` under `forward`, whether each is the argmax), the context cut
    on the left to max_len + 1 tokens in all."""
    whole = ids[-(max_len + 1):]
    with torch.no_grad():
        logits = forward(whole[:-1])[0].double()
    logp = torch.log_softmax(logits[len(whole) - 1 - n_cont:], -1)
    target = torch.tensor(whole[-n_cont:])
    return float(logp.gather(-1, target[:, None]).sum()), bool((logp.argmax(-1) == target).all())


@pytest.mark.parametrize("arch", ARCHS)
def test_loglikelihoods_match_an_independent_forward(arch, harness, tmp_path, restore_threads):
    torch.set_num_threads(1)
    model = byte_model(arch).eval()
    forward = independent_forward(arch, model, tmp_path)
    lm = harness.TMMLM(pretrained=model, tokenizer="byte", batch_size=3, device="cpu")
    assert lm.prefix_token_id == EOT
    rng = random.Random(1)
    pairs = [("In the beginning", " God created"), ("a", "b"), ("x" * 90, " longer than the context"),
             ("", "no context at all"), ("Trailing space ", "moves"), ("The end.", "\n\n")]
    pairs += [("".join(rng.choice(LETTERS + " ") for _ in range(rng.randrange(1, 70))), " " + rng.choice(LETTERS))
              for _ in range(8)]
    got = lm.loglikelihood(_requests("loglikelihood", pairs), disable_tqdm=True)
    worst = 0.0
    for (ctx, cont), (score, greedy) in zip(pairs, got):
        ctx_ids, cont_ids = encode_pair(ctx, cont)
        expected, exp_greedy = expected_loglikelihood(forward, ctx_ids + cont_ids, len(cont_ids), 64)
        err = rel_err(torch.tensor(score), torch.tensor(expected))
        worst = max(worst, err)
        assert err <= tolerance(torch.float32), f"{(ctx, cont)}: {score} against {expected} (rel err {err:.1e})"
        assert greedy == exp_greedy, (ctx, cont)
    print(f"{arch}: adapter (float32) vs an independent float64 forward, worst rel err {worst:.1e} over "
          f"{len(pairs)} requests")

    strings = ["A short document.", "y" * 150]  # the second spans three rolling windows of 64
    rolling = lm.loglikelihood_rolling(_requests("loglikelihood_rolling", [(s,) for s in strings]), disable_tqdm=True)
    ids = [EOT] + list(strings[0].encode())
    expected = expected_loglikelihood(forward, ids, len(ids) - 1, 64)[0]
    assert rel_err(torch.tensor(rolling[0]), torch.tensor(expected)) <= tolerance(torch.float32)
    # every token predicted once, each window with as much context as fits
    ids = [EOT] + list(strings[1].encode())
    expected, done = 0.0, 0
    while done < len(ids) - 1:
        end = min(done + 64, len(ids) - 1)
        window = ids[max(0, end - 64):end + 1]
        expected += expected_loglikelihood(forward, window, end - done, 64)[0]
        done = end
    assert rel_err(torch.tensor(rolling[1]), torch.tensor(expected)) <= tolerance(torch.float32)


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


VERSE_WORDS = ("the", "lord", "said", "unto", "him", "and", "go", "thou", "shalt", "not", "in", "his", "house",
               "of", "my", "people")


@pytest.fixture(scope="module")
def verses(tmp_path_factory):
    """A corpus of 12 verses of 10 words, each repeated in random order (25 held-out-split sections of 16 KiB),
    and a tiny TMM trained on it (tmm.train's lm task), saved as a checkpoint folder."""
    folder = tmp_path_factory.mktemp("verses")
    rng = random.Random(3)
    templates = [" ".join(rng.choice(VERSE_WORDS) for _ in range(10)) for _ in range(12)]
    text = "".join(rng.choice(templates) + "\n" for _ in range(8000))
    (folder / "corpus.txt").write_text(text)
    torch.set_num_threads(1)
    task = tmm.tasks.make("lm", corpus=str(folder / "corpus.txt"), tokenizer="byte", seq_len=64, section_bytes=1024)
    model = byte_model("tmm")
    result = train(model, task, TrainConfig(steps=300, batch_size=16, lr=1e-2, warmup=20, eval_every=300,
                                            eval_batches=1, progress=False))
    model.save(folder / "ckpt")
    return folder / "ckpt", text, result


def test_local_verse_tasks_run_through_the_harness(verses, tmp_path, harness, restore_threads):
    """tmm.eval.local_tasks (the end-to-end run's tasks): every output type, rolling loglikelihood included; a
    model trained on the verses beats chance (and an untrained one) on each."""
    import lm_eval

    from tmm.eval.local_tasks import VERSE_TASKS, write_verse_tasks

    ckpt, text, result = verses
    folder = write_verse_tasks(tmp_path / "tasks", text, n=16)
    docs = [json.loads(line) for line in (folder / "verses.jsonl").read_text().splitlines()]
    assert len(docs) == 16 and all(d["choices"][d["gold"]] in d["line"] for d in docs)
    torch.set_num_threads(1)
    res = lm_eval.simple_evaluate(model="tmm", model_args=f"pretrained={ckpt}", device="cpu", tasks=list(VERSE_TASKS),
                                  task_manager=local_tasks(folder))["results"]
    untrained = harness.TMMLM(pretrained=byte_model("tmm"), tokenizer="byte", device="cpu")
    base = lm_eval.simple_evaluate(model=untrained, tasks=list(VERSE_TASKS), task_manager=local_tasks(folder))["results"]
    acc, em, bpb = (res["verse_choice"]["acc,none"], res["verse_next_word"]["exact_match,first_word"],
                    res["verse_ppl"]["bits_per_byte,none"])
    print(f"verses, trained {result.steps} steps (eval loss {result.final['eval_loss']:.3f}): choice acc {acc:.3f} "
          f"(chance {CHANCE}, untrained {base['verse_choice']['acc,none']:.3f}), next word exact match {em:.3f} "
          f"(untrained {base['verse_next_word']['exact_match,first_word']:.3f}), bits per byte {bpb:.3f} "
          f"(untrained {base['verse_ppl']['bits_per_byte,none']:.3f})")
    assert acc >= CHANCE + 0.5 and acc > base["verse_choice"]["acc,none"]
    assert em >= 0.5 and em > base["verse_next_word"]["exact_match,first_word"]
    assert bpb < 0.5 * base["verse_ppl"]["bits_per_byte,none"]  # untrained: about 8 bits per byte


# ---------------------------------------------------------------- data parallel


def _evaluate(ckpt, tasks_dir, verse_dir, counts):
    """simple_evaluate of the letter and verse tasks with samples; `counts` gets the requests each method saw."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    import tmm.eval.harness as h

    class Counting(h.TMMLM):
        def loglikelihood(self, requests, disable_tqdm=False):
            counts["loglikelihood"] = counts.get("loglikelihood", 0) + len(requests)
            return super().loglikelihood(requests, disable_tqdm=True)

        def loglikelihood_rolling(self, requests, disable_tqdm=False):
            counts["loglikelihood_rolling"] = counts.get("loglikelihood_rolling", 0) + len(requests)
            return super().loglikelihood_rolling(requests, disable_tqdm=True)

        def generate_until(self, requests, disable_tqdm=False):
            counts["generate_until"] = counts.get("generate_until", 0) + len(requests)
            return super().generate_until(requests, disable_tqdm=True)

    from tmm.eval.local_tasks import VERSE_TASKS

    manager = TaskManager(include_path=[str(tasks_dir), str(verse_dir)], include_defaults=False)
    return lm_eval.simple_evaluate(model=Counting(pretrained=str(ckpt), device="cpu", batch_size=4),
                                   tasks=["tmm_local_mc", "tmm_local_gen", *VERSE_TASKS], task_manager=manager,
                                   log_samples=True)


def _rank_worker(rank, world, rendezvous, ckpt, tasks_dir, verse_dir, out):
    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        counts = {}
        results = _evaluate(ckpt, tasks_dir, verse_dir, counts)
        assert (results is None) == (rank != 0)  # rank 0 alone gets the results
        torch.save({"counts": counts, "results": results and {k: results[k] for k in ("results", "samples")}},
                   os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _by_doc(samples):
    return {(s["doc_id"], s["filter"]): s for s in samples}


@pytest.mark.timeout(240)
def test_two_ranks_evaluate_their_parts_and_rank_0_has_one_processs_results(trained, verses, tasks_dir, tmp_path,
                                                                             restore_threads):
    from tmm.eval.local_tasks import write_verse_tasks

    ckpt, _ = trained
    verse_dir = write_verse_tasks(tmp_path / "verse_tasks", verses[1], n=16)
    torch.set_num_threads(1)
    counts = {}
    one = _evaluate(ckpt, tasks_dir, verse_dir, counts)
    mp.spawn(_rank_worker, args=(2, str(tmp_path / "rendezvous"), ckpt, tasks_dir, verse_dir, str(tmp_path)),
             nprocs=2)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    # Each rank scored its half of the documents (the harness pads the shorter rank with a repeated request).
    for method, total in counts.items():
        parts = [r["counts"].get(method, 0) for r in ranks]
        assert all(total // 2 <= p <= total // 2 + 4 for p in parts), (method, total, parts)
    two = ranks[0]["results"]
    print("one process:", {t: {k: v for k, v in m.items() if "stderr" not in k} for t, m in one["results"].items()})
    assert set(two["results"]) == set(one["results"])
    for task, metrics in one["results"].items():  # float32 scores, batched differently on each rank
        for key, value in metrics.items():
            if isinstance(value, float):
                assert two["results"][task][key] == pytest.approx(value, rel=tolerance(torch.float32)), (task, key)
            else:
                assert two["results"][task][key] == value, (task, key)
    # Every document's responses, gathered on rank 0, are the one process's.
    for task, samples in one["samples"].items():
        mine, theirs = _by_doc(samples), _by_doc(two["samples"][task])
        assert set(mine) == set(theirs), task
        for key, s in mine.items():
            for a, b in zip(s["filtered_resps"], theirs[key]["filtered_resps"]):
                if isinstance(a, str):
                    assert a == b, (task, key)
                else:
                    assert rel_err(torch.tensor(a, dtype=torch.float64).flatten(),
                                   torch.tensor(b, dtype=torch.float64).flatten()) <= tolerance(torch.float32)
