"""A 20-step smoke run of the comparison (lab.experiments.compare) for every
architecture on every task (copy, mqar, lm, shards), on the tiny configs: every run
finishes with finite numbers, and the lm run logs bits per byte from its
held-out split. The ablation's variants build, run, and are compared under
their config names."""
import json
import math
from pathlib import Path

import pytest

import tmm.tasks
from lab.experiments import ablation, model_configs
from lab.experiments.compare import CompareSettings, run_comparison
from lab.experiments.errors import SettingsError

REPO = Path(__file__).resolve().parents[2]
TINY = ["tmm", "transformer", "hyena", "mamba2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_text("".join(f"And line {i} said unto line {i + 1}: follow me.\n" for i in range(500)))
    return path


@pytest.fixture(scope="module")
def shards(corpus, tmp_path_factory):
    from tmm.data import prepare_corpus

    out = tmp_path_factory.mktemp("shards")
    prepare_corpus(corpus, out, shard_bytes=8000, section_bytes=512, workers=1, progress=False, log=lambda _: None)
    return out


TASK_ARGS = {
    "copy": dict(n=8),
    "mqar": dict(num_kv_pairs=2, task_option=["seq_len=16", "vocab=32"]),
    "lm": dict(tokenizer="byte", task_option=["seq_len=16", "section_bytes=512"]),
    "shards": dict(task_option=["seq_len=16"]),
}


def test_every_task_is_offered():
    assert set(TASK_ARGS) == set(tmm.tasks.names())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("task", sorted(TASK_ARGS))
def test_twenty_steps_of_every_arch(task, corpus, request, tmp_path, restore_threads):
    configs = [str(REPO / "models" / f"{a}-tiny.json") for a in TINY]
    extra = dict(TASK_ARGS[task], **({"corpus": str(corpus)} if task == "lm" else {}))
    if task == "shards":  # the same corpus as token shards
        extra["task_option"] = extra["task_option"] + [f"path={request.getfixturevalue('shards')}"]
    settings = CompareSettings(task=task, **extra, configs=configs, steps=20, batch_size=2, eval_every=10,
                               eval_batches=1, threads=1, out=str(tmp_path), no_progress=True)
    assert run_comparison(settings).exit_code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["arch"] for s in summary["runs"]] == TINY
    assert all(s["status"] == "done" and s["steps"] == 20 for s in summary["runs"])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * len(TINY)  # steps 0, 10, 20
    for r in rows:
        assert math.isfinite(r["eval_loss"]) and 0.0 <= r["eval_acc"] <= 1.0
        if task in ("lm", "shards"):
            assert r["eval_bpb"] == pytest.approx(r["eval_loss"] / math.log(2))
        else:
            assert "eval_bpb" not in r
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["task"]["name"] == task
    if task == "lm":
        assert config["task"]["options"]["corpus"] == str(corpus) and config["task"]["vocab_size"] == 256


def test_lm_flags_belong_to_lm():
    with pytest.raises(SettingsError, match="--corpus applies"):
        CompareSettings(task="copy", corpus="x.txt").task_options()


@pytest.mark.parametrize("config", sorted(p.name for p in (REPO / "models" / "ablation").glob("*.json")))
def test_ablation_configs_build(config):
    """The TMM variants of the ablation (docs/experiments.md) build and run."""
    import torch

    import tmm.models

    model = tmm.models.build(str(REPO / "models" / "ablation" / config))
    assert model.config["arch"] == "tmm"
    assert model(torch.randint(0, 256, (1, 16))).shape == (1, 16, 256)


def test_ablation_variants(tmp_path, restore_threads):
    """--ablation (all) is the documented seven variants, in the docs' order;
    the variants are labelled by their config names."""
    assert model_configs.ablation_variants()[:7] == list(model_configs.ABLATION_VARIANTS)
    paths = model_configs.ablation_configs("all")
    assert [Path(p).name for p in paths] == [f"tmm-{v}.json" for v in model_configs.ABLATION_VARIANTS]
    assert CompareSettings(ablation="all").checked().configs == paths
    assert CompareSettings(ablation="flat,masked").checked().configs == [paths[1], paths[6]]
    with pytest.raises(SettingsError, match="no variant nope"):
        model_configs.ablation_configs("flat,nope")
    with pytest.raises(SettingsError, match="give one"):
        CompareSettings(ablation="flat", configs=["tmm-tiny"]).checked()
    result = ablation.run_ablation("flat,frozen", n=4, steps=1, batch_size=2, eval_every=1, eval_batches=1,
                                   threads=1, out=str(tmp_path), no_progress=True)
    assert [s["arch"] for s in result.summaries] == ["tmm-flat", "tmm-frozen"]
    assert all(s["status"] == "done" for s in result.summaries)
