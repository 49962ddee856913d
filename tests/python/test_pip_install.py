"""pip install as a new user meets it (README.md): a fresh
virtual environment outside the checkout that has torch (and torch's own
dependencies) and nothing else: no path into this test environment, so a
run-time dependency the package forgets to declare fails here. README.md's
install line runs verbatim in it, from the checkout, with pip pointed at the
local wheelhouse that scripts/test.sh prepares (TMM_WHEELHOUSE: the build
tools and tmm's run-time requirements), so no package index is needed and
nothing is skipped. Then, from outside the checkout: every public module
imports, a few training steps through tmm.train with a checkpoint and a
resume, the op forward and backward against the reference, the zoo
(build("tmm-tiny")), save/load and generation, `tmm` from the venv's bin,
`python -m tmm --cmake-prefix-path` and tests/consumer built and run against
the pip-installed tree. Then `pip wheel`, and that wheel installed into a
second fresh venv (no index) and smoke-tested the same way.

torch is copied into each venv as `pip install torch` would put it: the
files of torch's distribution and of every distribution it requires
(hard links where the file system allows; the torch/ folder itself a link,
so that the build sees the dev build's header paths), with their metadata,
so pip sees them installed. The venvs live at a fixed place outside the checkout (under
TMM_CACHE), and pip's CMake build in build-pip/ beside build/, so that ccache
serves both builds from the objects scripts/test.sh has just compiled.
"""
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("TMM_CACHE", Path.home() / ".cache" / "tmm")) / (
    "pip-install-test-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
)
TORCH_SITE = Path(torch.__file__).parent.parent  # as imported: the same path strings as the dev build's
# What this test environment has and the fresh venvs must not: test and optional dependencies.
NOT_IN_A_FRESH_VENV = ("pytest", "transformers", "matplotlib", "tokenizers", "safetensors", "pyarrow", "accelerate",
                       "lm_eval")
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


# Run by the first venv's python from WORK: every public module imports with
# only the declared dependencies; tmm.hf resolves after a plain `import tmm`;
# a few steps of tmm.train with a checkpoint, then a resume; an optional
# dependency that is missing is an error naming its extra.
PUBLIC_MODULES_AND_TRAINING = r'''
import importlib, pkgutil, sys
from pathlib import Path
import torch
import tmm

assert callable(tmm.hf.from_pretrained)  # no `import tmm.hf` needed
names = sorted(m.name for m in pkgutil.walk_packages(tmm.__path__, "tmm.")
               if not any(part.startswith("_") for part in m.name.split(".")))
assert len(names) > 40, names
# Modules of an optional part whose dependency a fresh venv lacks: an ImportError naming the extra.
OPTIONAL = {"tmm.eval.harness": "tmm[eval]"}
for name in names:
    try:
        importlib.import_module(name)
    except ImportError as e:
        if name not in OPTIONAL or OPTIONAL[name] not in str(e):
            raise

from tmm.train import TrainConfig, train
out = Path(sys.argv[1])
task = tmm.tasks.make("copy", n=8)
cfg = TrainConfig(steps=4, batch_size=4, eval_every=2, eval_batches=1, checkpoint_dir=str(out / "train"),
                  checkpoint_every=2)
torch.manual_seed(0)
first = train(tmm.models.build("tmm-tiny"), task, cfg)
torch.manual_seed(0)
twin = train(tmm.models.build("tmm-tiny"), task, TrainConfig(**{**cfg.__dict__, "checkpoint_dir": str(out / "t2")}))
assert first.losses == twin.losses, (first.losses, twin.losses)  # deterministic on the CPU
again = train(tmm.models.build("tmm-tiny"), task, TrainConfig(**{**cfg.__dict__, "resume": True}))
assert again.resumed_from == 4 and again.losses == first.losses, (again.resumed_from, again.losses)
try:
    tmm.text.train_bpe_json(["x"], vocab_size=300)
except ImportError as e:
    assert "tmm[bpe]" in str(e), e
else:
    raise AssertionError("train_bpe ran without the tokenizers package")
print(f"{len(names)} public modules imported; trained {first.steps} steps and resumed")
'''


