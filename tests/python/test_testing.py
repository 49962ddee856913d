"""tmm.testing: the tolerance table, the error metric, the inputs, and that
it imports without the native build."""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tmm import testing

REPO = Path(__file__).resolve().parents[2]


def test_tolerance_table_is_the_json_file():
    table = json.loads((REPO / "tmm" / "tolerances.json").read_text())
    assert "_doc" in table
    assert {str(d).replace("torch.", ""): v for d, v in testing.TOLERANCE.items()} == \
        {k: v for k, v in table.items() if not k.startswith("_")}
    assert testing.tolerance("bfloat16") == testing.tolerance(torch.bfloat16) == table["bfloat16"]
    with pytest.raises(KeyError, match="int32"):
        testing.tolerance(torch.int32)


def test_rel_err_is_max_norm_relative():
    e = torch.tensor([1.0, -4.0, 2.0])
    assert testing.rel_err(e + torch.tensor([0.0, 0.0, 0.4]), e) == pytest.approx(0.1)
    assert testing.rel_err(torch.zeros(0, 3), torch.zeros(0, 3)) == 0.0
    assert testing.rel_err(torch.tensor([0.5]), torch.tensor([0.0])) == 0.5  # absolute where expected is zero
    assert testing.rel_err(torch.tensor([1.0, math.nan, 2.0]), e) == math.inf
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        testing.rel_err(torch.zeros(2), torch.zeros(3))


def test_step_tolerance_is_the_tables_step_row():
    table = json.loads((REPO / "tmm" / "tolerances.json").read_text())
    assert testing.step_tolerance(torch.bfloat16) == testing.step_tolerance("bfloat16") == \
        table["_autocast_step_bfloat16"]
    with pytest.raises(KeyError, match="_autocast_step_float32"):
        testing.step_tolerance(torch.float32)


def test_grad_errors_judge_each_gradient_on_its_own_scale():
    """A wholly wrong small gradient fails, though pooled with a large one
    it would pass; a tiny one is judged against tol x the largest scale."""
    f64 = {"dtype": torch.float64}
    ref = {"weight": torch.full((4, 4), 1.0, **f64), "bias": torch.full((4,), 0.1, **f64),
           "norm": torch.full((4,), 0.01, **f64), "tiny": torch.full((3,), 1e-6, **f64)}
    ok = {"weight": ref["weight"] * 1.01, "bias": ref["bias"] * 1.01, "norm": ref["norm"] * 1.01, "tiny": -ref["tiny"]}
    errs = testing.assert_grads_close(ok, ref, tol=0.03)
    assert errs["weight"] == pytest.approx(0.01) and errs["bias"] == pytest.approx(0.01)
    # below the floor 0.03 x the largest scale (1.0): against the floor
    assert errs["norm"] == pytest.approx(1e-4 / 0.03) and errs["tiny"] == pytest.approx(2e-6 / 0.03)
    wrong = dict(ok, norm=torch.zeros(4, **f64))
    pooled = testing.rel_err(torch.cat([g.flatten() for g in wrong.values()]),
                             torch.cat([g.flatten() for g in ref.values()]))
    assert pooled <= 0.03  # what one pooled vector would have passed
    with pytest.raises(AssertionError, match=r"gradients: 1 of 4 above 3\.0e-02 .*: norm 3\.333e-01"):
        testing.assert_grads_close(wrong, ref, tol=0.03)
    assert testing.grad_errors(dict(ok, tiny=torch.tensor([1.0, math.nan, 0.0])), ref, 0.03)["tiny"] == math.inf
    # on a gradient that is ~0, an absolute error above 0.03^2 of the largest scale fails
    err = testing.grad_errors(dict(ok, tiny=torch.full((3,), 1e-3)), dict(ref, tiny=torch.zeros(3)), 0.03)["tiny"]
    assert err == pytest.approx(1e-3 / 0.03) and err > 0.03
    assert testing.grad_errors({"z": torch.zeros(2)}, {"z": torch.zeros(2)}, 0.03) == {"z": 0.0}
    with pytest.raises(ValueError, match=r"only actual \['extra'\], only expected \['bias'\]"):
        testing.grad_errors({"weight": ok["weight"], "norm": ok["norm"], "tiny": ok["tiny"], "extra": ok["bias"]},
                            ref, 0.03)


def test_assert_close_names_what_and_dtype():
    e = torch.ones(4, dtype=torch.float64)
    assert testing.assert_close(e.float(), e) == 0.0
    with pytest.raises(AssertionError, match=r"grad_x: relative error 1\.000e-02 > 1\.0e-04 \(torch.float32\)"):
        testing.assert_close((e * 1.01).float(), e, what="grad_x")
    with pytest.raises(AssertionError, match="non-finite"):
        testing.assert_close(torch.full((4,), math.inf), e, torch.float32)


