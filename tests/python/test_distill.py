"""tmm.distill and decode method "distilled" from Python and the CLI: exact
recovery through fit_modal, start_decoding / decode / generate with order
and window, a state of fixed size, saving beside a checkpoint (tmm.models.load
and `tmm generate` pick it up), errors, and the report script's quick mode.
A distilled Hyena with active modes (a window shorter than the context)
decodes as the Hyena formulas (test_models_hyena_reference) with each long
convolution's kernel replaced by the fitted one (materialize()), in float64.
The C++ tests (tests/cpp/test_distill.cpp) cover the decoder's exactness."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tmm
import tmm.distill as D
import tmm.models as M
from tmm.testing import rel_err, tolerance

from test_models_hyena_reference import AUTHORS, randomised, reference_logits

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("TMM_CLI", REPO / "build" / "bin" / "tmm"))


def _model(arch="tmm", **extra):
    torch.manual_seed(0)
    config = {"arch": arch, "vocab_size": 31, "d_model": 16, "n_layers": 2, "max_len": 64, **extra}
    return M.build(config).eval()


def test_fit_modal_recovers_a_sum_of_exponentials():
    torch.manual_seed(1)
    lam = torch.polar(torch.rand(3, 4, dtype=torch.float64) * 0.4 + 0.5, torch.rand(3, 4, dtype=torch.float64) + 0.3)
    res = torch.complex(torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64))
    w = D.modal_kernel(lam, res, 100)
    fit = D.fit_modal(w, order=4, steps=0)
    assert fit["error"].max() < 1e-8
    assert (fit["lambda"].abs() < 1).all()
    with pytest.raises(RuntimeError, match="order: expected >= 1, got 0"):
        D.fit_modal(w, order=0)


@pytest.mark.parametrize("arch,extra", [("tmm", {"heads": 2, "kernel": 2}), ("hyena", {"filter_order": 8})])
def test_distilled_decoding_from_python(arch, extra):
    m = _model(arch, **extra)
    d = D.distill(m, order=8, window=4, steps=20)
    assert D.of(m) is not None and (d.order, d.window) == (8, 4)
    names = d.names()
    assert names == sorted(names) and names[0].startswith("blocks.0.mixer.")
    k = d.kernel(names[0])
    assert k["lambda"].shape[-1] == 8 and k["taps"].shape[-1] == 4 and (k["lambda"].abs() < 1).all()
    assert d.materialize(names[0], 64).shape[-1] == 64
    ids = torch.randint(31, (2, 40))
    state = m.start_decoding(2, 40, method="distilled")
    assert state.method == "distilled"
    logits = [m.decode(state, ids[:, :8])]
    sizes = {state.state_bytes}
    for t in range(8, 40):
        logits.append(m.decode(state, ids[:, t:t + 1]))
        sizes.add(state.state_bytes)
    assert len(sizes) == 1  # the same tensors all along
    cached = m.start_decoding(2, 40, method="cached")
    assert cached.state_bytes > 0
    # Random kernels are not low order: only the shape here (exactness: tests/cpp/test_distill.cpp).
    assert torch.cat(logits, 1).shape == m(ids).shape and torch.cat(logits, 1).isfinite().all()
    out = m.generate([1, 2, 3], max_new_tokens=5, temperature=0, method="distilled")
    assert out["method"] == "distilled" and len(out["tokens"]) == 5


@pytest.mark.parametrize("window", [0, 4])
def test_distilled_hyena_with_active_modes_is_the_formulas_with_the_fitted_kernels(window, one_thread):
    L, prompt = 24, 3
    cfg = {"arch": "hyena", "vocab_size": 23, "d_model": 8, "n_layers": 2, "max_len": L, "filter_order": 8,
           "emb_dim": 5, "filter_sin_freq": 10.0}  # a rough filter: the modes do not fit it exactly
    torch.manual_seed(0)
    m = M.build(cfg).to(torch.float64).eval()
    P = randomised(m)
    d = D.distill(m, order=3, window=window, steps=5)
    filters = {name.removesuffix("filter"): d.materialize(name, L)[:, 0].T for name in d.names()}  # L x d each
    assert max(float(d.kernel(n)["error"].max()) for n in d.names()) > 1e-3  # not the model's own kernels
    ids = torch.randint(0, cfg["vocab_size"], (2, L), generator=torch.Generator().manual_seed(3))
    state = m.start_decoding(2, L, method="distilled")
    with torch.no_grad():
        got = torch.cat([m.decode(state, ids[:, :prompt])] + [m.decode(state, ids[:, t:t + 1])
                                                              for t in range(prompt, L)], 1)
        expected = reference_logits({**AUTHORS, **cfg}, P, ids, filters)
        exact = reference_logits({**AUTHORS, **cfg}, P, ids)
    assert rel_err(got, exact) > 1e3 * tolerance(torch.float64)  # the modes change the logits
    assert rel_err(got, expected) <= tolerance(torch.float64), rel_err(got, expected)


def test_order_and_window_fit_on_demand_and_errors():
    m = _model()
    with pytest.raises(RuntimeError, match="has no distillation"):
        m.start_decoding(1, 8, method="distilled")
    m.start_decoding(1, 8, method="distilled", order=3, window=2)
    assert (D.of(m).order, D.of(m).window) == (3, 2)
    out = m.generate([1, 2], max_new_tokens=3, temperature=0, method="distilled", window=5)
    assert D.of(m).window == 5 and D.of(m).order == 16 and len(out["tokens"]) == 3
    with pytest.raises(ValueError, match='options of method="distilled"'):
        m.start_decoding(1, 8, method="cached", order=4)
    with pytest.raises(RuntimeError, match="window: expected <= the kernels' length 64"):
        D.distill(m, order=4, window=65)
    with pytest.raises(RuntimeError, match="no long convolution kernels"):
        D.distill(M.build({"arch": "transformer", "vocab_size": 31, "d_model": 16, "n_layers": 1, "max_len": 16,
                           "n_heads": 2}))
    D.attach(m, None)
    assert D.of(m) is None


def _cli():
    if not CLI.exists():
        pytest.fail(f"{CLI} was not built (scripts/test.sh builds it)")
    return str(CLI)


def _run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{args}:\n{r.stdout}\n{r.stderr}"
    return r


def test_saved_beside_the_checkpoint_and_served_by_the_cli(tmp_path):
    m = _model("hyena", filter_order=8, vocab_size=256)
    m.save(tmp_path)
    r = _run(_cli(), "distill", "--model", tmp_path, "--order", 6, "--window", 3, "--fit-steps", 5)
    assert "blocks.1.mixer.filter" in r.stdout and D.saved(tmp_path)
    info = json.loads((tmp_path / "distilled.json").read_text())
    assert (info["order"], info["window"]) == (6, 3)
    loaded = M.load(tmp_path)
    d = D.of(loaded)
    assert d is not None and (d.order, d.window) == (6, 3)
    expected = loaded.generate(list(b"abc"), max_new_tokens=6, temperature=0, method="distilled")["tokens"]
    r = _run(_cli(), "generate", "--model", tmp_path, "--prompt", "abc", "--greedy", "--max-new-tokens", 6,
             "--method", "distilled")
    assert r.stdout == tmm.text.Tokenizer.byte_level().decode(expected) + "\n"
    assert "method distilled" in r.stderr and "[tmm] distilled" not in r.stderr  # served as saved, no refit
    bench = _run(_cli(), "bench-decode", "--model", tmp_path, "--contexts", "8,32", "--steps", 2, "--methods",
                 "cached,distilled").stdout
    rows = [ln.split() for ln in bench.splitlines() if ln.startswith(("cached", "distilled"))]
    distilled = [int(r[-1]) for r in rows if r[0] == "distilled"]
    cached = [int(r[-1]) for r in rows if r[0] == "cached"]
    assert len(distilled) == 2 and distilled[0] == distilled[1]  # independent of the context
    assert cached[1] > cached[0]


def test_report_quick(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "distill_report.py"), "--quick", "--out", tmp_path,
                        "--cli", _cli(), "--threads", "1"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["quality"]) == {"tmm-copy", "tmm-lm", "hyena-copy", "hyena-lm"}
    assert len(results["quality"]["tmm-lm"]["rows"]) == 4
    methods = {row["method"] for row in results["latency"]}
    assert methods == {"cached", "fast", "distilled"}
    assert (tmp_path / "latency.png").exists() and "| r | W |" in (tmp_path / "table.md").read_text()
