"""pip install as a new user meets it (README.md, issue 11): a fresh virtual
environment outside the checkout that has this test environment's torch and
nothing of tmm; README.md's install line run verbatim in it, from the
checkout; then, from outside the checkout: import, the op forward and
backward against the reference, the zoo (build("tmm-tiny")), save/load and
generation, `tmm` from the venv's bin, `python -m tmm --cmake-prefix-path`
and tests/consumer built and run against the pip-installed tree. Then
`pip wheel`, and that wheel installed into a second fresh venv (no index)
and smoke-tested the same way.

The venvs live at a fixed place outside the checkout (under TMM_CACHE), and
pip's CMake build in build-pip/ beside build/, so that ccache serves both
builds from the objects scripts/test.sh has just compiled: a few minutes.
Skipped, saying so, only where the install fails because pip cannot reach a
package index (the build requirements are usually already installed here).
"""
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("TMM_CACHE", Path.home() / ".cache" / "tmm")) / (
    "pip-install-test-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
)
TORCH_SITE = Path(torch.__file__).parent.parent  # as imported: the same path strings as the dev build's
pytestmark = pytest.mark.timeout(1800)

# Run by each venv's python from WORK (outside the checkout): argv[1] = a
# folder for the checkpoint and the expected generation.
SMOKE = r'''
import json, sys
from pathlib import Path
import torch
import tmm, tmm.models
from tmm.ops.reference import causal_toeplitz_dense

venv, out = Path(sys.prefix).resolve(), Path(sys.argv[1])
assert venv in Path(tmm.__file__).resolve().parents, f"imported {tmm.__file__}, not the venv's package"

# The op against the dense reference, forward and backward, float64, with
# the tolerance table the package ships.
tol = json.loads((Path(tmm.__file__).parent / "tolerances.json").read_text())["float64"]
torch.manual_seed(0)
x = torch.randn(2, 37, 6, dtype=torch.float64, requires_grad=True)
w = torch.randn(2, 2, 40, dtype=torch.float64, requires_grad=True)
b = torch.randn(2, 40, dtype=torch.float64, requires_grad=True)
y, ref = tmm.ops.causal_toeplitz(x, w, b), causal_toeplitz_dense(x, w, b)
g = torch.randn_like(ref)
for name, a, e in zip(("y", "dx", "dw", "db"), (y, *torch.autograd.grad(y, (x, w, b), g)),
                      (ref, *torch.autograd.grad(ref, (x, w, b), g))):
    err = ((a - e).abs().max() / e.abs().max()).item()
    assert err <= tol, f"{name}: relative error {err:.2e} > {tol:.0e}"

# The zoo's configs, from the installed package.
names = tmm.models.list_configs()
assert {"tmm-tiny", "mamba2-tiny", "ablation/tmm-flat"} <= set(names), names
assert venv in tmm.models.config_path("tmm-tiny").resolve().parents, tmm.models.config_path("tmm-tiny")
model = tmm.models.build("tmm-tiny")
ids = torch.randint(0, 64, (2, 16))
logits = model(ids)
assert logits.shape == (2, 16, 64), logits.shape

# Save, load; generate from the loaded model as it comes (training mode).
config = dict(model.config, vocab_size=256)  # byte-level ids, for tests/consumer's example
model = tmm.models.build(config)
model.save(out / "ckpt")
loaded = tmm.models.load(out / "ckpt")
assert torch.equal(loaded(ids), model(ids))
prompt = list("hello".encode())
tokens = loaded.generate(prompt, 8, temperature=0)["tokens"]
assert loaded.training and len(tokens) == 8
(out / "expected.json").write_text(json.dumps(tokens))
print("smoke test passed:", tmm.__version__, tmm.__file__)
'''


def _clean_env(venv):
    """The environment of a shell with `venv` activated, and nothing of the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "TMM_CLI", "TMM_CONSUMER_DIR")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(args, cwd, env, timeout=1200, check=True):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{args} (in {cwd}) exited {r.returncode}:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}")
    return r


def _fresh_venv(path):
    """A new venv with this environment's torch installed in it, as far as
    Python and the loader can tell: torch's package folder linked into the
    venv's site-packages (beside where tmm goes, as `pip install torch` puts
    it), its dependencies and metadata through a .pth file. (The test
    environment is itself usually a venv, so --system-site-packages would not
    see them.)"""
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    py = path / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], WORK, None).stdout.strip())
    (site / "torch").symlink_to(TORCH_SITE / "torch", target_is_directory=True)
    (site / "test_environment.pth").write_text(f"{TORCH_SITE}\n")
    return path


def _readme_install_line():
    text = (REPO / "README.md").read_text()
    match = re.search(r"## Install\n.*?```bash\n(pip install [^\n]+)\n```", text, re.S)
    assert match, "README.md: no ```bash block with the pip install line under '## Install'"
    return match.group(1)


def _index_unreachable(pip_output):
    """Whether a failed install failed because no package index answered."""
    network = re.search(r"NewConnectionError|Failed to establish|Name or service not known|Temporary failure in name "
                        r"resolution|Network is unreachable|No matching distribution found|ConnectTimeout|"
                        r"Could not find a version", pip_output)
    if not network:
        return False
    try:
        urllib.request.urlopen(os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/"), timeout=10)
        return False
    except OSError:
        return True


def _smoke(venv, out):
    out.mkdir(parents=True, exist_ok=True)
    script = WORK / "smoke.py"
    script.write_text(SMOKE)
    r = _run([str(venv / "bin" / "python"), str(script), str(out)], WORK, _clean_env(venv), timeout=300)
    assert "smoke test passed" in r.stdout, r.stdout
    return json.loads((out / "expected.json").read_text())


def _tmm_command(venv):
    """`tmm` as the activated venv's shell finds it."""
    env = _clean_env(venv)
    exe = shutil.which("tmm", path=env["PATH"])
    assert exe == str(venv / "bin" / "tmm"), f"tmm on PATH is {exe}, expected the venv's"
    r = _run([exe, "--help"], WORK, env)
    assert "usage: tmm COMMAND" in r.stdout, r.stdout
    return exe, env


