"""Information extraction and capacity (lab.experiments.retention and its
models, scripts/retention.py): what is frozen stays frozen, the bottleneck is
the only path, a smoke run of the driver writes its report, and the script
runs it from its command line."""
import dataclasses
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
from lab.experiments.errors import SettingsError
from lab.experiments.retention import RetentionSettings, run_retention
from lab.experiments.retention_model import Autoencoder, BottleneckDecoder, RegenerateTask, position_accuracy
from tmm.train import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]
TINY = ["tmm", "transformer", "hyena", "mamba2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_text("".join(f"Verse {i}: and it came to pass that line {i} was written.\n" for i in range(400)))
    return path


def tiny_encoder(arch, seq_len, vocab=256):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=vocab, max_len=seq_len)
    return tmm.models.build(cfg)


def test_regenerate_task_labels_are_the_input(corpus):
    lm = tmm.tasks.make("lm", corpus=str(corpus), seq_len=16, section_bytes=512)
    task = RegenerateTask(lm)
    g = torch.Generator().manual_seed(0)
    for draw in (task.batch, task.eval_batch):
        x, y = draw(4, g)
        assert torch.equal(x, y) and x.shape == (4, 16)
    # evaluation windows come from the lm task's held-out split
    x, _ = task.eval_batch(4, torch.Generator().manual_seed(1))
    assert torch.equal(x, lm.eval_batch(4, torch.Generator().manual_seed(1))[0])


@pytest.mark.parametrize("mode", ["batchnorm", "authors"])
@pytest.mark.parametrize("arch", TINY)
def test_frozen_encoder_stays_fixed_and_capacity_trains_it(arch, mode, corpus, restore_threads):
    torch.set_num_threads(1)
    task = RegenerateTask(tmm.tasks.make("lm", corpus=str(corpus), seq_len=16, section_bytes=512))
    cfg = TrainConfig(steps=3, batch_size=2, eval_every=3, eval_batches=1, progress=False, lr=1e-2, warmup=1)
    for frozen in (True, False):
        enc = tiny_encoder(arch, 16)
        before = {n: p.detach().clone() for n, p in enc.named_parameters()}
        ae = Autoencoder(enc, task.vocab_size, task.seq_len, frozen=frozen, mode=mode, d=32, layers=1,
                         position=-1 if mode == "batchnorm" else -2)
        dec_before = ae.decoder.head.weight.detach().clone()
        trainable = ae.num_parameters()
        assert trainable == ae.num_parameters(trainable_only=False) - (enc.num_parameters() if frozen else 0)
        train(ae, task, cfg)
        changed = [n for n, p in enc.named_parameters() if not torch.equal(p, before[n])]
        assert not torch.equal(ae.decoder.head.weight, dec_before)
        if frozen:
            assert changed == []
        else:
            assert len(changed) > 0


def test_only_the_chosen_state_reaches_the_decoder(restore_threads):
    enc = tiny_encoder("tmm", 16, vocab=64)
    ae = Autoencoder(enc, 64, 16, frozen=True, d=32, layers=1).eval()
    ids = torch.randint(0, 64, (2, 16))
    other = ids.clone()
    other[:, :-1] = (other[:, :-1] + 1) % 64
    # position -1 of a causal encoder sees every token: a change anywhere changes the output ...
    assert not torch.allclose(ae(ids).logits, ae(other).logits)
    # ... and the output is a function of that one vector only
    z = enc.hidden_states(ids)[:, -1]
    assert torch.allclose(ae(ids).logits, ae.decoder(z))
    none = Autoencoder(None, 64, 16, d_in=32, d=32, layers=1).eval()
    assert torch.allclose(none(ids).logits, none(other).logits)  # the baseline sees nothing
    acc = position_accuracy(ae, [(ids, ids)])
    assert len(acc) == 16 and all(0.0 <= a <= 1.0 for a in acc)
    with pytest.raises(ValueError, match="heads"):
        BottleneckDecoder(32, 64, 16, d=30, heads=4)
    with pytest.raises(ValueError, match="d_in"):
        Autoencoder(None, 64, 16)


