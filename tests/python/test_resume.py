"""Training checkpoints and resume (tmm.train_checkpoints, tmm.train, and the
comparison driver's resume, scripts/compare.py --resume): an interrupted
run continued from its checkpoint is bitwise the uninterrupted one on the CPU."""
import json
from pathlib import Path

import pytest
import torch

import tmm.models
import tmm.tasks
from tmm import train_checkpoints
from lab.experiments import compare
from lab.experiments.compare import CompareSettings, run_comparison
from lab.experiments.errors import SettingsError
from tmm.train import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]
TINY = ["tmm", "transformer", "hyena", "mamba2"]


class Interrupt(Exception):
    pass


def tiny_model(arch, task):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def tcfg(**kw):
    base = dict(steps=12, batch_size=4, lr=3e-3, warmup=2, eval_every=2, eval_batches=1, progress=False)
    return TrainConfig(**{**base, **kw})


def interrupt_at(step):
    def log(row):
        if row["step"] == step:
            raise Interrupt(step)

    return log


def without_wall(rows):
    """The rows without their timings (wall-clock time, tokens/s, MFU)."""
    return [{k: v for k, v in r.items() if k not in ("wall_s", "tokens_per_s", "mfu")} for r in rows]


@pytest.mark.parametrize("arch", TINY)
def test_resume_is_bitwise_the_uninterrupted_run(arch, tmp_path, restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    straight_model = tiny_model(arch, task)
    straight = train(straight_model, task, tcfg())

    # Checkpoints at 6 and 12; killed (an exception) at step 8, after the one at 6.
    ckpt = tmp_path / "ckpt"
    model = tiny_model(arch, task)
    with pytest.raises(Interrupt):
        train(model, task, tcfg(checkpoint_dir=str(ckpt), checkpoint_every=6), log=interrupt_at(8))
    assert train_checkpoints.latest(ckpt).name == "step-00000006"

    model = tiny_model(arch, task)  # a fresh process would start from a fresh model
    torch.manual_seed(123)  # and other global RNG states: restored from the checkpoint
    resumed = train(model, task, tcfg(checkpoint_dir=str(ckpt), checkpoint_every=6, resume=True))
    assert resumed.resumed_from == 6 and resumed.steps == 12
    assert len(resumed.losses) == 12
    assert resumed.losses == straight.losses  # bitwise: Python floats from the same float32 values
    assert without_wall(resumed.rows) == without_wall(straight.rows)
    for (name, a), (_, b) in zip(straight_model.named_parameters(), model.named_parameters()):
        assert torch.equal(a, b), name


def test_checkpoint_folder_layout_and_pruning(tmp_path, restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    model = tiny_model("tmm", task)
    ckpt = tmp_path / "ckpt"
    res = train(model, task, tcfg(steps=5, checkpoint_dir=str(ckpt), checkpoint_every=1, checkpoint_keep=2))
    assert sorted(p.name for p in ckpt.iterdir()) == ["latest", "step-00000004", "step-00000005"]
    path = train_checkpoints.latest(ckpt)
    assert path.name == "step-00000005"
    assert sorted(p.name for p in path.iterdir()) == sorted(train_checkpoints._FILES)
    state = train_checkpoints.read_state(path)
    assert state["step"] == 5 and state["losses"] == res.losses and state["rows"] == res.rows
    # The model half is an ordinary checkpoint.
    same = tmm.models.load(path)
    for (name, a), (_, b) in zip(model.named_parameters(), same.named_parameters()):
        assert torch.equal(a, b), name
    # A finished run resumes to its result without training.
    again = train(tiny_model("tmm", task), task, tcfg(steps=5, checkpoint_dir=str(ckpt), resume=True))
    assert again.resumed_from == 5 and again.losses == res.losses and again.rows == res.rows


def test_resume_refuses_other_settings_or_model(tmp_path, restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    ckpt = tmp_path / "ckpt"
    train(tiny_model("tmm", task), task, tcfg(steps=2, checkpoint_dir=str(ckpt), checkpoint_every=1))
    with pytest.raises(train_checkpoints.CheckpointError, match=r"lr: checkpoint 0\.003, this run 0\.001"):
        train(tiny_model("tmm", task), task, tcfg(steps=2, lr=1e-3, checkpoint_dir=str(ckpt), resume=True))
    with pytest.raises(train_checkpoints.CheckpointError, match="arch: checkpoint 'tmm', model 'transformer'"):
        train(tiny_model("transformer", task), task, tcfg(steps=2, checkpoint_dir=str(ckpt), resume=True))
    (ckpt / "latest").write_text("step-00000099\n")
    with pytest.raises(train_checkpoints.CheckpointError, match="step-00000099, which lacks config.json"):
        train_checkpoints.latest(ckpt)
    with pytest.raises(ValueError, match="checkpoint_every=1 needs checkpoint_dir"):
        train(tiny_model("tmm", task), task, tcfg(steps=2, checkpoint_every=1))


def settings(out, **extra):
    configs = [str(REPO / "models" / f"{a}-tiny.json") for a in ("tmm", "transformer")]
    return CompareSettings(**{**dict(configs=configs, n=4, steps=10, batch_size=2, lr=1e-3, eval_every=2,
                                     eval_batches=1, threads=1, out=str(out), no_progress=True), **extra})


def metrics(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.timeout(120)
def test_compare_resume_continues_the_same_folder(tmp_path, restore_threads, monkeypatch):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert run_comparison(settings(whole)).exit_code == 0

    # The transformer is interrupted (Ctrl-C) at step 6, after its checkpoint at 4
    # and after metrics.jsonl got its row of step 6.
    real_train = compare.train

    def interrupted_train(model, task, cfg, log=None):
        def log2(row):
            log(row)
            if cfg.desc.startswith("transformer") and row["step"] == 6:
                raise KeyboardInterrupt

        return real_train(model, task, cfg, log2)

    monkeypatch.setattr(compare, "train", interrupted_train)
    assert run_comparison(settings(broken, checkpoint_every=4)).exit_code == 130
    monkeypatch.setattr(compare, "train", real_train)
    assert [(r["arch"], r["step"]) for r in metrics(broken)][-2:] == [("transformer", 4), ("transformer", 6)]
    assert json.loads((broken / "summary.json").read_text())["runs"][1]["status"] == "interrupted"

    with pytest.raises(SettingsError, match=r"--lr: the run had 0\.001, this command 0\.002"):
        run_comparison(settings(broken, resume=True, lr=2e-3))
    assert run_comparison(settings(broken, resume=True, checkpoint_every=4)).exit_code == 0

    assert without_wall(metrics(broken)) == without_wall(metrics(whole))  # every row once, same numbers
    summary = json.loads((broken / "summary.json").read_text())
    assert [s["status"] for s in summary["runs"]] == ["done", "done"]
    config = json.loads((broken / "config.json").read_text())
    assert len(config["resumed"]) == 1 and "finished" in config
    ckpt = train_checkpoints.latest(broken / "checkpoints" / "transformer")
    assert ckpt.name == "step-00000010"
    final = tmm.models.load(ckpt)
    torch.manual_seed(0)  # the whole run's transformer, retrained to compare parameters
    task = tmm.tasks.make("copy", n=4)
    ref = tiny_model("transformer", task)
    res = train(ref, task, TrainConfig(steps=10, batch_size=2, warmup=1, eval_every=2, eval_batches=1,
                                       threads=1, progress=False))
    assert res.rows[-1]["eval_loss"] == metrics(whole)[-1]["eval_loss"]
    for (name, a), (_, b) in zip(ref.named_parameters(), final.named_parameters()):
        assert torch.equal(a, b), name