@pytest.fixture(scope="module")
def installed():
    """venv 1, with tmm installed by README.md's line, run from the checkout."""
    WORK.mkdir(parents=True, exist_ok=True)
    venv = _fresh_venv(WORK / "venv")
    line = _readme_install_line()
    r = _run(["bash", "-c", line], REPO, _clean_env(venv), check=False)
    if r.returncode != 0:
        if _index_unreachable(r.stdout + r.stderr):
            pytest.skip(f"pip cannot reach a package index for the build requirements of: {line}")
        raise AssertionError(f"README.md's install line failed ({r.returncode}):\n{line}\n{r.stdout[-8000:]}\n"
                             f"{r.stderr[-8000:]}")
    return venv


def test_readme_install_gives_a_working_package(installed):
    _smoke(installed, WORK / "out")


def test_tmm_command_runs_from_the_venv_bin(installed):
    exe, env = _tmm_command(installed)
    r = _run([exe, "--version"], WORK, env)
    assert f"torch {torch.__version__}" in r.stdout, r.stdout
    ckpt = WORK / "out" / "ckpt"
    if not ckpt.is_dir():
        _smoke(installed, WORK / "out")
    r = _run([exe, "info", "--model", str(ckpt)], WORK, env)  # loads the model: libtmm_torch and torch resolved
    assert re.search(r"^arch\s+tmm$", r.stdout, re.M) and re.search(r"^vocab_size\s+256$", r.stdout, re.M), r.stdout
    r = _run([str(installed / "bin" / "python"), "-m", "tmm", "--version"], WORK, env)
    assert f"torch {torch.__version__}" in r.stdout, r.stdout


def test_installed_binaries_find_their_libraries_relative_to_themselves(installed):
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    package = next((installed / "lib").glob("python*/site-packages/tmm"))
    binaries = [package / "bin" / "tmm", *package.glob("lib/libtmm_torch*.so*"), *package.glob("_C*.so")]
    assert len(binaries) == 3, binaries  # one library file: a wheel holds no symlinks
    for path in binaries:
        dynamic = _run([readelf, "-d", str(path)], WORK, None).stdout
        paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dynamic)
        assert paths, f"{path}: no RUNPATH"
        for entry in paths[0].split(":"):
            assert entry.startswith("$ORIGIN"), f"{path}: RUNPATH entry {entry!r} is not relative to the file"


def test_cmake_package_of_the_pip_install_builds_the_consumer(installed):
    env = _clean_env(installed)
    r = _run([str(installed / "bin" / "python"), "-m", "tmm", "--cmake-prefix-path"], WORK, env)
    prefix_path = r.stdout.strip()
    tmm_prefix, torch_prefix = prefix_path.split(";")
    assert Path(tmm_prefix).resolve() == next((installed / "lib").glob("python*/site-packages/tmm")).resolve()
    assert Path(torch_prefix).resolve() == (TORCH_SITE / "torch" / "share" / "cmake").resolve()
    expected = _smoke(installed, WORK / "out")
    build = WORK / "consumer"
    shutil.rmtree(build, ignore_errors=True)
    _run(["cmake", "-S", str(REPO / "tests" / "consumer"), "-B", str(build), "-G", "Ninja",
          f"-DCMAKE_PREFIX_PATH={prefix_path}"], WORK, env)
    _run(["cmake", "--build", str(build)], WORK, env)
    assert "gradients ok" in _run([str(build / "tmm_consumer")], WORK, env).stdout
    r = _run([str(build / "tmm_generate_example"), str(WORK / "out" / "ckpt"), "hello", "8"], WORK, env)
    assert [int(t) for t in r.stdout.splitlines()[0].split()] == expected, r.stdout


def test_wheel_installs_into_a_second_fresh_venv(installed):
    dist = WORK / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    _run(["pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(dist), "."], REPO, _clean_env(installed))
    (wheel,) = dist.glob("tmm-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for name in ("tmm/configs/tmm-tiny.json", "tmm/configs/ablation/tmm-flat.json", "tmm/tolerances.json",
                 "tmm/bin/tmm", "tmm/lib/libtmm_torch.so", "tmm/include/tmm/tmm.h",
                 "tmm/lib/cmake/tmm_torch/tmm_torchConfig.cmake", "tmm-0.1.0.data/scripts/tmm"):
        assert name in names, f"{wheel.name} lacks {name}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
    torch_release = importlib.metadata.version("torch")  # the distribution's version, as pip compares it
    assert f"Requires-Dist: torch=={torch_release}" in metadata, metadata[:2000]
    assert re.search(r"^License(-Expression)?: BSD-3-Clause$", metadata, re.M), metadata[:2000]

    second = _fresh_venv(WORK / "venv2")
    _run([str(second / "bin" / "pip"), "install", "--no-index", str(wheel)], WORK, _clean_env(second))
    _smoke(second, WORK / "out2")
    _tmm_command(second)
