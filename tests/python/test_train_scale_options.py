"""Training options for scale (tmm.train): bfloat16 and
float16 autocast (float16 with a GradScaler, resumed exactly), torch.compile,
activation checkpointing (tmm.nn models; a C++ zoo model is refused, saying
why), tokens/s and MFU per logged interval, step timing with gradient
accumulation, FSDP2 on two gloo processes against DDP (every parameter a
Shard(0) DTensor, the final parameters DDP's), and the paper recipe's
settings and its --dry-run estimate."""
import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tmm.models
import tmm.nn
import tmm.tasks
from tmm import train_checkpoints
from tmm.train import TrainConfig, flops_per_token, train

REPO = Path(__file__).resolve().parents[2]
TCFG = dict(steps=4, batch_size=8, lr=3e-3, warmup=1, eval_every=2, eval_batches=1, threads=1, progress=False)


def tiny_config(task, arch="tmm"):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    return cfg


def tiny(task, arch="tmm"):
    cfg = tiny_config(task, arch)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def timing_free(rows):
    return [{k: v for k, v in r.items() if k not in ("wall_s", "tokens_per_s", "mfu")} for r in rows]


@pytest.mark.parametrize("precision,rel", [("bfloat16", 5e-2), ("float16", 1e-2)])
def test_autocast_precisions_track_float32(precision, rel, restore_threads):
    task = tmm.tasks.make("copy", n=8)
    ref = train(tiny(task), task, TrainConfig(**TCFG))
    model = tiny(task)
    low = train(model, task, TrainConfig(**TCFG, precision=precision))
    assert low.losses == pytest.approx(ref.losses, rel=rel)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # autocast: float32 parameters and AdamW


def test_float16_grad_scaler_resumes_exactly(tmp_path, restore_threads):
    task = tmm.tasks.make("copy", n=8)
    cfg = dict(TCFG, precision="float16", checkpoint_dir=str(tmp_path / "ck"), checkpoint_every=2)
    whole = train(tiny(task), task, TrainConfig(**cfg))
    state = train_checkpoints.read_state(train_checkpoints.latest(tmp_path / "ck"))
    assert state["grad_scaler"]["scale"] > 0
    (tmp_path / "ck" / "latest").write_text("step-00000002\n")  # as if killed after step 2
    resumed = train(tiny(task), task, TrainConfig(**cfg, resume=True))
    assert resumed.resumed_from == 2 and resumed.losses == whole.losses


def test_float16_overflow_skips_the_step_instead_of_stopping(restore_threads):
    task = tmm.tasks.make("copy", n=8)
    model = tiny(task)
    with torch.no_grad():
        model.head.weight.mul_(3e3)  # float16 logits overflow at first: the scaler skips, lowers its scale
    res = train(model, task, TrainConfig(**{**TCFG, "steps": 2}, precision="float16"))
    assert res.steps == 2


def test_compile_option(restore_threads):
    task = tmm.tasks.make("copy", n=8)
    eager = train(tiny(task), task, TrainConfig(**TCFG))
    compiled = train(tiny(task), task, TrainConfig(**TCFG, compile="aot_eager"))
    assert compiled.losses == pytest.approx(eager.losses, rel=1e-5)


def test_activation_checkpointing(restore_threads):
    task = tmm.tasks.make("copy", n=8)
    plain_model, ckpt_model = tiny(task), tiny(task)
    plain = train(plain_model, task, TrainConfig(**TCFG))
    calls = []
    block = ckpt_model.blocks[0]
    forward = block.forward
    block.forward = lambda x: (calls.append(torch.is_grad_enabled()), forward(x))[1]  # the recomputation too
    ckpt = train(ckpt_model, task, TrainConfig(**TCFG, activation_checkpointing=True))
    assert ckpt.losses == pytest.approx(plain.losses, rel=1e-6)
    # each training step runs block 0 twice (forward, then its recomputation in backward); evaluation once
    assert calls.count(True) == 2 * TCFG["steps"] and calls.count(False) == 3
    with pytest.raises(ValueError, match="no per-block recomputation"):
        tmm.train._enable_activation_checkpointing(torch.nn.Linear(2, 2))