@pytest.mark.timeout(240)
def test_retention_driver_smoke(corpus, tmp_path, restore_threads):
    configs = ",".join(str(REPO / "models" / f"{a}-tiny.json") for a in TINY)
    out = tmp_path / "ret"
    settings = RetentionSettings(configs=configs, corpus=str(corpus), task_option=["section_bytes=512"], n=16,
                                 pretrain_steps=4, steps=4, batch_size=2, decoder_d=32, decoder_layers=1,
                                 final_eval_batches=2, eval_batches=1, threads=1, out=str(out), no_progress=True,
                                 save_encoders=True)
    result = run_retention(settings)
    summary = json.loads((out / "summary.json").read_text())
    table = summary["table"]
    assert [(r["mode"], r["arch"]) for r in table] == [(m, a) for m in ("extraction", "capacity") for a in TINY + ["none"]]
    for r in table:
        assert r["status"] == "done" and r["steps"] == 4 and 0.0 <= r["token_acc"] <= 1.0
        assert (r["lm_eval_bpb"] is not None) == (r["mode"] == "extraction" and r["arch"] != "none")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {r["phase"] for r in rows} == {"pretrain", "extraction", "capacity"}
    for a in TINY:  # the saved encoders load back
        assert tmm.models.load(out / "encoders" / a).num_parameters() > 0
    md = (out / "summary.md").read_text()
    assert "| mode | arch |" in md and "extraction:" in md
    pytest.importorskip("matplotlib")
    for name in ("retention_vs_steps.png", "retention_by_position.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
    assert result.verdicts == summary["verdicts"] and result.verdicts[1].startswith("capacity:")
    assert summary["args"]["modes"] == ["extraction", "capacity"] and summary["args"]["out"] == str(out)


def test_settings_errors_name_the_flag():
    with pytest.raises(SettingsError, match="--modes: expected a comma-separated subset"):
        RetentionSettings(modes="extraction,nope").checked()
    with pytest.raises(SettingsError, match="--steps must be >= 1, got 0"):
        RetentionSettings(steps=0).checked()
    assert RetentionSettings(modes="capacity").checked().modes == ["capacity"]


@pytest.mark.timeout(180)
def test_retention_script_command_line(corpus, tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, str(REPO / "scripts" / "retention.py"), "--modes", "capacity", "--configs",
           str(REPO / "models" / "tmm-tiny.json"), "--corpus", str(corpus), "--task-option", "section_bytes=512",
           "--n", "8", "--steps", "2", "--batch-size", "2", "--decoder-d", "16", "--decoder-layers", "1",
           "--final-eval-batches", "1", "--eval-batches", "1", "--threads", "1", "--out", str(out), "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "| mode | arch |" in proc.stdout and "capacity: tmm" in proc.stdout
    assert [r["arch"] for r in json.loads((out / "summary.json").read_text())["table"]] == ["tmm", "none"]
    bad = subprocess.run(cmd[:2] + ["--encoder", "tmm"], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env=env)
    assert bad.returncode == 2 and "--encoder expects ARCH=CHECKPOINT, got 'tmm'" in bad.stderr


@pytest.mark.timeout(240)
def test_resume_keeps_finished_runs_and_refuses_other_settings(corpus, tmp_path, restore_threads):
    out = tmp_path / "res"
    settings = RetentionSettings(modes="capacity", configs=str(REPO / "models" / "tmm-tiny.json"), corpus=str(corpus),
                                 task_option=["section_bytes=512"], n=8, steps=2, batch_size=2, decoder_layers=1,
                                 eval_batches=1, final_eval_batches=1, threads=1, out=str(out), no_progress=True)
    first = run_retention(settings)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    again = run_retention(dataclasses.replace(settings, resume=True))  # everything finished: nothing runs
    assert (out / "metrics.jsonl").read_text().splitlines() == lines
    assert [r["token_acc"] for r in again.table] == [r["token_acc"] for r in first.table]
    assert any(n.startswith("resumed: 2 finished") for n in again.notes)
    # an attempt interrupted after its first run: only the missing one runs
    summary = json.loads((out / "summary.json").read_text())
    summary["runs"] = summary["runs"][:1]
    (out / "summary.json").write_text(json.dumps(summary))
    third = run_retention(dataclasses.replace(settings, resume=True))
    new = (out / "metrics.jsonl").read_text().splitlines()[len(lines):]
    assert new and {json.loads(line)["arch"] for line in new} == {"none"}
    assert [r["arch"] for r in third.table] == ["tmm", "none"] and third.table[0] == first.table[0]
    with pytest.raises(SettingsError, match="--resume: give the settings of the run being resumed; it differs in "
                                            "--steps: the run had 2, this command 3"):
        run_retention(dataclasses.replace(settings, resume=True, steps=3))
    with pytest.raises(SettingsError, match="--resume needs --out"):
        RetentionSettings(resume=True).checked()


def test_capacity_on_random_tokens_in_bits_until_the_loss_levels_off(tmp_path, restore_threads):
    out = tmp_path / "bits"
    settings = RetentionSettings(modes="capacity", mode="authors", configs=str(REPO / "models" / "tmm-tiny.json"),
                                 source="random", random_vocab=8, n=8, steps=40, batch_size=4, decoder_layers=1,
                                 eval_batches=1, final_eval_batches=2, level_off=True, threads=1, out=str(out),
                                 no_progress=True)
    result = run_retention(settings)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == {"seq_len": 8, "vocab": 8} and summary["args"]["decoder_heads"] == 4
    runs = {r["arch"]: r for r in summary["runs"]}
    for r in runs.values():
        # bits recovered = sum over positions of log2 V - CE / ln 2, from the per-position loss
        assert len(r["position_loss"]) == 8
        assert r["bits_recovered"] == pytest.approx(sum(3.0 - ce / math.log(2) for ce in r["position_loss"]))
        assert r["steps"] <= 40 and (r["levelled"] is None) == (r["steps"] == 40)
    assert [r["arch"] for r in result.table] == ["tmm", "none"] and "bits recovered" in result.markdown
    assert "levelled off" in (out / "summary.md").read_text() or all(r["steps"] == 40 for r in runs.values())
    pytest.importorskip("matplotlib")
    assert (out / "retention_loss_by_position.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_random_source_settings():
    with pytest.raises(SettingsError, match="--source random applies to --modes capacity only"):
        RetentionSettings(source="random").checked()
    with pytest.raises(SettingsError, match="--source: expected one of corpus, random"):
        RetentionSettings(source="noise").checked()
    with pytest.raises(SettingsError, match="--decoder-heads must be an integer >= 1 \\(mode batchnorm\\)"):
        RetentionSettings(decoder_heads=0).checked()
    assert RetentionSettings(mode="authors", decoder_heads=0).checked().decoder_heads == 0  # the flat decoder
    assert RetentionSettings(mode="authors").checked().decoder_heads == 4


def test_a_run_saved_before_decoder_heads_resumes_only_as_the_flat_decoder(tmp_path, restore_threads):
    out = tmp_path / "old"
    settings = RetentionSettings(modes="capacity", mode="authors", configs=str(REPO / "models" / "tmm-tiny.json"),
                                 source="random", random_vocab=8, n=8, steps=2, batch_size=2, decoder_layers=1,
                                 eval_batches=1, final_eval_batches=1, threads=1, out=str(out), no_progress=True)
    run_retention(settings)
    summary = json.loads((out / "summary.json").read_text())
    for key in ("decoder_heads", "source", "random_vocab", "level_off"):  # a summary written without these keys
        del summary["args"][key]
    summary["args"]["task_option"] = []
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SettingsError, match="--decoder-heads: the run had 0, this command 4"):
        run_retention(dataclasses.replace(settings, resume=True))
