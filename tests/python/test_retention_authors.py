"""The authors' mode of the retention harness (lab.experiments.retention,
mode "authors"): the unroll bottleneck against an independent rendering of
its formula, the raw last block's state at position -2, the masked-mixer
decoder, what is trained in each experiment, the mode's defaults and
errors, and smoke runs of both modes (library entry point and script)."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tmm.models
from lab.experiments.errors import SettingsError
from lab.experiments.retention import MODE_DEFAULTS, RetentionSettings, run
from lab.experiments.retention_model import (Autoencoder, MaskedMixerDecoder, UnrollBottleneck, last_block_states,
                                             unroll_indices)
from tmm.testing import assert_close

REPO = Path(__file__).resolve().parents[2]
TINY = ["tmm", "transformer", "hyena", "mamba2"]


def tiny_encoder(arch, seq_len, vocab=64, **overrides):
    cfg = json.loads((REPO / "models" / f"{arch}-tiny.json").read_text())
    cfg.update(vocab_size=vocab, max_len=seq_len, **overrides)
    return tmm.models.build(cfg)


def unroll_reference(h, weight, bias, seq_len):
    """Position i's input: W @ h[(i mod d) + arange(d/2) mod d] + b, one
    position at a time (B x d -> B x L x d_out), written for the test."""
    d = h.shape[1]
    rows = []
    for i in range(seq_len):
        window = torch.stack([h[:, (i % d + j) % d] for j in range(d // 2)], dim=1)  # B x d//2
        rows.append(window @ weight.T + bias)
    return torch.stack(rows, dim=1)


@pytest.mark.parametrize("d,seq_len", [(6, 13), (7, 5), (2, 3), (16, 16)])
def test_unroll_bottleneck_matches_the_formula(d, seq_len):
    torch.manual_seed(0)
    layer = UnrollBottleneck(d, seq_len, 5).double()
    h = torch.randn(3, d, dtype=torch.float64)
    out = layer(h)
    assert out.shape == (3, seq_len, 5)
    assert_close(out, unroll_reference(h, layer.proj.weight, layer.proj.bias, seq_len), torch.float64)
    # the index rows: position i starts at i mod d and wraps around the end of the vector
    idx = unroll_indices(d, seq_len)
    assert idx.shape == (seq_len, d // 2)
    for i in range(seq_len):
        assert idx[i].tolist() == [(i % d + j) % d for j in range(d // 2)]
    # non-contiguous input, an empty batch
    wide = torch.randn(3, 2 * d, dtype=torch.float64)
    assert_close(layer(wide[:, ::2]), layer(wide[:, ::2].contiguous()), torch.float64)
    assert layer(h[:0]).shape == (0, seq_len, 5)


def test_unroll_bottleneck_gradcheck_and_errors():
    torch.manual_seed(1)
    layer = UnrollBottleneck(5, 7, 3).double()
    h = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (h,))
    with pytest.raises(ValueError, match=r"expected B x 5, got \(2, 4\)"):
        layer(torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="d must be an int >= 2"):
        unroll_indices(1, 4)
    with pytest.raises(ValueError, match="d_in must be >= 2"):
        MaskedMixerDecoder(1, 10, 4)
    with pytest.raises(ValueError, match="layers must be a positive int, got 0"):
        MaskedMixerDecoder(8, 10, 4, layers=0)


def test_masked_mixer_decoder_is_the_authors():
    torch.manual_seed(2)
    dec = MaskedMixerDecoder(12, 50, 9, layers=3)
    assert len(dec.blocks) == 3 and dec.bottleneck.proj.in_features == 6 and dec.bottleneck.proj.out_features == 12
    for block in dec.blocks:  # their MixerHead: 4 heads, each its own masked matrix, projections around them
        assert block.mixer.variant == "masked" and block.mixer.heads == 4
        assert block.block_order == "mixer_first" and block.activation == "gelu"
        assert tuple(block.mixer.weight.shape) == (4, 9, 9)
        for proj in (block.mixer.in_proj, block.mixer.out_proj):  # nn.Linear's init, U(+-1/sqrt(12))
            assert proj.weight.abs().max() <= 1 / math.sqrt(12) and proj.bias.abs().max() <= 1 / math.sqrt(12)
    assert dec.head.bias is None
    z = torch.randn(4, 12)
    assert dec(z).shape == (4, 9, 50)
    assert MaskedMixerDecoder(12, 50, 9, d=20, layers=1)(z).shape == (4, 9, 50)
    flat = MaskedMixerDecoder(12, 50, 9, layers=1, heads=0)  # the flat variant (this harness's decoder before)
    assert flat.blocks[0].mixer.heads == 0 and tuple(flat.blocks[0].mixer.weight.shape) == (1, 9, 9)
    with pytest.raises(ValueError, match="heads must be 0"):
        MaskedMixerDecoder(12, 50, 9, heads=5)


def test_each_head_mixes_only_its_channels_causally():
    torch.manual_seed(4)
    mixer = MaskedMixerDecoder(8, 10, 6, layers=1).blocks[0].mixer
    x = torch.randn(1, 6, 8)
    h = mixer.in_proj(x)
    y = x.new_zeros(1, 6, 8)
    for g in range(4):  # head g: its own lower-triangular matrix over positions, on channels 2g, 2g + 1
        m = mixer.weight[g, :6, :6].tril()
        y[0, :, 2 * g:2 * g + 2] = m @ h[0, :, 2 * g:2 * g + 2] + mixer.bias[g, :6, None]
    assert torch.allclose(mixer(x), mixer.out_proj(y), atol=1e-6)


@pytest.mark.parametrize("arch", TINY)
def test_authors_mode_reads_the_last_blocks_state_at_minus_2(arch, restore_threads):
    torch.set_num_threads(1)
    torch.manual_seed(3)
    enc = tiny_encoder(arch, 16)
    ae = Autoencoder(enc, 64, 16, frozen=True, position=-2, mode="authors", layers=1).eval()
    ids = torch.randint(0, 64, (2, 16))
    z = ae.encode(ids)
    assert z.shape == (2, 32)
    assert torch.equal(z, last_block_states(enc, ids)[:, -2])
    assert ae.state == "raw last block"
    assert torch.allclose(ae(ids).logits, ae.decoder(z))
    # a causal encoder's state at -2 has not seen the last token
    other = ids.clone()
    other[:, -1] = (other[:, -1] + 1) % 64
    assert torch.equal(ae(ids).logits, ae(other).logits)
    other[:, 0] = (other[:, 0] + 1) % 64
    assert not torch.allclose(ae(ids).logits, ae(other).logits)


@pytest.mark.parametrize("arch", TINY)
def test_the_state_is_the_last_block_before_any_final_norm(arch):
    torch.manual_seed(4)
    enc = tiny_encoder(arch, 12, final_norm=True) if arch in ("tmm", "hyena") else tiny_encoder(arch, 12)
    ids = torch.randint(0, 64, (3, 12))
    raw = last_block_states(enc, ids)
    assert_close(enc.final_norm_module()(raw), enc.hidden_states(ids), torch.float32)  # the norm bypassed
    assert not torch.allclose(raw, enc.hidden_states(ids))
    ae = Autoencoder(enc, 64, 12, frozen=True, mode="authors", position=-2, layers=1)
    assert ae.encoder is enc and ae.state == "raw last block"
    assert all(not p.requires_grad for p in ae.encoder.parameters())


@pytest.mark.parametrize("arch", TINY)
def test_gradients_reach_the_encoder_only_in_capacity(arch, restore_threads):
    torch.set_num_threads(1)
    ids = torch.randint(0, 64, (3, 16))
    for frozen in (True, False):
        torch.manual_seed(5)
        enc = tiny_encoder(arch, 16)
        ae = Autoencoder(enc, 64, 16, frozen=frozen, position=-2, mode="authors", layers=2)
        before = {n: p.detach().clone() for n, p in enc.named_parameters()}
        opt = torch.optim.SGD([p for p in ae.parameters() if p.requires_grad], lr=0.1)
        ae(ids, ids).loss.backward()
        assert ae.decoder.bottleneck.proj.weight.grad.abs().sum() > 0
        grads = [n for n, p in enc.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0]
        opt.step()
        changed = [n for n, p in enc.named_parameters() if not torch.equal(p, before[n])]
        if frozen:  # extraction: nothing reaches the encoder, which stays as it was
            assert grads == [] and changed == [] and all(not p.requires_grad for p in enc.parameters())
        else:  # capacity: the bottleneck's gradient trains the encoder
            assert len(grads) > len(before) // 2 and len(changed) == len(grads)


def test_mode_defaults_and_errors_name_the_flag():
    s = RetentionSettings(mode="authors").checked()
    assert (s.decoder_d, s.decoder_layers, s.position, s.decoder_heads) == (None, 4, -2, 4)
    assert MODE_DEFAULTS["authors"] == {"decoder_d": None, "decoder_layers": 4, "position": -2, "decoder_heads": 4}
    s = RetentionSettings().checked()
    assert (s.mode, s.decoder_d, s.decoder_layers, s.position, s.decoder_heads) == ("batchnorm", 128, 2, -1, 4)
    assert RetentionSettings(mode="authors", decoder_layers=16).checked().decoder_layers == 16
    with pytest.raises(SettingsError, match="--mode: expected one of batchnorm, authors, got 'nope'"):
        RetentionSettings(mode="nope").checked()
    with pytest.raises(SettingsError, match=r"--position must be an integer in \[-8, 7\] \(--n 8\), got 8"):
        RetentionSettings(mode="authors", n=8, position=8).checked()
    with pytest.raises(SettingsError, match="--decoder-layers must be >= 1, got 0"):
        RetentionSettings(mode="authors", decoder_layers=0).checked()
    with pytest.raises(SettingsError, match="--decoder-d must be an integer, got 2.5"):
        RetentionSettings(decoder_d=2.5).checked()
    with pytest.raises(SettingsError, match="unknown setting.*bogus"):
        run({"bogus": 1})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_text("".join(f"Verse {i}: and it came to pass that line {i} was written.\n" for i in range(400)))
    return path


@pytest.mark.timeout(240)
def test_run_entry_point_in_authors_mode(corpus, tmp_path, restore_threads):
    out = tmp_path / "lib"
    summary = run({"mode": "authors", "configs": f"{REPO / 'models' / 'tmm-tiny.json'},"
                                                 f"{REPO / 'models' / 'transformer-tiny.json'}",
                   "corpus": str(corpus), "task_option": ["section_bytes=512"], "n": 8, "pretrain_steps": 2,
                   "steps": 2, "batch_size": 2, "decoder_layers": 1, "eval_batches": 1, "final_eval_batches": 1,
                   "threads": 1, "out": str(out), "no_progress": True})
    assert summary["out"] == str(out) and summary["decoder_mode"] == "authors"
    assert summary["args"]["position"] == -2 and summary["args"]["decoder_layers"] == 1
    table = summary["table"]
    assert [(r["mode"], r["arch"]) for r in table] == [(m, a) for m in ("extraction", "capacity")
                                                       for a in ("tmm", "transformer", "none")]
    states = {(r["mode"], r["arch"]): r["state"] for r in table}
    assert states[("capacity", "tmm")] == "raw last block"
    assert states[("capacity", "transformer")] == "raw last block" and states[("capacity", "none")] is None
    for r in table:
        assert r["status"] == "done" and r["steps"] == 2 and 0.0 <= r["token_acc"] <= 1.0
        assert r["decoder_mode"] == "authors" and r["decoder_params"] > 0
    md = (out / "summary.md").read_text()
    assert "decoder mode authors" in md.splitlines()[0] and "unrolled" in md and "| state read |" in md
    assert "| mode | arch |" in summary["markdown"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["authors", "batchnorm"])
def test_script_runs_each_mode(mode, corpus, tmp_path):
    out = tmp_path / mode
    cmd = [sys.executable, str(REPO / "scripts" / "retention.py"), "--mode", mode, "--configs",
           str(REPO / "models" / "tmm-tiny.json"), "--corpus", str(corpus), "--task-option", "section_bytes=512",
           "--n", "8", "--pretrain-steps", "2", "--steps", "2", "--batch-size", "2", "--decoder-layers", "1",
           "--final-eval-batches", "1", "--eval-batches", "1", "--threads", "1", "--out", str(out), "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "extraction: tmm" in proc.stdout and "capacity: tmm" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["decoder_mode"] == mode and summary["args"]["mode"] == mode
    assert summary["args"]["position"] == MODE_DEFAULTS[mode]["position"]
    assert {r["state"] for r in summary["table"] if r["arch"] == "tmm"} == {
        "raw last block" if mode == "authors" else "head input"}
    assert f"decoder mode {mode}" in (out / "summary.md").read_text()


def test_script_errors_name_the_flag():
    """argparse's error for --mode, the settings' (printed by argparse too) for the rest."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    script = [sys.executable, str(REPO / "scripts" / "retention.py")]
    for args, message in ((["--mode", "nope"], "argument --mode: invalid choice: 'nope'"),
                          (["--mode", "authors", "--n", "8", "--position", "-9"],
                           "--position must be an integer in [-8, 7] (--n 8), got -9")):
        bad = subprocess.run(script + args, cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