def test_tokens_per_second_and_mfu_per_interval(restore_threads):
    task = tmm.tasks.make("copy", n=8)
    model = tiny(task)
    fpt = flops_per_token(model.config, model.num_parameters(), task.seq_len)
    res = train(model, task, TrainConfig(**TCFG, peak_flops=1e12))
    first, *later = res.rows
    assert first["tokens_per_s"] is None and first["mfu"] is None  # step 0: no interval yet
    prev = first
    for row in later:
        interval = row["wall_s"] - prev["wall_s"]
        assert row["tokens_per_s"] == pytest.approx((row["tokens"] - prev["tokens"]) / interval, rel=5e-2)
        assert row["mfu"] == pytest.approx(row["tokens_per_s"] * fpt / 1e12)
        prev = row
    unknown = train(tiny(task), task, TrainConfig(**TCFG))  # a CPU: no peak in the table
    assert unknown.rows[-1]["tokens_per_s"] > 0 and unknown.rows[-1]["mfu"] is None


def test_step_timing_counts_micro_batches(restore_threads):
    from lab.experiments import budget

    task = tmm.tasks.make("copy", n=8)
    cfg = tiny_config(task)
    seen = []
    real = budget.build_model

    def spy(cfg):
        model = real(cfg)
        model.register_forward_hook(lambda m, a, o: seen.append(a[0].shape[0]))
        return model

    budget.build_model = spy
    try:
        budget.time_steps(cfg, task, 16, 0, n=1, grad_accum=4, world=2)
    finally:
        budget.build_model = real
    assert seen == [2] * 8  # 2 timed steps (one untimed) of 4 micro-batches of 16 / 2 processes / 4


# ---------------------------------------------------------------- FSDP2 vs DDP on two gloo processes


