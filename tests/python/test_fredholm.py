"""lab.analysis.fredholm: winding numbers and Fredholm indices of Toeplitz
symbols on known kernels, robustness near zero, the model analysis, and its
driver (lab.experiments.operator_index, scripts/fredholm.py) with the
initial vectors it compares trained ones against.

Convention under test (module docstring): y = T x, T[t, s] = w[t - s];
phi(z) = sum_k w_k z^-k; index = winding(phi) = -(zeros of sum_k w_k z^k
inside the unit disk). A one-step shift: winding -1, index -1."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tmm.models
from lab.analysis import analyse_model, plot_symbols, symbol, to_jsonable, winding_number
from lab.experiments import operator_index
from lab.experiments.errors import SettingsError

REPO = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")


def unit(k, n=16):
    w = torch.zeros(n, dtype=torch.float64)
    w[k] = 1.0
    return w


def test_symbol_is_the_dft():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(12, generator=g, dtype=torch.float64)
    for points in (64, 12, 5):  # zero-padded, exact, folded (fewer points than taps)
        theta = 2 * math.pi * torch.arange(points, dtype=torch.float64) / points
        k = torch.arange(12, dtype=torch.float64)
        direct = (w[None, :] * torch.exp(-1j * k[None, :] * theta[:, None])).sum(dim=1)
        assert torch.allclose(symbol(w, points), direct, atol=1e-12)
    assert symbol(w).shape == (4096,)
    assert symbol(torch.randn(3, 2, 12), 32).shape == (3, 2, 32)


def test_shift_has_index_minus_one():
    for w in (unit(1, 2), unit(1, 64), -3.0 * unit(1, 512)):
        r = winding_number(w)
        assert (r["winding"], r["index"]) == (-1, -1)
        assert not r["near_zero"]
        assert r["min_modulus"] == pytest.approx(r["max_modulus"])


def test_z_minus_two_and_more():
    assert (winding_number(unit(2))["winding"], winding_number(unit(2))["index"]) == (-2, -2)
    assert winding_number(unit(7, 64))["index"] == -7
    assert winding_number(unit(0))["index"] == 0  # identity


def test_lag0_dominated_has_index_zero():
    g = torch.Generator().manual_seed(1)
    for n in (2, 16, 256):
        w = torch.randn(n, generator=g, dtype=torch.float64)
        w[0] = 1.05 * w[1:].abs().sum() + 0.1  # |w_0| > sum of the rest: Rouche
        r = winding_number(w)
        assert (r["winding"], r["index"], r["near_zero"]) == (0, 0, False)
    # a shift with a dominant identity on top is still invertible
    assert winding_number(unit(0) * 2 + unit(1))["index"] == 0
    # ... and a dominant shift with a small identity is still a shift
    assert winding_number(unit(0) * 0.5 + unit(1))["index"] == -1


def test_matches_zeros_inside_the_disk():
    g = torch.Generator().manual_seed(2)
    checked = 0
    for n in (4, 9, 24, 64):
        for _ in range(4):
            w = torch.randn(n, generator=g, dtype=torch.float64)
            r = winding_number(w)
            roots = np.roots(w.numpy()[::-1])  # a(z) = sum_k w_k z^k, highest degree first
            if np.abs(np.abs(roots) - 1).min() < 1e-6:
                continue
            assert r["index"] == -int((np.abs(roots) < 1).sum()), (n, r)
            assert abs(r["winding_exact"] - r["winding"]) < 1e-6
            checked += 1
    assert checked >= 12


def test_near_zero_flag():
    r = winding_number([1.0, 1.0])  # phi(-1) = 0
    assert r["near_zero"] and r["min_modulus"] < 1e-12 and r["max_modulus"] == pytest.approx(2.0)
    r = winding_number([1.0, 1.0], points=4095)  # theta = pi not sampled: still flagged
    assert r["near_zero"] and r["min_modulus"] < 1e-3
    r = winding_number([1.0, 0.0, 1.0 - 1e-5])  # zeros just inside the circle
    assert r["near_zero"] and isinstance(r["winding"], int)
    assert not winding_number([1.0, 0.5])["near_zero"]
    assert winding_number(torch.zeros(4))["near_zero"]


def test_refines_sampling_for_zeros_close_to_the_circle():
    # a(z) = (z - r e^{ia}) (z - r e^{-ia}): two zeros inside (r < 1) or outside (r > 1)
    def pair(r, a=0.3):
        return [r * r, -2 * r * math.cos(a), 1.0]

    inside = winding_number(pair(1 - 1e-3), points=64, rel_tol=1e-9)
    assert inside["index"] == -2 and inside["points"] > 64 and not inside["near_zero"]
    outside = winding_number(pair(1 + 1e-3), points=64, rel_tol=1e-9)
    assert outside["index"] == 0 and outside["points"] > 64 and not outside["near_zero"]
    # too close to resolve within the refinement cap: flagged, still reported
    close = winding_number(pair(1 - 1e-7), points=64, rel_tol=1e-9)
    assert close["near_zero"] and close["max_phase_step"] > math.pi / 2
    # the default sampling (max(4096, 8n), refined) still finds the index
    assert winding_number(pair(1 - 1e-5), rel_tol=1e-9)["index"] == -2


def tiny(**extra):
    cfg = {"arch": "tmm", "vocab_size": 16, "d_model": 8, "n_layers": 2, "max_len": 16, "heads": 2}
    cfg.update(extra)
    return tmm.models.build(cfg)


def test_analyse_random_model():
    model = tmm.models.build("tmm-tiny")
    res = analyse_model(model)
    cfg = model.config
    assert len(res) == cfg["n_layers"] * cfg["heads"]
    layers, heads = cfg["n_layers"], cfg["heads"]
    assert [(r["layer"], r["head"]) for r in res] == [(i, g) for i in range(layers) for g in range(heads)]
    for r in res:
        assert isinstance(r["index"], int) and r["index"] == r["winding"]
        assert r["n"] == cfg["max_len"] and r["min_modulus"] <= r["max_modulus"]
    json.dumps(to_jsonable(res))  # JSON once the vectors are dropped


def test_analyse_sees_a_trained_like_shift():
    model = tiny(kernel=2)
    with torch.no_grad():
        w = dict(model.named_parameters())["blocks.1.mixer.weight"]  # G x K x N
        w.zero_()
        w[0, 1, 1] = 1.0  # head 0, tap 1: a one-step shift
        w[1, :, 0] = 2.0  # head 1: lag-0 taps
        w[1, :, 3] = 0.5
    res = [r for r in analyse_model(model) if r["layer"] == 1]
    assert len(res) == 4
    got = {(r["head"], r["tap"]): r for r in res}
    assert got[(0, 1)]["index"] == -1 and not got[(0, 1)]["near_zero"]
    assert got[(0, 0)]["near_zero"]  # an all-zero kernel: no symbol to speak of
    assert got[(1, 0)]["index"] == 0 and got[(1, 1)]["index"] == 0
    # a state dict works too
    assert [r["index"] for r in analyse_model(model.state_dict())] == [r["index"] for r in analyse_model(model)]


def test_analyse_variants():
    flat = analyse_model(tiny(heads=0))
    assert len(flat) == 2 and {r["head"] for r in flat} == {0}
    expanded = analyse_model(tiny(mixer="expanded"))
    assert sorted({(r["layer"], r["param"]) for r in expanded}) == [
        (0, "weight"), (0, "weight2"), (1, "weight"), (1, "weight2")]
    assert len(analyse_model(tiny(mixer="frozen"))) == 4  # buffers, analysed too
    masked = analyse_model(tiny(mixer="masked"))
    assert len(masked) == 2 and all("masked" in r["skipped"] for r in masked)
    with pytest.raises(ValueError, match="transformer"):
        analyse_model(tmm.models.build("transformer-tiny"))


def test_plot(tmp_path):
    res = analyse_model(tiny())
    png = tmp_path / "sym.png"
    plot_symbols(res, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with pytest.raises(ValueError, match="lack"):
        plot_symbols(to_jsonable(res), tmp_path / "x.png")


def test_operator_index_driver(tmp_path):
    ckpt = tmp_path / "ckpt"
    tiny().save(ckpt)
    report = operator_index.analyse(checkpoint=str(ckpt))
    assert report.label == "ckpt" and report.source == {"checkpoint": str(ckpt.resolve())}
    assert "winding" in report.table and "index" in report.table
    assert report.summary["vectors"] == 4 and sum(report.summary["index_counts"].values()) <= 4
    written = report.write(tmp_path / "out", plot=False)
    assert written == [tmp_path / "out" / "fredholm.json"]
    data = json.loads(written[0].read_text())
    assert len(data["results"]) == 4 and data["convention"] == operator_index.CONVENTION
    demo = operator_index.analyse(config="tmm-tiny", seed=3)
    assert demo.source == {"config": "tmm-tiny", "untrained": True, "seed": 3}
    assert operator_index.default_out(demo, None, tmp_path) == tmp_path / "fredholm-tmm-tiny"
    with pytest.raises(SettingsError, match="only TMM"):
        operator_index.analyse(config="transformer-tiny")
    with pytest.raises(SettingsError, match="exactly one"):
        operator_index.analyse()
    with pytest.raises(SettingsError, match="exactly one"):
        operator_index.analyse(config="tmm-tiny", initial=tmp_path)


def test_initial_vectors_are_saved_and_movement_ignores_scale(tmp_path):
    torch.manual_seed(0)
    model = tmm.models.build("tmm-tiny")
    assert operator_index.save_initial_vectors(model, tmp_path) == tmp_path / operator_index.INITIAL_VECTORS
    start = operator_index.analyse(initial=tmp_path)
    assert start.config == model.config and start.summary["vectors"] == 2 * 4
    model.save(tmp_path / "ckpt")
    now = operator_index.analyse(checkpoint=str(tmp_path / "ckpt"))
    assert operator_index.movement(now, start) == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("mixer.weight"):
                p.mul_(0.5)  # weight decay's shrinking: no index changes, no movement
    model.save(tmp_path / "ckpt")
    assert operator_index.movement(operator_index.analyse(checkpoint=str(tmp_path / "ckpt")), start) \
        == pytest.approx(0.0, abs=1e-7)
    turned = [dict(r, w=torch.roll(r["w"], 1)) for r in start.results]  # a shift of a random vector: ~orthogonal
    assert operator_index.movement(operator_index.OperatorIndexReport("t", {}, {}, 0, turned, {}), start) > 0.5
    assert operator_index.save_initial_vectors(tmm.models.build("transformer-tiny"), tmp_path / "t") is None
    assert operator_index.save_initial_vectors(tmm.models.build({**model.config, "mixer": "masked"}),
                                               tmp_path / "m") is None
    with pytest.raises(SettingsError, match="no initial Toeplitz vectors"):
        operator_index.analyse(initial=tmp_path / "m")


def test_fredholm_script_command_line(tmp_path):
    ckpt = tmp_path / "ckpt"
    tiny().save(ckpt)
    script = [sys.executable, str(REPO / "scripts" / "fredholm.py")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(script + [str(ckpt), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "winding" in proc.stdout and "# index counts" in proc.stdout
    assert f"wrote {tmp_path / 'out' / 'fredholm.json'}" in proc.stdout
    assert (tmp_path / "out" / "fredholm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(json.loads((tmp_path / "out" / "fredholm.json").read_text())["results"]) == 4
    proc = subprocess.run(script + ["--demo", "--out", str(tmp_path / "demo"), "--no-plot"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "demo" / "fredholm.json").read_text())["source"]["config"] == "tmm-tiny"
    assert not (tmp_path / "demo" / "fredholm.png").exists()
    bad = subprocess.run(script + ["--demo", "--config", "tmm-tiny"], capture_output=True, text=True, timeout=60,
                         env=env)
    assert bad.returncode == 2 and "exactly one" in bad.stderr
