"""The comparison driver (lab.experiments.compare) and tmm.train: a smoke run
on the tiny configs (every output file exists and parses), the main job's
defaults (--archs picks the cpu-small configs, --time-budget-min sizes and
caps the runs), the training loop's numerical guard, and scripts/compare.py
run as a command line."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tmm.models
import tmm.tasks
from lab.experiments import budget
from lab.experiments.compare import ARCH_LRS, DEFAULT_ARCHS, CompareSettings, run_comparison
from lab.experiments.errors import SettingsError
from tmm.train import NonFiniteError, TrainConfig, flops_per_token, train

REPO = Path(__file__).resolve().parents[2]
TINY = ["tmm", "transformer", "hyena", "mamba2"]


def tiny_settings(out, **kw):
    base = dict(configs=[str(REPO / "models" / f"{a}-tiny.json") for a in TINY], n=4, steps=4, batch_size=2,
                eval_every=2, eval_batches=1, threads=1, out=str(out), no_progress=True)
    return CompareSettings(**{**base, **kw})


@pytest.mark.timeout(120)
def test_smoke_run_writes_every_file(tmp_path, restore_threads):
    result = run_comparison(tiny_settings(tmp_path))
    assert result.exit_code == 0 and result.out == tmp_path

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
    assert config["time_budget_s"] is None  # --steps given: no budget

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["arch"] for s in summary["runs"]] == TINY == [s["arch"] for s in result.summaries]
    assert all(s["steps"] == 4 and s["status"] == "done" for s in summary["runs"])
    assert all(s["peak_mem_mib"] is not None and s["peak_mem_mib"] >= 0 for s in summary["runs"])  # measured
    assert summary["verdict"] == result.verdict
    md = (tmp_path / "summary.md").read_text()
    assert "| arch | params |" in md and "**Verdict:**" in md and "peak mem MiB" in md
    for arch in TINY:
        assert f"| {arch} |" in md
    assert "final acc" in result.table.splitlines()[0]

    pytest.importorskip("matplotlib")
    for name in ("vs_steps.png", "vs_wall.png", "vs_flops.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]  # no temporaries left


@pytest.mark.timeout(120)
def test_peak_memory_reports_at_least_the_logits(tmp_path, restore_threads):
    """Each run's float32 logits (batch x sequence x vocabulary) are live in
    its training step, so its reported peak is at least their size: the
    second run too, which reuses heap pages the first one freed."""
    batch, n, vocab = 32, 64, 4096
    logits_mib = batch * 2 * n * vocab * 4 / 2**20  # 64 MiB
    settings = tiny_settings(tmp_path, configs=[str(REPO / "models" / f"{a}-tiny.json") for a in ("tmm", "hyena")],
                             n=n, task_option=[f"vocab={vocab}"], steps=1, batch_size=batch, eval_every=1,
                             no_plots=True)
    run_comparison(settings)
    summary = json.loads((tmp_path / "summary.json").read_text())
    peaks = {s["arch"]: s["peak_mem_mib"] for s in summary["runs"]}
    print(f"peak memory increase (MiB) with {logits_mib:.0f} MiB of logits: {peaks}")
    assert len(peaks) == 2 and all(p is not None and p >= logits_mib for p in peaks.values()), peaks


def test_default_archs_are_the_cpu_small_configs(tmp_path, restore_threads):
    """The main job (scripts/run.sh: no arguments) compares the four
    <arch>-cpu-small configs; --archs picks a subset, in its order."""
    assert CompareSettings().archs == DEFAULT_ARCHS == "tmm,transformer,hyena,mamba2"
    result = run_comparison(CompareSettings(archs="hyena,tmm", n=4, steps=1, batch_size=2, eval_every=1,
                                            eval_batches=1, threads=1, out=str(tmp_path), no_progress=True))
    config = json.loads((tmp_path / "config.json").read_text())
    assert [(m["label"], m["config_name"]) for m in config["models"]] == [("hyena", "hyena-cpu-small"),
                                                                           ("tmm", "tmm-cpu-small")]
    for m in config["models"]:
        cpu_small = json.loads((REPO / "models" / f"{m['config_name']}.json").read_text())
        assert m["config"]["d_model"] == cpu_small["d_model"] and m["config"]["n_layers"] == cpu_small["n_layers"]
        assert m["config"]["max_len"] == 8  # the task's length (--max-len task)
    assert [s["arch"] for s in result.summaries] == ["hyena", "tmm"]
    with pytest.raises(SettingsError, match="no architectures"):
        run_comparison(CompareSettings(archs=" , ", steps=1, out=str(tmp_path / "x")))


def test_each_architecture_trains_at_its_own_learning_rate(tmp_path, restore_threads):
    """Without --lr each model gets its architecture's rate (ARCH_LRS); --lr
    sets every model's; --lrs single models' by label, over --lr."""
    configs = [str(REPO / "models" / f"{a}-tiny.json") for a in ("tmm", "transformer")]

    def lrs(**kw):
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        result = run_comparison(tiny_settings(out, configs=configs, steps=2, eval_every=2, **kw))
        config = json.loads((out / "config.json").read_text())
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        scheduled = {r["arch"]: r["lr"] for r in rows if r["step"] == 2}  # the trainer's, after its schedule
        assert scheduled["tmm"] / scheduled["transformer"] == pytest.approx(
            result.summaries[0]["lr"] / result.summaries[1]["lr"])
        assert "| lr |" in (out / "summary.md").read_text()
        return {m["label"]: m["lr"] for m in config["models"]}

    assert lrs() == {"tmm": ARCH_LRS["tmm"], "transformer": ARCH_LRS["transformer"]} == {"tmm": 1e-2,
                                                                                          "transformer": 3e-3}
    assert lrs(lr=2e-3) == {"tmm": 2e-3, "transformer": 2e-3}
    assert lrs(lr=2e-3, lrs="tmm=5e-2") == {"tmm": 5e-2, "transformer": 2e-3}
    with pytest.raises(SettingsError, match="--lrs: no model labelled hyena"):
        run_comparison(tiny_settings(tmp_path / "bad", configs=configs, lrs="hyena=1e-3"))
    for bad in ("tmm", "tmm=fast", "tmm=-1", "=1e-3"):
        with pytest.raises(SettingsError, match="--lrs: expected LABEL=LR items"):
            CompareSettings(lrs=bad).checked()
    with pytest.raises(SettingsError, match="--lr must be > 0"):
        CompareSettings(lr=0.0).checked()


def test_time_budget_defaults():
    """8 minutes without --steps, none with them, --time-budget-min when given."""
    assert CompareSettings().budget_s() == 8 * 60
    assert CompareSettings(steps=100).budget_s() is None
    assert CompareSettings(steps=100, time_budget_min=2.5).budget_s() == 150
    assert CompareSettings(time_budget_min=0.5).budget_s() == 30
    with pytest.raises(SettingsError, match="--time-budget-min must be > 0"):
        CompareSettings(time_budget_min=0).checked()
    # The step count fits the budget: steps x (sum of step times) + evaluations, 15% spare.
    est = {"a": 0.1, "b": 0.3}
    steps = budget.size_steps(480, est, eval_batches=4)
    assert steps == int(0.85 * 480 / 0.4 - 22 * 4 / 3)
    assert budget.size_steps(1, est, 4) == 10  # never fewer than 10
    # Shares in proportion to the step times of the runs still to come.
    assert budget.proportional_share(100, "b", ["a", "b"], est) == pytest.approx(75)
    assert budget.proportional_share(100, "b", ["a", "b"]) == pytest.approx(50)
    assert budget.proportional_share(0.1, "a", ["a"]) == 1.0


@pytest.mark.timeout(180)
def test_time_budget_sizes_and_caps_the_runs(tmp_path, restore_threads):
    """Without --steps, timed steps size the run to the budget; a budget too
    small for the steps stops each architecture early, and the summary says so."""
    sized = run_comparison(CompareSettings(configs=[str(REPO / "models" / "tmm-tiny.json")], n=4, batch_size=2,
                                           eval_batches=1, threads=1, time_budget_min=0.02,
                                           out=str(tmp_path / "sized"), no_progress=True))
    config = json.loads((tmp_path / "sized" / "config.json").read_text())
    assert config["time_budget_s"] == pytest.approx(1.2) and set(config["timed_step_s"]) == {"tmm"}
    assert config["steps"] == budget.size_steps(1.2, config["timed_step_s"], 1)
    assert any("sized to the 0.02-minute budget" in n for n in sized.notes)

    capped = run_comparison(CompareSettings(configs=[str(REPO / "models" / f"{a}-tiny.json") for a in ("tmm", "hyena")],
                                            n=4, steps=100000, batch_size=2, eval_every=1000, eval_batches=1,
                                            threads=1, time_budget_min=0.03, out=str(tmp_path / "capped"),
                                            no_progress=True))
    for s in capped.summaries:
        assert s["status"] == "stopped" and 0 < s["steps"] < 100000, s
        assert "time budget" in s["note"]
    assert "(stopped)" in capped.table


def test_settings_errors_name_the_flag(tmp_path):
    with pytest.raises(SettingsError, match="--corpus applies to --task lm only"):
        CompareSettings(task="copy", corpus="x.txt").task_options()
    with pytest.raises(SettingsError, match="--n applies"):
        CompareSettings(task="mqar", n=4).task_options()
    with pytest.raises(SettingsError, match="--steps must be >= 1, got 0"):
        CompareSettings(steps=0).checked()
    with pytest.raises(SettingsError, match="--resume needs --out"):
        CompareSettings(resume=True).checked()
    with pytest.raises(SettingsError, match="KEY=VALUE"):
        CompareSettings(task_option=["novalue"]).task_options()
    with pytest.raises(SettingsError, match="no config file or name 'nope-cpu-small'"):
        run_comparison(CompareSettings(archs="nope", steps=1, out=str(tmp_path)))
    assert CompareSettings(task="lm", task_option=["vocab=512", "corpus=a.txt"]).task_options() == {
        "vocab": 512, "corpus": "a.txt"}
    assert CompareSettings(configs=["a,b", "c"]).checked().configs == ["a", "b", "c"]


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


@pytest.mark.timeout(180)
def test_compare_script_command_line(tmp_path):
    """scripts/compare.py: flags in, the driver's files out, the table and verdict printed;
    a bad flag is argparse's error (status 2) naming it."""
    configs = ",".join(f"models/{a}-tiny.json" for a in ("tmm", "hyena"))
    cmd = [sys.executable, str(REPO / "scripts" / "compare.py"), "--configs", configs, "--n", "4", "--steps", "2",
           "--batch-size", "2", "--eval-every", "1", "--eval-batches", "1", "--threads", "1",
           "--out", str(tmp_path / "run"), "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "final acc" in proc.stdout and proc.stdout.rstrip().endswith(summary["verdict"])
    assert f"Results in {tmp_path / 'run'}" in proc.stdout
    assert "compare.py: task copy" in proc.stderr
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["args"]["steps"] == 2 and config["args"]["configs"] == configs.split(",")
    assert config["command"][1].endswith("scripts/compare.py")

    bad = subprocess.run(cmd[:2] + ["--steps", "0"], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "--steps must be >= 1, got 0" in bad.stderr