def assert_fully_sharded(model, world):
    """Every parameter of `model` is a DTensor sharded on dim 0 (FSDP2's
    Shard(0)) whose local shard is smaller than the whole: sharding did not
    fall back to replicas (DDP)."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor, Shard

    for module in model.modules():  # a root FSDP module keeps its parameters gathered after a forward
        if isinstance(module, FSDPModule):
            module.reshard()
    named = list(model.named_parameters())
    assert named, "the model has no parameters"
    for name, p in named:
        assert isinstance(p, DTensor), f"{name}: a {type(p).__name__}, not a DTensor"
        assert tuple(p.placements) == (Shard(0),), f"{name}: placements {p.placements}, expected (Shard(0),)"
        local, whole = p.to_local().shape, p.shape
        assert p.device_mesh.size() == world and local[0] < whole[0] and local[1:] == whole[1:], \
            f"{name}: local shard {tuple(local)} of {tuple(whole)} on {p.device_mesh.size()} ranks"


def _fsdp_worker(rank, world, rendezvous, out):
    """The same training under DDP, then under FSDP2, in one process group."""
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        task = tmm.tasks.make("copy", n=8)
        for fsdp in (False, True):
            model = tiny(task)
            res = train(model, task, TrainConfig(**TCFG, fsdp=fsdp, grad_accum=2))
            if fsdp:
                assert_fully_sharded(model, world)
            params = {name: (p.full_tensor() if fsdp else p).detach().clone() for name, p in model.named_parameters()}
            torch.save({"losses": res.losses, "rows": timing_free(res.rows), "params": params},
                       os.path.join(out, f"{fsdp}-{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(300)
def test_fsdp2_on_two_gloo_processes_equals_ddp(tmp_path, restore_threads):
    mp.spawn(_fsdp_worker, args=(2, str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=2)
    ddp = [torch.load(tmp_path / f"False-{r}.pt") for r in range(2)]
    fsdp = [torch.load(tmp_path / f"True-{r}.pt") for r in range(2)]
    for r in range(2):
        assert fsdp[r]["losses"] == pytest.approx(ddp[0]["losses"], rel=1e-5)
    worst = max(abs(a - b) / abs(b) for a, b in zip(fsdp[0]["losses"], ddp[0]["losses"]))
    print(f"FSDP2 vs DDP (2 gloo processes, {len(ddp[0]['losses'])} steps): losses within {worst:.1e} relative")
    assert fsdp[1]["rows"] == []  # rank 0 alone logs
    assert [row["step"] for row in fsdp[0]["rows"]] == [0, 2, 4]
    for a, b in zip(fsdp[0]["rows"], ddp[0]["rows"]):
        assert a["eval_loss"] == pytest.approx(b["eval_loss"], rel=1e-5)
    # The final parameters: FSDP2's gathered shards are DDP's, up to the order of the gradient sums
    # (AdamW turns a rounding difference into at most ~1e-4 of lr per step: tests/python/test_distributed.py).
    names = list(ddp[0]["params"])
    assert names and all(list(f["params"]) == names for f in fsdp)
    moved = max(float((ddp[0]["params"][n] - tiny(tmm.tasks.make("copy", n=8)).state_dict()[n]).abs()
                      .max()) for n in names)
    atol = 1e-3 * TCFG["lr"] * TCFG["steps"]
    for r in range(2):
        for name in names:
            diff = float((fsdp[r]["params"][name] - ddp[0]["params"][name]).abs().max())
            assert diff <= atol, f"rank {r}: {name} differs from DDP's by {diff:.2e} (> {atol:.1e})"
    print(f"final parameters: FSDP2 within {atol:.1e} of DDP (training moved them up to {moved:.1e})")
    assert moved > 100 * atol  # the comparison can tell a trained parameter from an untrained one


# ---------------------------------------------------------------- the paper recipe


def test_paper_recipe_settings():
    from lab.experiments.compare import CompareSettings
    from lab.experiments.errors import SettingsError

    s = CompareSettings(recipe="paper", task_option=["path=shards/"], device="cpu").checked()
    assert s.task == "shards" and s.configs == ["tmm-paper", "transformer-paper", "hyena-paper", "mamba2-paper"]
    assert (s.steps, s.batch_size, s.lr, s.warmup, s.min_lr_ratio) == (200_000, 128, 5e-4, 500, 0.0)
    assert "seq_len=512" in s.task_option and s.checkpoint_every == 1000 and s.precision == "float32"
    given = CompareSettings(recipe="paper", task_option=["path=s/", "seq_len=64"], steps=10, lr=1e-2).checked()
    assert (given.steps, given.lr) == (10, 1e-2) and "seq_len=512" not in given.task_option
    with pytest.raises(SettingsError, match="needs the token shards"):
        CompareSettings(recipe="paper").checked()


def test_paper_recipe_dry_run_prints_the_estimate(tmp_path, capsys, restore_threads):
    from lab.cli import compare as compare_script
    from tmm.data import prepare_corpus

    (tmp_path / "c.txt").write_text("".join(f"Line {i} of the text, and more of it.\n" for i in range(2000)))
    prepare_corpus(tmp_path / "c.txt", tmp_path / "s", section_bytes=1024, workers=1, progress=False,
                   log=lambda _: None)
    code = compare_script.main(["--recipe", "paper", "--task-option", f"path={tmp_path / 's'}", "--configs",
                                "tmm-tiny", "--task-option", "seq_len=64", "--batch-size", "4", "--steps", "1000",
                                "--threads", "1", "--out", str(tmp_path / "out"), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 0 and not (tmp_path / "out").exists()  # nothing trained, nothing written
    assert "ms/step" in err and "1,000 steps" in err and "0.00 B tokens" in err, err
    assert f"{1000 * 4 * 64 / 1e9:.2f} B tokens consumed" in err