def _clean_env(venv, wheelhouse):
    """The environment of a shell with `venv` activated, nothing of the
    checkout, and pip reading packages only from `wheelhouse`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "TMM_CLI", "TMM_CONSUMER_DIR") and not k.startswith("PIP_")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _run(args, cwd, env, timeout=1200, check=True):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{args} (in {cwd}) exited {r.returncode}:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}")
    return r


def _requirement_closure(name):
    """The installed distributions that `name` needs here, itself included:
    its requirements whose markers hold on this machine, recursively, with
    the extras each is required with (torch needs cuda-toolkit[cufft, ...])."""
    found, seen, todo = {}, set(), [(name, frozenset())]
    while todo:
        name, extras = todo.pop()
        dist = importlib.metadata.distribution(name)
        key = canonicalize_name(dist.metadata["Name"])
        found[key] = dist
        for extra in ("", *extras):
            if (key, extra) in seen:
                continue
            seen.add((key, extra))
            for line in dist.requires or ():
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate({"extra": extra}):
                    todo.append((req.name, frozenset(req.extras)))
    return list(found.values())


def _fresh_venv(path):
    """A new venv with this environment's torch installed in it as `pip
    install torch` puts it: the files of torch and of each distribution it
    requires (RECORD), metadata included, hard-linked (else copied) into the
    venv's site-packages, but for those the venv has of its own (setuptools);
    their command-line scripts are left out. The package folder torch/ is a
    link to this environment's, as the dev build sees it: pip's CMake build
    then compiles against the same header paths as build/, and ccache serves
    it from build/'s objects."""
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    py = path / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], WORK, None).stdout.strip())
    (site / "torch").symlink_to(TORCH_SITE / "torch", target_is_directory=True)
    own = {canonicalize_name(d.name.split("-")[0]) for d in site.glob("*.dist-info")}  # venv's pip, setuptools
    for dist in _requirement_closure("torch"):
        if canonicalize_name(dist.metadata["Name"]) in own:
            continue
        for file in dist.files or ():
            src = Path(dist.locate_file(file))
            # a script in bin/, a listed .pyc never written, or inside torch/ (linked above)
            if file.parts[0] in ("..", "torch") or not src.is_file():
                continue
            dst = site / file
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    return path


@pytest.fixture(scope="module")
def wheelhouse():
    path = os.environ.get("TMM_WHEELHOUSE")
    if not path or not (Path(path) / ".complete").is_file():
        pytest.fail(f"TMM_WHEELHOUSE is {path!r}, not a wheelhouse prepared by scripts/_env.sh: run this test "
                    "through scripts/test.sh, which prepares it (the fresh venvs install from it, with no index)")
    return Path(path)


def _readme_install_line():
    text = (REPO / "README.md").read_text()
    match = re.search(r"## Install\n.*?```bash\n(pip install [^\n]+)\n```", text, re.S)
    assert match, "README.md: no ```bash block with the pip install line under '## Install'"
    return match.group(1)


def _smoke(venv, wheelhouse, out):
    out.mkdir(parents=True, exist_ok=True)
    script = WORK / "smoke.py"
    script.write_text(SMOKE)
    r = _run([str(venv / "bin" / "python"), str(script), str(out)], WORK, _clean_env(venv, wheelhouse), timeout=300)
    assert "smoke test passed" in r.stdout, r.stdout
    return json.loads((out / "expected.json").read_text())


def _tmm_command(venv, wheelhouse):
    """`tmm` as the activated venv's shell finds it."""
    env = _clean_env(venv, wheelhouse)
    exe = shutil.which("tmm", path=env["PATH"])
    assert exe == str(venv / "bin" / "tmm"), f"tmm on PATH is {exe}, expected the venv's"
    r = _run([exe, "--help"], WORK, env)
    assert "usage: tmm COMMAND" in r.stdout, r.stdout
    return exe, env


@pytest.fixture(scope="module")
def installed(wheelhouse):
    """venv 1, with tmm installed by README.md's line, run from the checkout."""
    WORK.mkdir(parents=True, exist_ok=True)
    venv = _fresh_venv(WORK / "venv")
    env = _clean_env(venv, wheelhouse)
    py = str(venv / "bin" / "python")
    for name in NOT_IN_A_FRESH_VENV:  # the venv is as fresh as it claims
        r = _run([py, "-c", f"import {name}"], WORK, env, check=False)
        assert r.returncode != 0, f"{name} is importable in the fresh venv {venv}"
    _run([py, "-c", "import torch; torch.ones(1)"], WORK, env)
    line = _readme_install_line()
    r = _run(["bash", "-c", line], REPO, env, check=False)
    if r.returncode != 0:
        raise AssertionError(f"README.md's install line failed ({r.returncode}) with pip reading {wheelhouse} only:\n"
                             f"{line}\n{r.stdout[-8000:]}\n{r.stderr[-8000:]}")
    return venv


def test_readme_install_gives_a_working_package(installed, wheelhouse):
    _smoke(installed, wheelhouse, WORK / "out")


def test_every_public_module_imports_and_trains_in_the_fresh_venv(installed, wheelhouse):
    script = WORK / "public_modules.py"
    script.write_text(PUBLIC_MODULES_AND_TRAINING)
    out = WORK / "out-train"
    shutil.rmtree(out, ignore_errors=True)
    env = _clean_env(installed, wheelhouse)
    r = _run([str(installed / "bin" / "python"), str(script), str(out)], WORK, env, timeout=600)
    assert "public modules imported" in r.stdout, r.stdout
    assert "Failed to initialize NumPy" not in r.stderr, r.stderr


