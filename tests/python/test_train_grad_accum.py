"""Gradient accumulation (tmm.train, TrainConfig.grad_accum): k
micro-batches make the step of the whole batch, to float rounding, also when
the micro-batches hold different numbers of labelled tokens and when the
batch comes from token shards."""
import json
from pathlib import Path

import pytest
import torch

import tmm.models
import tmm.tasks
from tmm.train import TrainConfig, train

from ragged_copy import RaggedCopy

REPO = Path(__file__).resolve().parents[2]
TCFG = dict(steps=4, batch_size=8, lr=3e-3, warmup=1, eval_every=4, eval_batches=1, threads=1, progress=False)
# float32 sums in another order (tests/python/test_distributed.py's reasoning):
# losses to RTOL; parameters to ATOL + RTOL |p|, ATOL a thousandth of the most
# AdamW moves a parameter in these steps (AdamW's g / (|g| + eps) magnifies
# rounding differences of gradients near eps).
RTOL = 1e-6


def tiny(task, arch="tmm"):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=task.vocab_size, max_len=task.seq_len)
    torch.manual_seed(0)
    return tmm.models.build(cfg)


def assert_params_close(a_model, b_model, steps, lr):
    atol = 1e-3 * lr * steps
    for (name, a), (_, b) in zip(a_model.named_parameters(), b_model.named_parameters()):
        worst = ((a - b).abs() / (atol + RTOL * b.abs())).max().item()
        assert worst <= 1.0, f"{name}: |a - b| reaches {worst:.2f} x (atol + RTOL |b|)"


@pytest.mark.parametrize("arch", ["tmm", "transformer"])
@pytest.mark.parametrize("micro", [2, 4])
def test_micro_batches_make_the_whole_batchs_step(arch, micro, restore_threads):
    task = RaggedCopy(period=4)
    whole_model, accum_model = tiny(task, arch), tiny(task, arch)
    whole = train(whole_model, task, TrainConfig(**TCFG))
    rows = []
    hook = accum_model.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[0]) if m.training else None)
    accum = train(accum_model, task, TrainConfig(**TCFG, grad_accum=micro))
    hook.remove()
    assert rows == [TCFG["batch_size"] // micro] * (micro * TCFG["steps"])  # the model saw micro-batches only
    assert accum.losses == pytest.approx(whole.losses, rel=RTOL)
    assert_params_close(accum_model, whole_model, TCFG["steps"], TCFG["lr"])


def test_accumulation_on_shards(tmp_path, restore_threads):
    from tmm.data import prepare_corpus

    (tmp_path / "c.txt").write_text("".join(f"Line {i} of the text, and more of it.\n" for i in range(300)))
    prepare_corpus(tmp_path / "c.txt", tmp_path / "s", shard_bytes=3000, section_bytes=512, workers=1,
                   progress=False, log=lambda _: None)
    task = tmm.tasks.make("shards", path=str(tmp_path / "s"), seq_len=16)
    whole_model, accum_model = tiny(task), tiny(task)
    whole = train(whole_model, task, TrainConfig(**TCFG))
    accum = train(accum_model, task, TrainConfig(**TCFG, grad_accum=4))
    assert accum.losses == pytest.approx(whole.losses, rel=RTOL)
    assert_params_close(accum_model, whole_model, TCFG["steps"], TCFG["lr"])


def test_bad_accumulation_is_refused():
    task = RaggedCopy(period=4)
    with pytest.raises(ValueError, match=r"batch_size 8 does not divide into 3 micro-batches \(grad_accum\)"):
        train(tiny(task), task, TrainConfig(**TCFG, grad_accum=3))
    with pytest.raises(ValueError, match="grad_accum must be an int >= 1 .micro-batches per step., got 0"):
        train(tiny(task), task, TrainConfig(**TCFG, grad_accum=0))


def test_compare_grad_accum_flag(tmp_path, restore_threads):
    """scripts/compare.py --grad-accum: the same curve to float rounding; a batch that does not divide is refused."""
    from lab.experiments.compare import CompareSettings, run_comparison
    from lab.experiments.errors import SettingsError

    args = dict(task="copy", n=4, configs=[str(REPO / "models" / "tmm-tiny.json")], steps=6, batch_size=8,
                eval_every=3, eval_batches=1, threads=1, no_progress=True, no_plots=True)
    curves = {}
    for micro in (1, 4):
        out = tmp_path / f"accum{micro}"
        assert run_comparison(CompareSettings(**args, grad_accum=micro, out=str(out))).exit_code == 0
        curves[micro] = [json.loads(line)["eval_loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert curves[4] == pytest.approx(curves[1], rel=1e-5)
    with pytest.raises(SettingsError, match=r"--batch-size 8 does not divide among 1 processes x 3 micro-batches"):
        run_comparison(CompareSettings(**args, grad_accum=3, out=str(tmp_path / "bad")))
