"""SIGKILL at random moments: a scripts/compare.py run that
checkpoints every step is killed again and again, some kills landing inside
a checkpoint write (TMM_CHECKPOINT_WRITE_DELAY_S widens that window); after
every kill each remaining checkpoint loads, and --resume finally finishes the
run with exactly the losses of an uninterrupted one.

Each life is a process forked from a "zygote" that has imported torch and
tmm once (and run no torch op, so forking is safe) and runs the script's
command line: a fresh interpreter per life would spend seconds importing on
a loaded 2-core machine, the kills only milliseconds."""
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import tmm.models
import tmm.tasks
from tmm import train_checkpoints
from tmm.train import TrainConfig, _optimizer, train

REPO = Path(__file__).resolve().parents[2]
STEPS = 150  # more than the kills let it reach, so that every kill lands in training
KILLS = 12
SEED = 7  # of the kill delays


# Reads JSON lines [log path, TMM_CHECKPOINT_WRITE_DELAY_S, *compare.py arguments];
# forks a life for each, which runs scripts/compare.py's command line
# (lab.cli.compare.main, as `python scripts/compare.py ARGS` would), answers
# its pid, then its wait status.
ZYGOTE = r"""
import json, os, sys, traceback
from lab.cli.compare import main  # the script's command line, imported once
for line in sys.stdin:
    log, delay, *argv = json.loads(line)
    pid = os.fork()
    if pid == 0:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ["TMM_CHECKPOINT_WRITE_DELAY_S"] = delay
        sys.argv = ["compare.py", *argv]  # the program name of its messages
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(pid, flush=True)
    print(os.waitpid(pid, 0)[1], flush=True)
"""


class Zygote:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        self.life = None  # the pid of a life not yet reaped

    def launch(self, log_path, delay_s, argv):
        self.proc.stdin.write(json.dumps([str(log_path), str(delay_s), *argv]) + "\n")
        self.proc.stdin.flush()
        self.life = int(self.proc.stdout.readline())
        return self.life

    def exited(self, timeout=0.0):
        """The life's wait status once it has ended, else None."""
        if select.select([self.proc.stdout], [], [], timeout)[0]:
            self.life = None
            return int(self.proc.stdout.readline())
        return None

    def close(self):
        if self.life is not None:  # a failed test left it running
            try:
                os.kill(self.life, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def argv(out, checkpoint_every):
    return ["--configs", str(REPO / "models" / "tmm-tiny.json"), "--n", "4", "--steps", str(STEPS), "--lr", "1e-3",
            "--batch-size", "2",
            "--eval-every", "10", "--eval-batches", "1", "--threads", "1", "--out", str(out), "--no-progress",
            "--checkpoint-every", str(checkpoint_every), "--resume"]


def latest_step(ckpt):
    path = train_checkpoints.latest(ckpt)
    return -1 if path is None else int(path.name.split("-")[1])


def wait_for_progress(zygote, log_path, ckpt, before, timeout=60):
    """Until the life has printed its folder line and written a checkpoint
    past step `before`: a kill then always lands in training or in a
    checkpoint write, however slow a loaded machine makes the start."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = Path(log_path).read_text() if Path(log_path).exists() else ""
        if "compare.py: task" in text and latest_step(ckpt) > before:
            return
        status = zygote.exited(0.02)
        if status is not None:
            raise AssertionError(f"compare.py ended (wait status {status}) before a checkpoint:\n{text}")
    raise AssertionError(f"compare.py wrote no checkpoint within {timeout} s:\n{Path(log_path).read_text()}")


def check_loadable(ckpt):
    """Loads every checkpoint left in `ckpt` up to the one `latest` names;
    returns (latest step or None, whether a write was cut short)."""
    path = train_checkpoints.latest(ckpt)  # raises if `latest` names a missing or incomplete folder
    if path is None:
        return None, any(p.name.startswith(".") for p in ckpt.iterdir()) if ckpt.is_dir() else False
    step = train_checkpoints.read_state(path)["step"]
    kept = [s for s in train_checkpoints.list_steps(ckpt) if s <= step]
    # keep=2, plus one when the kill came between moving `latest` and deleting the oldest
    assert kept[-1] == step and len(kept) <= 3, kept
    for s in kept:
        model = tmm.models.load(ckpt / train_checkpoints.step_dir_name(s))
        opt = _optimizer(model, TrainConfig())
        state = train_checkpoints.load(ckpt / train_checkpoints.step_dir_name(s), model, opt,
                                   {"data": torch.Generator()})
        assert state["step"] == s and len(state["losses"]) == s
    cut = any(p.name.startswith(".") for p in ckpt.iterdir()) or any(s > step for s in train_checkpoints.list_steps(ckpt))
    return step, cut


@pytest.mark.timeout(180)
def test_sigkill_at_random_moments_never_breaks_a_checkpoint(tmp_path, restore_threads):
    out = tmp_path / "run"
    ckpt = out / "checkpoints" / "tmm"
    rng = random.Random(SEED)
    steps_seen, cut_writes = [], 0
    zygote = Zygote()
    try:
        for k in range(KILLS):
            log_path = tmp_path / f"life{k}.log"
            before = latest_step(ckpt)
            pid = zygote.launch(log_path, 0.005, argv(out, 1))
            wait_for_progress(zygote, log_path, ckpt, before)
            time.sleep(rng.uniform(0.05, 0.6))
            assert zygote.exited() is None, Path(log_path).read_text()  # STEPS is out of reach: still running
            os.kill(pid, signal.SIGKILL)
            status = zygote.exited(timeout=30)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            step, cut = check_loadable(ckpt)
            cut_writes += cut
            steps_seen.append(step)
        progressed = [s for s in steps_seen if s is not None]
        assert progressed == sorted(progressed) and progressed and progressed[-1] > 0, steps_seen
        assert cut_writes >= 1, f"no kill landed inside a checkpoint write ({steps_seen})"

        # The last life: resumed to the end, without the slowing hook, checkpointing
        # less often (a runtime option: it may change on resume).
        log_path = tmp_path / "final.log"
        zygote.launch(log_path, 0, argv(out, 50))
        status = zygote.exited(timeout=120)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, Path(log_path).read_text()
    finally:
        zygote.close()
    assert train_checkpoints.latest(ckpt).name == train_checkpoints.step_dir_name(STEPS)
    state = train_checkpoints.read_state(train_checkpoints.latest(ckpt))

    # The uninterrupted run, in this process: compare.py's settings for this command line.
    torch.set_num_threads(1)
    task = tmm.tasks.make("copy", n=4)
    cfg = json.loads((REPO / "models" / "tmm-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    model = tmm.models.build(cfg)
    ref = train(model, task, TrainConfig(steps=STEPS, batch_size=2, warmup=STEPS // 10, eval_every=10,
                                         eval_batches=1, progress=False))
    assert state["losses"] == ref.losses  # every step's loss, bitwise, across all the lives
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(0, STEPS + 1, 10))  # each row once
    assert [r["eval_loss"] for r in rows] == [r["eval_loss"] for r in ref.rows]
    final = tmm.models.load(train_checkpoints.latest(ckpt))
    for (name, a), (_, b) in zip(model.named_parameters(), final.named_parameters()):
        assert torch.equal(a, b), name
    print(f"kills: {KILLS}, latest step after each: {steps_seen}, kills inside a checkpoint write: {cut_writes}")
