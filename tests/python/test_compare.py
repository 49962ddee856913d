"""scripts/compare.py and tmm.train: a smoke run of the comparison on the tiny
configs (every output file exists and parses), and the training loop's
numerical guard."""
import json
import math
import os
from pathlib import Path

import pytest
import torch

import tmm.models
import tmm.tasks
from tmm.train import NonFiniteError, TrainConfig, flops_per_token, train

REPO = Path(__file__).resolve().parents[2]
TINY = ["tmm", "transformer", "hyena", "mamba2"]


@pytest.mark.timeout(120)
def test_smoke_run_writes_every_file(compare, tmp_path, restore_threads, capsys):
    configs = ",".join(f"models/{a}-tiny.json" for a in TINY)
    argv = ["--configs", configs, "--n", "4", "--steps", "4", "--batch-size", "2", "--eval-every", "2",
            "--eval-batches", "1", "--threads", "1", "--out", str(tmp_path), "--no-progress"]
    old_cwd = os.getcwd()
    os.chdir(REPO)  # the config paths are relative to the repository root
    try:
        assert compare.main(argv) == 0
    finally:
        os.chdir(old_cwd)

    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    for arch in TINY:
        mine = [r for r in rows if r["arch"] == arch]
        assert [r["step"] for r in mine] == [0, 2, 4], arch
        for r in mine:
            for key in ("tokens", "wall_s", "train_loss", "eval_loss", "eval_acc", "flops_est", "params"):
                assert key in r, (arch, key)
            assert math.isfinite(r["eval_loss"]) and 0.0 <= r["eval_acc"] <= 1.0
        assert mine[-1]["tokens"] == 4 * 2 * 8  # steps * batch * seq_len (2n)

    config = json.loads((tmp_path / "config.json").read_text())
    assert config["task"]["name"] == "copy" and config["task"]["seq_len"] == 8
    assert [m["label"] for m in config["models"]] == TINY
    for m in config["models"]:
        assert m["config"]["vocab_size"] == config["task"]["vocab_size"]
        assert m["config"]["max_len"] >= 8
        assert m["params"] == tmm.models.build(m["config"]).num_parameters()
    assert "revision" in config["git"] and "dirty" in config["git"]
    assert config["machine"]["torch"] == torch.__version__

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["arch"] for s in summary["runs"]] == TINY
    assert all(s["steps"] == 4 and s["status"] == "done" for s in summary["runs"])
    md = (tmp_path / "summary.md").read_text()
    assert "| arch | params |" in md and "**Verdict:**" in md
    for arch in TINY:
        assert f"| {arch} |" in md

    pytest.importorskip("matplotlib")
    for name in ("vs_steps.png", "vs_wall.png", "vs_flops.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]  # no temporaries left

    printed = capsys.readouterr().out
    assert "final acc" in printed and printed.rstrip().endswith(summary["verdict"])


def test_nonfinite_loss_stops_naming_the_step(restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    torch.manual_seed(0)
    cfg = json.loads((REPO / "models" / "tmm-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    model = tmm.models.build(cfg)
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="step 1") as info:
        train(model, task, TrainConfig(steps=3, batch_size=2, eval_every=1, eval_batches=1, progress=False))
    assert info.value.step == 1


def test_loss_decreases_and_rows_are_logged(restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    torch.manual_seed(0)
    cfg = json.loads((REPO / "models" / "transformer-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    model = tmm.models.build(cfg)
    rows = []
    res = train(model, task, TrainConfig(steps=30, batch_size=8, lr=3e-3, warmup=3, eval_every=10,
                                         eval_batches=2, progress=False), log=rows.append)
    assert [r["step"] for r in rows] == [0, 10, 20, 30] and res.rows == rows
    assert rows[-1]["eval_loss"] < rows[0]["eval_loss"]
    assert res.flops_est == pytest.approx(flops_per_token(model.config, model.num_parameters(), 8) * 30 * 8 * 8)
