"""Training on token shards through tmm.train (the ``shards`` task):
the loop reads the seeded stream, a run interrupted mid-shard and resumed
from its checkpoint is bitwise the uninterrupted one (the stream position is
in the checkpoint; also for scripts/compare.py SIGKILLed mid-run), and two
gloo processes reading their own rows give the loss curve of one process
with the same global batch (also with gradient accumulation)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tmm.models
import tmm.tasks
from tmm import train_checkpoints
from tmm.data import ShardLoader, prepare_corpus
from tmm.train import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]
SEQ = 16
TCFG = dict(steps=12, batch_size=4, lr=3e-3, warmup=2, eval_every=4, eval_batches=1, threads=1, progress=False)


class Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    text = "".join(f"Verse {i}: and the {('light', 'water', 'stone')[i % 3]} was good.\n" for i in range(600))
    (root / "corpus.txt").write_text(text)
    prepare_corpus(root / "corpus.txt", root / "out", shard_bytes=5000, section_bytes=1024, workers=1,
                   progress=False, log=lambda _: None)
    return root / "out"


def tiny_model(task, arch="tmm"):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def test_the_loop_reads_the_loaders_stream(shard_dir):
    task = tmm.tasks.make("shards", path=str(shard_dir), seq_len=SEQ, seed=5)
    assert (task.vocab_size, task.seq_len) == (256, SEQ) and len(task.train.paths) > 3
    loader = ShardLoader(shard_dir, SEQ, 4, seed=5)
    for step in range(3):
        ids, labels = task.batch_at(4 * step, 4)
        want_ids, want_labels = next(loader)
        assert torch.equal(ids, want_ids) and torch.equal(labels, want_labels)
    held = task.eval_batch(3, torch.Generator().manual_seed(0))[0]
    assert held.shape == (3, SEQ) and int(held.max()) < 256


@pytest.mark.parametrize("arch", ["tmm", "transformer", "hyena", "mamba2"])
def test_interrupted_run_resumes_to_the_same_losses(shard_dir, tmp_path, arch, restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("shards", path=str(shard_dir), seq_len=SEQ)
    straight_model = tiny_model(task, arch)
    straight = train(straight_model, task, TrainConfig(**TCFG))
    assert all(np.isfinite(straight.losses)) and "eval_bpb" in straight.rows[-1]

    def interrupt(row):
        if row["step"] == 8:
            raise Interrupt()

    ckpt = tmp_path / "ckpt"
    with pytest.raises(Interrupt):
        train(tiny_model(task, arch), task, TrainConfig(**TCFG, checkpoint_dir=str(ckpt), checkpoint_every=6),
              log=interrupt)
    assert train_checkpoints.read_state(train_checkpoints.latest(ckpt))["data_position"] == 6 * 4

    # A new process: a fresh task and model, other global RNG states.
    task = tmm.tasks.make("shards", path=str(shard_dir), seq_len=SEQ)
    model = tiny_model(task, arch)
    torch.manual_seed(99)
    resumed = train(model, task, TrainConfig(**TCFG, checkpoint_dir=str(ckpt), checkpoint_every=6, resume=True))
    assert resumed.resumed_from == 6
    assert resumed.losses == straight.losses  # bitwise
    for (name, a), (_, b) in zip(straight_model.named_parameters(), model.named_parameters()):
        assert torch.equal(a, b), name


def _worker(rank, world, rendezvous, shard_dir, out):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        task = tmm.tasks.make("shards", path=shard_dir, seq_len=SEQ)
        losses = {}
        for micro in (1, 2):  # each rank's 2 rows at once, or in 2 micro-batches (DDP's no_sync)
            losses[micro] = train(tiny_model(task), task, TrainConfig(**{**TCFG, "steps": 4, "grad_accum": micro})).losses
        torch.save(losses, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_two_gloo_processes_read_their_rows_of_the_global_batch(shard_dir, tmp_path, restore_threads):
    torch.set_num_threads(1)
    task = tmm.tasks.make("shards", path=str(shard_dir), seq_len=SEQ)
    ref = train(tiny_model(task), task, TrainConfig(**{**TCFG, "steps": 4}))
    mp.spawn(_worker, args=(2, str(tmp_path / "rendezvous"), str(shard_dir), str(tmp_path)), nprocs=2)
    for r in range(2):
        losses = torch.load(tmp_path / f"rank{r}.pt")
        for micro in (1, 2):
            # float32 sums in another order (tests/python/test_distributed.py's tolerance)
            assert losses[micro] == pytest.approx(ref.losses, rel=1e-6), (r, micro)


def _metrics(out):
    rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("wall_s", "tokens_per_s", "mfu")} for r in rows]


@pytest.mark.timeout(120)
def test_sigkilled_compare_on_shards_resumes_to_the_same_curve(shard_dir, tmp_path, restore_threads):
    """scripts/compare.py --task shards, SIGKILLed after its checkpoint of step 10, then --resume."""
    from lab.experiments.compare import CompareSettings, run_comparison

    args = dict(task="shards", task_option=[f"path={shard_dir}", f"seq_len={SEQ}"],
                configs=[str(REPO / "models" / "tmm-tiny.json")], steps=24, batch_size=4, eval_every=4,
                eval_batches=1, threads=1, checkpoint_every=5, no_progress=True, no_plots=True)
    assert run_comparison(CompareSettings(**args, out=str(tmp_path / "straight"))).exit_code == 0

    out = tmp_path / "killed"
    command = [sys.executable, str(REPO / "scripts" / "compare.py"), "--task", "shards",
               "--task-option", f"path={shard_dir}", "--task-option", f"seq_len={SEQ}",
               "--configs", str(REPO / "models" / "tmm-tiny.json"), "--steps", "24", "--batch-size", "4",
               "--eval-every", "4", "--eval-batches", "1", "--threads", "1", "--checkpoint-every", "5",
               "--no-progress", "--no-plots", "--out", str(out)]
    # Each checkpoint file takes 0.2 s more: the kill lands in training, not after it.
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMM_CHECKPOINT_WRITE_DELAY_S": "0.2"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = out / "checkpoints" / "tmm" / "latest"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (latest.is_file() and latest.read_text().strip() >= "step-00000010"):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    step = train_checkpoints.read_state(train_checkpoints.latest(out / "checkpoints" / "tmm"))["step"]
    assert 10 <= step < 24

    assert run_comparison(CompareSettings(**args, out=str(out), resume=True)).exit_code == 0
    assert _metrics(out) == _metrics(tmp_path / "straight")
