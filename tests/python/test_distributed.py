"""Distributed training: tmm.train under 2 CPU processes (gloo,
DistributedDataParallel around the C++ models) ends with the parameters of a
single process trained on the same global batches; scripts/compare.py runs
unchanged under torchrun and only rank 0 writes; two torchrun "nodes" on this
machine (--nnodes 2, c10d rendezvous on localhost) train on token shards, one
node is killed, both resume from the last checkpoint and end as one process
trained straight through."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
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
    args = ["--configs", str(REPO / "models" / "tmm-tiny.json"), "--task-option", "n=4", "--steps", "6", "--lr", "1e-3",
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


# ---------------------------------------------------------------- two torchrun nodes, one killed

# What each node's one worker runs: tmm.train on the token shards (DDP over the
# two nodes, gloo), checkpointing every 2 steps. With kill_at, the worker of
# global rank 1 kills its whole node (its torchrun agent's process group, then
# itself: torchrun starts its workers in sessions of their own) when it asks
# for that step's batch, as a lost machine would.
NODE_WORKER = textwrap.dedent("""
    import json, os, signal, sys
    import torch, torch.distributed as dist
    import tmm.models, tmm.tasks
    from tmm.train import TrainConfig, train
    args = json.loads(sys.argv[1])
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    task = tmm.tasks.make("shards", path=args["shards"], seq_len=16)
    if args["kill_at"] is not None and dist.get_rank() == 1:
        batch_at, calls = task.batch_at, []
        def dying(*a, **k):
            calls.append(1)
            if len(calls) == args["kill_at"]:
                os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
                os.kill(os.getpid(), signal.SIGKILL)
            return batch_at(*a, **k)
        task.batch_at = dying
    cfg = json.loads(open(args["config"]).read())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    model = tmm.models.build(cfg)
    train(model, task, TrainConfig(**args["train"], checkpoint_dir=args["ckpt"], checkpoint_every=2,
                                   resume=args["resume"]))
    dist.destroy_process_group()
""")
NODE_TRAIN = dict(steps=8, batch_size=4, lr=3e-3, warmup=1, eval_every=8, eval_batches=1, threads=1, progress=False)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start_nodes(tmp_path, shards, kill_at, resume):
    """Two torchrun agents, --nnodes 2 of one worker each, meeting at a c10d rendezvous on localhost (node 0
    hosts its store); each in its own session (process group), so that a node can be killed whole."""
    script = tmp_path / "node_worker.py"
    script.write_text(NODE_WORKER)
    args = json.dumps(dict(shards=str(shards), config=str(REPO / "models" / "tmm-tiny.json"), kill_at=kill_at,
                           resume=resume, train=NODE_TRAIN, ckpt=str(tmp_path / "ckpt")))
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    nodes = []
    for node in range(2):
        log = open(tmp_path / f"node{node}-{'resume' if resume else 'first'}.log", "w")
        nodes.append(subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
             "--rdzv_backend", "c10d", "--rdzv_endpoint", f"localhost:{port}", "--rdzv_id", f"tmm-{port}",
             "--rdzv_conf", f"is_host={node == 0}", "--max_restarts", "0", str(script), args],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return nodes


def _wait(nodes, timeout):
    end = time.monotonic() + timeout
    try:
        return [n.wait(timeout=max(1.0, end - time.monotonic())) for n in nodes]
    finally:
        for n in nodes:  # a node still running past the timeout: the test has failed, end it
            if n.poll() is None:
                os.killpg(n.pid, signal.SIGKILL)
                n.wait()


@pytest.mark.timeout(300)
def test_two_nodes_one_killed_resume_as_one_process(tmp_path, restore_threads):
    from tmm.data import prepare_corpus

    (tmp_path / "c.txt").write_text("".join(f"Line {i} of the text, and more of it.\n" for i in range(2000)))
    shards = tmp_path / "shards"
    prepare_corpus(tmp_path / "c.txt", shards, section_bytes=1024, workers=1, progress=False, log=lambda _: None)

    first = _wait(_start_nodes(tmp_path, shards, kill_at=6, resume=False), 120)  # killed asking for step 6's batch
    logs = "".join(f.read_text() for f in sorted(tmp_path.glob("node*-first.log")))
    assert first[1] == -signal.SIGKILL and first[0] != 0, (first, logs[-3000:])
    ckpt = tmp_path / "ckpt"
    killed_at = train_checkpoints.read_state(train_checkpoints.latest(ckpt))["step"]
    assert killed_at == 4, killed_at  # the last checkpoint before the kill

    resumed = _wait(_start_nodes(tmp_path, shards, kill_at=None, resume=True), 120)
    logs = "".join(f.read_text() for f in sorted(tmp_path.glob("node*-resume.log")))
    assert resumed == [0, 0], (resumed, logs[-3000:])
    state = train_checkpoints.read_state(train_checkpoints.latest(ckpt))
    assert state["step"] == 8 and state["world_size"] == 2

    torch.set_num_threads(1)
    task = tmm.tasks.make("shards", path=str(shards), seq_len=16)
    model = tiny_tmm(task)
    ref = train(model, task, TrainConfig(**NODE_TRAIN))
    assert state["losses"] == pytest.approx(ref.losses, rel=RTOL)
    final = tmm.models.load(train_checkpoints.latest(ckpt))
    for (name, p), (_, q) in zip(model.named_parameters(), final.named_parameters()):
        assert_close(q, p, name, atol(NODE_TRAIN["lr"], NODE_TRAIN["steps"]))
