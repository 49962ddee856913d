"""Checkpoints across the two languages, for every models/*-tiny.json: what
Python saves, the C++ tool (tests/cpp/checkpoint_tool.cpp, target
tmm_checkpoint_tool) loads to the same logits, and the other way round; a
file written by the `safetensors` package loads in C++; a model trained from
C++ reloads in Python with the tool's logits; broken checkpoints are clear
errors in both languages.

The tool is $TMM_CHECKPOINT_TOOL, which scripts/test.sh sets: then a
missing tool fails every test. Run outside test.sh (the variable unset), the
tool is looked up at <repo>/build/tests/cpp/tmm_checkpoint_tool and the tests
are skipped, saying why, when it is not built there.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tmm
import tmm.models
from tmm.io.safetensors import load_file, save_file

REPO = Path(tmm.__file__).resolve().parent.parent
MODELS = REPO / "models"
TINY = sorted(p.stem for p in MODELS.glob("*-tiny.json"))
TOOL_ENV = os.environ.get("TMM_CHECKPOINT_TOOL")
TOOL = Path(TOOL_ENV or REPO / "build" / "tests" / "cpp" / "tmm_checkpoint_tool")
B, L = 2, 16
STEPS = 20
TOL = 1e-5  # max|C++ - Python| / max|Python|, float32

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def tool():
    """The tool, or a failure (TMM_CHECKPOINT_TOOL set: scripts/test.sh
    built it) or a skip (not set) naming what is missing."""
    if TOOL.is_file() and os.access(TOOL, os.X_OK):
        return TOOL
    if TOOL_ENV:
        pytest.fail(f"TMM_CHECKPOINT_TOOL={TOOL_ENV} is not an executable file "
                    "(scripts/test.sh builds it: cmake --build build --target tmm_checkpoint_tool)")
    pytest.skip(f"the C++ checkpoint tool {TOOL} is not built (cmake --build build --target "
                "tmm_checkpoint_tool, or set TMM_CHECKPOINT_TOOL; scripts/test.sh does both)")


@pytest.fixture(params=TINY)
def name(request):
    return request.param


def run_tool(*args, ok=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run(
        [str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    if ok:
        assert r.returncode == 0, f"{TOOL.name} {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}"
    return r


def write_ids(path, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (B, L), generator=g)
    save_file({"input_ids": ids}, path)
    return ids


def cpp_logits(ckpt, ids_path, tmp_path):
    out = tmp_path / "logits.safetensors"
    run_tool("logits", ckpt, ids_path, out)
    tensors, _ = load_file(out)
    return tensors["logits"]


def py_logits(model, ids):
    model.eval()
    with torch.no_grad():
        return model(ids)


def assert_same_logits(actual, expected, what):
    assert actual.dtype == expected.dtype == torch.float32, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (tuple(actual.shape), tuple(expected.shape))
    assert torch.isfinite(actual).all() and torch.isfinite(expected).all(), what
    scale = expected.abs().max().item()
    err = (actual - expected).abs().max().item() / max(scale, 1e-30)
    assert err <= TOL, f"{what}: max|diff| / max|logits| = {err:.3e} > {TOL:.0e}"


def python_checkpoint(name, path, seed=0):
    torch.manual_seed(seed)
    model = tmm.models.build(name)
    model.save(path)
    return model


# --- parity -----------------------------------------------------------------


def test_python_save_cpp_logits(name, tmp_path):
    model = python_checkpoint(name, tmp_path / "ckpt")
    ids = write_ids(tmp_path / "ids.safetensors", model.config["vocab_size"])
    expected = py_logits(model, ids)
    assert_same_logits(cpp_logits(tmp_path / "ckpt", tmp_path / "ids.safetensors", tmp_path), expected, name)


def test_cpp_init_python_load(name, tmp_path):
    seed = 1234
    run_tool("init", MODELS / f"{name}.json", seed, tmp_path / "ckpt")
    model = tmm.models.load(tmp_path / "ckpt")
    config = json.loads((MODELS / f"{name}.json").read_text())
    assert all(model.config[k] == v for k, v in config.items())
    # The same seed gives the same initialisation in both languages (one
    # generator: ATen's default CPU generator).
    torch.manual_seed(seed)
    fresh = tmm.models.build(name)
    loaded = model.state_dict()
    for k, v in fresh.state_dict().items():
        assert torch.equal(loaded[k], v), f"{name}: '{k}' differs from Python's build under the same seed"
    ids = write_ids(tmp_path / "ids.safetensors", model.config["vocab_size"])
    expected = cpp_logits(tmp_path / "ckpt", tmp_path / "ids.safetensors", tmp_path)
    assert_same_logits(py_logits(model, ids), expected, name)


def test_safetensors_package_file_loads_in_cpp(name, tmp_path):
    st = pytest.importorskip("safetensors.torch")
    torch.manual_seed(3)
    model = tmm.models.build(name)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    st.save_file(state, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    (ckpt / "config.json").write_text(json.dumps(model.config))
    ids = write_ids(tmp_path / "ids.safetensors", model.config["vocab_size"])
    expected = py_logits(model, ids)
    assert_same_logits(cpp_logits(ckpt, tmp_path / "ids.safetensors", tmp_path), expected, name)
    assert_same_logits(py_logits(tmm.models.load(ckpt), ids), expected, name)


def test_cpp_train_python_load(name, tmp_path):
    initial = python_checkpoint(name, tmp_path / "init")
    ids = write_ids(tmp_path / "ids.safetensors", initial.config["vocab_size"])
    r = run_tool("train", tmp_path / "init", tmp_path / "ids.safetensors", STEPS, tmp_path / "trained")
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", r.stdout, re.M)]
    assert len(losses) == STEPS, r.stdout
    assert all(x == x and abs(x) != float("inf") for x in losses), losses
    assert losses[-1] < losses[0], f"{name}: C++ training did not lower the loss: {losses}"
    trained = tmm.models.load(tmp_path / "trained")
    after = py_logits(trained, ids)
    assert not torch.equal(after, py_logits(initial, ids)), f"{name}: training changed nothing"
    expected = cpp_logits(tmp_path / "trained", tmp_path / "ids.safetensors", tmp_path)
    assert_same_logits(after, expected, name)
    # The trained model's loss, recomputed in Python, is below the first step's.
    with torch.no_grad():
        loss = trained(ids, labels=ids).loss.item()  # next-token prediction, as the C++ tool trains
    assert loss < losses[0], (loss, losses)


# --- broken checkpoints -----------------------------------------------------


def _truncate(ckpt):
    f = ckpt / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    return f


def _corrupt_header_json(ckpt):
    f = ckpt / "model.safetensors"
    data = bytearray(f.read_bytes())
    n = int.from_bytes(data[:8], "little")
    assert data[8:9] == b"{" and n > 32
    data[8 : 8 + 16] = b"!" * 16  # no longer JSON
    f.write_bytes(bytes(data))
    return f


def _corrupt_header_length(ckpt):
    f = ckpt / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[:8] = (len(data) * 4).to_bytes(8, "little")  # a header longer than the file
    f.write_bytes(bytes(data))
    return f


def _remove_config(ckpt):
    f = ckpt / "config.json"
    f.unlink()
    return f


BREAKAGES = {
    "truncated": _truncate,
    "header_json": _corrupt_header_json,
    "header_length": _corrupt_header_length,
    "missing_config": _remove_config,
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_broken_checkpoint_is_a_clear_error(name, breakage, tmp_path):
    ckpt = tmp_path / "ckpt"
    model = python_checkpoint(name, ckpt)
    write_ids(tmp_path / "ids.safetensors", model.config["vocab_size"])
    bad = BREAKAGES[breakage](ckpt)
    out = tmp_path / "logits.safetensors"
    r = run_tool("logits", ckpt, tmp_path / "ids.safetensors", out, ok=False)
    assert r.returncode == 1, f"{breakage}: exit status {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert str(bad) in r.stderr, f"{breakage}: the message does not name {bad}:\n{r.stderr}"
    assert "Exception raised from" not in r.stderr, r.stderr  # no C++ backtrace
    assert not out.exists()
    with pytest.raises((RuntimeError, OSError, ValueError)) as info:
        tmm.models.load(ckpt)
    assert str(bad) in str(info.value), f"{breakage}: Python's message does not name {bad}: {info.value}"


def test_a_missing_tool_fails_under_test_sh(tmp_path):
    """With TMM_CHECKPOINT_TOOL set (as scripts/test.sh sets it) but no tool
    there, the tests fail instead of skipping."""
    env = dict(os.environ, TMM_CHECKPOINT_TOOL=str(tmp_path / "no-tool"), OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                        "-k", "test_python_save_cpp_logits and tmm-tiny"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("1 error" in r.stdout or "1 failed" in r.stdout) and "is not an executable file" in r.stdout
