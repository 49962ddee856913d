"""Every zoo model under FSDP2 on two gloo processes: its parameters sharded
(Shard(0) DTensors, a smaller local shard), training equal to DDP's, and a
run stopped at a checkpoint and resumed through torch.distributed.checkpoint
giving the uninterrupted run's losses and parameters; the checkpoint's
gathered model loads as an ordinary one."""
import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tmm.models
import tmm.tasks
from tmm import train_checkpoints
from tmm.train import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("tmm", "transformer", "hyena", "mamba2")
TCFG = dict(steps=4, batch_size=8, lr=3e-3, warmup=1, eval_every=2, eval_batches=1, threads=1, progress=False)


def tiny(task, arch):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def sharded_placements(model, world):
    """(name, why) of every parameter that is not a Shard(0) DTensor with a smaller local shard."""
    from torch.distributed.tensor import DTensor, Shard

    wrong = []
    for name, p in model.named_parameters():
        if not isinstance(p, DTensor) or tuple(p.placements) != (Shard(0),):
            wrong.append((name, f"{type(p).__name__} {getattr(p, 'placements', None)}"))
        elif p.shape[0] >= world and p.to_local().shape[0] >= p.shape[0]:
            wrong.append((name, f"local {tuple(p.to_local().shape)} of {tuple(p.shape)}"))
    return wrong


def _worker(rank, world, rendezvous, out):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        task = tmm.tasks.make("copy", n=8)
        results = {}
        for arch in ARCHS:
            ddp = train(tiny(task, arch), task, TrainConfig(**TCFG))
            model = tiny(task, arch)
            ckpt = Path(out) / f"ckpt-{arch}"
            whole = train(model, task, TrainConfig(**TCFG, fsdp=True, checkpoint_dir=str(ckpt), checkpoint_every=2))
            full = {k: v.full_tensor() for k, v in model.state_dict().items()}
            wrong = sharded_placements(model, world)
            if rank == 0:
                (ckpt / "latest").write_text("step-00000002\n")  # as if killed after step 2
            dist.barrier()
            again = tiny(task, arch)
            resumed = train(again, task, TrainConfig(**TCFG, fsdp=True, checkpoint_dir=str(ckpt), checkpoint_every=2,
                                                    resume=True))
            results[arch] = {"ddp": ddp.losses, "fsdp": whole.losses, "resumed": resumed.losses,
                             "resumed_from": resumed.resumed_from, "wrong": wrong, "full": full,
                             "resumed_full": {k: v.full_tensor() for k, v in again.state_dict().items()}}
        torch.save(results, os.path.join(out, f"{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(600)
def test_every_zoo_model_shards_trains_and_resumes_under_fsdp2(tmp_path, restore_threads):
    mp.spawn(_worker, args=(2, str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=2)
    results = [torch.load(tmp_path / f"{r}.pt") for r in range(2)]
    for arch in ARCHS:
        r0 = results[0][arch]
        assert r0["wrong"] == [] and results[1][arch]["wrong"] == [], arch
        assert r0["fsdp"] == pytest.approx(r0["ddp"], rel=1e-5), arch
        assert r0["resumed_from"] == 2 and r0["resumed"] == r0["fsdp"], arch  # bitwise, as DDP's resume
        for name, t in r0["full"].items():
            assert torch.equal(r0["resumed_full"][name], t), (arch, name)
        step = train_checkpoints.latest(tmp_path / f"ckpt-{arch}")
        assert (step / "dcp").is_dir() and not (step / "optimizer.safetensors").exists()
        served = tmm.models.load(step)  # the gathered model: an ordinary checkpoint
        for name, t in served.state_dict().items():
            assert torch.equal(t, r0["full"][name]), (arch, name)