@pytest.mark.parametrize("layout", testing.LAYOUTS)
def test_make_inputs_layouts_and_values(layout):
    x, w, b, gy = testing.make_inputs(3, 7, 6, 2, 3, 9, dtype=torch.bfloat16, layout=layout, seed=5)
    assert x.shape == gy.shape == (3, 7, 6) and w.shape == (2, 3, 9) and b.shape == (2, 9)
    assert x.dtype == w.dtype == b.dtype == gy.dtype == torch.bfloat16
    assert x.is_contiguous() == (layout == "contiguous") == gy.is_contiguous()
    again = testing.make_inputs(3, 7, 6, 2, 3, 9, dtype=torch.bfloat16, layout=layout, seed=5)
    for a, c in zip((x, w, b, gy), again):
        assert torch.equal(a, c)
    # the same seed gives the same values whatever the layout and dtype (drawn in float64, then rounded)
    x64 = testing.make_inputs(3, 7, 6, 2, 3, 9, dtype=torch.float64, layout=layout, seed=5).x
    assert torch.equal(x64.to(torch.bfloat16), x)


def test_make_inputs_defaults_and_errors():
    x, w, b, gy = testing.make_inputs(2, 5, 4, 1, 1, bias=False)
    assert w.shape == (1, 1, 5) and b is None  # N defaults to L
    with pytest.raises(ValueError, match="layout"):
        testing.make_inputs(2, 5, 4, 1, 1, layout="strided")


def test_references_agree_and_reject_bad_shapes():
    x, w, b, gy = testing.make_inputs(2, 33, 8, 2, 3, 40, dtype=torch.float64, seed=1)
    dense, fft = testing.causal_toeplitz_dense(x, w, b), testing.causal_toeplitz_fft(x, w, b)
    assert testing.rel_err(fft, dense) < 1e-12
    for a, c in zip(testing.causal_toeplitz_backward_reference(gy, x, w),
                    testing.causal_toeplitz_backward_reference(gy, x, w, fft=True)):
        assert testing.rel_err(a, c) < 1e-12
    with pytest.raises(ValueError, match="N >= L"):
        testing.causal_toeplitz_dense(x, w[:, :, :20])


def test_ops_reference_is_the_same_definition():
    from tmm.ops import reference

    assert reference.causal_toeplitz_dense is testing.causal_toeplitz_dense
    assert reference.causal_toeplitz_fft is testing.causal_toeplitz_fft


IMPORT_WITHOUT_NATIVE = """
import torch, tmm, tmm.testing as t, lab.bench.timing, lab.bench.report, tmm.files, tmm.tables
x, w, b, gy = t.make_inputs(2, 9, 4, 2, 1, seed=0)
assert t.rel_err(t.causal_toeplitz_fft(x, w, b), t.causal_toeplitz_dense(x, w, b)) < 1e-5
assert not hasattr(torch.ops.tmm, "causal_toeplitz"), "nothing registered without the native module"
for name in ("ops", "models"):
    try:
        __import__("tmm." + name)
    except ImportError as e:
        assert "tmm._C" in str(e) and "not built" in str(e), e
    else:
        raise AssertionError("tmm." + name + " imported without tmm._C")
print("ok")
"""


def test_import_without_the_native_build(tmp_path):
    """A source tree with no build (no tmm._C, no _build_info): the pure-Python
    parts (and the lab's timing and reports, for the GPU check) work and the
    native ones say what is missing."""
    tree = tmp_path / "src"
    for package in ("tmm", "lab"):
        shutil.copytree(REPO / package, tree / package,
                        ignore=shutil.ignore_patterns("*.so", "*.so.*", "_build_info.py", "__pycache__"))
    run = subprocess.run([sys.executable, "-c", IMPORT_WITHOUT_NATIVE], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


BLOCK_C = """
import sys
class Block:  # tmm._C made unimportable, as on a machine that built only libtmm_torch
    def find_spec(self, name, path=None, target=None):
        if name == "tmm._C":
            raise ModuleNotFoundError("No module named 'tmm._C'", name="tmm._C")
sys.meta_path.insert(0, Block())
""" + IMPORT_WITHOUT_NATIVE


def test_import_with_the_native_module_blocked():
    run = subprocess.run([sys.executable, "-c", BLOCK_C], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_a_broken_native_module_is_still_an_error(tmp_path):
    """Only an absent module is tolerated: one that fails to load is an error at import."""
    code = ("import sys\nclass Broken:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'tmm._C':\n            raise ImportError('undefined symbol: foo')\n"
            "sys.meta_path.insert(0, Broken())\nimport tmm\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "undefined symbol: foo" in run.stderr