def test_tmm_command_runs_from_the_venv_bin(installed, wheelhouse):
    exe, env = _tmm_command(installed, wheelhouse)
    r = _run([exe, "--version"], WORK, env)
    assert f"torch {torch.__version__}" in r.stdout, r.stdout
    ckpt = WORK / "out" / "ckpt"
    if not ckpt.is_dir():
        _smoke(installed, wheelhouse, WORK / "out")
    r = _run([exe, "info", "--model", str(ckpt)], WORK, env)  # loads the model: libtmm_torch and torch resolved
    assert re.search(r"^arch\s+tmm$", r.stdout, re.M) and re.search(r"^vocab_size\s+256$", r.stdout, re.M), r.stdout
    r = _run([str(installed / "bin" / "python"), "-m", "tmm", "--version"], WORK, env)
    assert f"torch {torch.__version__}" in r.stdout, r.stdout


def test_a_clone_s_unbuilt_source_folder_names_the_installed_tmm_it_hides(installed, wheelhouse):
    """Python started in a clone's root imports the clone's tmm/ (the current
    directory comes first), which is not built: the error says so and names
    the installed tmm, instead of asking for the install just done."""
    clone = WORK / "unbuilt-clone"
    shutil.rmtree(clone, ignore_errors=True)
    (clone / "tmm").mkdir(parents=True)
    shutil.copy(REPO / "tmm" / "__init__.py", clone / "tmm" / "__init__.py")
    r = _run([str(installed / "bin" / "python"), "-c", "import tmm; tmm.nn"], clone,
             _clean_env(installed, wheelhouse), check=False)
    assert r.returncode == 1 and "hiding the installed tmm" in r.stderr and "run Python outside the clone" in r.stderr, \
        r.stderr


def test_installed_binaries_find_their_libraries_relative_to_themselves_and_need_no_utf8proc(installed):
    readelf = shutil.which("readelf")
    assert readelf, "readelf (binutils, installed with g++) is not on PATH"
    package = next((installed / "lib").glob("python*/site-packages/tmm"))
    binaries = [package / "bin" / "tmm", *package.glob("lib/libtmm_torch*.so*"), *package.glob("_C*.so")]
    assert len(binaries) == 3, binaries  # one library file: a wheel holds no symlinks
    for path in binaries:
        dynamic = _run([readelf, "-d", str(path)], WORK, None).stdout
        paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dynamic)
        assert paths, f"{path}: no RUNPATH"
        for entry in paths[0].split(":"):
            assert entry.startswith("$ORIGIN"), f"{path}: RUNPATH entry {entry!r} is not relative to the file"
        # utf8proc is linked statically (cmake/utf8proc.cmake), its symbols not exported.
        assert "utf8proc" not in dynamic, f"{path}: needs utf8proc at run time"
        exported = _run(["nm", "-D", "--defined-only", str(path)], WORK, None).stdout
        assert "utf8proc_" not in exported, f"{path}: exports utf8proc's symbols"


def test_cmake_package_of_the_pip_install_builds_the_consumer(installed, wheelhouse):
    env = _clean_env(installed, wheelhouse)
    r = _run([str(installed / "bin" / "python"), "-m", "tmm", "--cmake-prefix-path"], WORK, env)
    prefix_path = r.stdout.strip()
    tmm_prefix, torch_prefix = prefix_path.split(";")
    assert Path(tmm_prefix).resolve() == next((installed / "lib").glob("python*/site-packages/tmm")).resolve()
    assert Path(torch_prefix).resolve() == (TORCH_SITE / "torch" / "share" / "cmake").resolve()
    expected = _smoke(installed, wheelhouse, WORK / "out")
    build = WORK / "consumer"
    shutil.rmtree(build, ignore_errors=True)
    _run(["cmake", "-S", str(REPO / "tests" / "consumer"), "-B", str(build), "-G", "Ninja",
          f"-DCMAKE_PREFIX_PATH={prefix_path}"], WORK, env)
    _run(["cmake", "--build", str(build)], WORK, env)
    assert "gradients ok" in _run([str(build / "tmm_consumer")], WORK, env).stdout
    r = _run([str(build / "tmm_generate_example"), str(WORK / "out" / "ckpt"), "hello", "8"], WORK, env)
    assert [int(t) for t in r.stdout.splitlines()[0].split()] == expected, r.stdout


def test_wheel_installs_into_a_second_fresh_venv(installed, wheelhouse):
    dist = WORK / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    _run(["pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(dist), "."], REPO,
         _clean_env(installed, wheelhouse))
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
    _run([str(second / "bin" / "pip"), "install", str(wheel)], WORK, _clean_env(second, wheelhouse))
    _smoke(second, wheelhouse, WORK / "out2")
    _tmm_command(second, wheelhouse)
