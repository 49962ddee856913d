"""Distributed training: tmm.train under 2 CPU processes (gloo,
DistributedDataParallel around the C++ models) ends with the parameters of a
single process trained on the same global batches; scripts/compare.py runs
unchanged under torchrun and only rank 0 writes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tmm.models
import tmm.tasks
from tmm import train_checkpoints
from tmm.train import TrainConfig, train

from ragged_copy import RaggedCopy

REPO = Path(__file__).resolve().parents[2]
WORLD = 2
TCFG = dict(steps=5, batch_size=4, lr=3e-3, warmup=1, eval_every=5, eval_batches=1, threads=1, progress=False)
# float32: the runs differ only in the order of the gradient sums. Losses
# agree to RTOL (measured: 2e-7). Parameters agree to ATOL + RTOL |p|, ATOL a
# thousandth of the most AdamW moves a parameter (about lr per step): for a
# gradient element near AdamW's eps (1e-8), g / (|g| + eps) turns the sums'
# rounding differences into update differences of up to ~1e-4 of lr
# (measured: 2.2e-6 on one element after 6 steps at lr 1e-3; typical
# elements differ by < 1e-7).
RTOL = 1e-6


def atol(lr, steps):
    return 1e-3 * lr * steps


def tiny_tmm(task):
    cfg = json.loads((REPO / "models" / "tmm-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def worker(rank, world, rendezvous, out):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        task = RaggedCopy()
        torch.manual_seed(100 + rank)  # different inits: DDP must start every rank from rank 0's
        cfg = json.loads((REPO / "models" / "tmm-tiny.json").read_text())
        cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
        model = tmm.models.build(cfg)
        if rank == 0:  # rank 0 holds the same init as the single process
            model.load_state_dict(tiny_tmm(task).state_dict())
        res = train(model, task, TrainConfig(**TCFG))
        torch.save({"losses": res.losses, "rows": res.rows, "params": dict(model.named_parameters())},
                   os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def assert_close(actual, expected, what, atol):
    worst = ((actual - expected).abs() / (atol + RTOL * expected.abs())).max().item()
    assert worst <= 1.0, f"{what}: |a - e| reaches {worst:.2f} x (atol + RTOL |e|)"


@pytest.mark.timeout(180)
def test_two_gloo_processes_match_one_process(tmp_path, restore_threads):
    torch.set_num_threads(1)
    task = RaggedCopy()
    model = tiny_tmm(task)
    ref = train(model, task, TrainConfig(**TCFG))

    mp.spawn(worker, args=(WORLD, str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=WORLD)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    assert [r["step"] for r in ranks[0]["rows"]] == [0, 5] and ranks[1]["rows"] == []  # rank 0 evaluates
    for r in ranks:
        assert r["losses"] == pytest.approx(ref.losses, rel=RTOL)
    for name, p in model.named_parameters():
        for r in range(WORLD):
            assert_close(ranks[r]["params"][name], p, f"rank {r}: {name}", atol(TCFG["lr"], TCFG["steps"]))
        assert torch.equal(ranks[0]["params"][name], ranks[1]["params"][name]), name  # the ranks agree exactly


@pytest.mark.timeout(240)
def test_compare_under_torchrun(tmp_path):
    out = tmp_path / "run"
    # --task-option n=4, not --n 4: torchrun's own parser rejects --n as an ambiguous prefix of its options.
    args = ["--configs", str(REPO / "models" / "tmm-tiny.json"), "--task-option", "n=4", "--steps", "6",
            "--batch-size", "4",
            "--eval-every", "3", "--eval-batches", "1", "--out", str(out), "--no-progress", "--checkpoint-every", "3"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={WORLD}",
         str(REPO / "scripts" / "compare.py"), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=200,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("Results in") == 1  # rank 0 alone reports
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 3, 6]  # written once, by rank 0
    config = json.loads((out / "config.json").read_text())
    assert config["world_size"] == WORLD
    assert config["machine"]["threads"] == max(1, (os.cpu_count() or 1) // WORLD)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []

    # The same run in one process: compare.py's settings for this command line.
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    model = tiny_tmm(task)
    ref = train(model, task, TrainConfig(steps=6, batch_size=4, warmup=1, eval_every=3, eval_batches=1,
                                         progress=False))
    state = train_checkpoints.read_state(train_checkpoints.latest(out / "checkpoints" / "tmm"))
    assert state["world_size"] == WORLD and state["losses"] == pytest.approx(ref.losses, rel=RTOL)
    final = tmm.models.load(train_checkpoints.latest(out / "checkpoints" / "tmm"))
    for (name, p), (_, q) in zip(model.named_parameters(), final.named_parameters()):
        assert_close(q, p, name, atol(1e-3, 6))
