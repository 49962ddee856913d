"""Installs tmm into an environment that already has torch (README.md):

    pip install torch "setuptools>=70.1" wheel "cmake>=3.25" ninja && pip install --no-build-isolation .

The build binds to that torch, hence --no-build-isolation: pip's isolated
build would fetch another torch, and tmm refuses to import under any torch
but its build's (the requirement pins that release).

setup.py only drives CMake (CMakeLists.txt is the one build description) and
installs its tree into the package, which is then also a CMake prefix:

    tmm/_C*.so, tmm/_build_info.py          the binding; the torch it is bound to
    tmm/lib/libtmm_torch.so                 the C++ library (RPATH: $ORIGIN, ../torch/lib)
    tmm/include/tmm/, tmm/lib/cmake/        headers, find_package(tmm_torch)
    tmm/bin/tmm                             the CLI, started by the script `tmm` (tmm/_launcher.py)
    tmm/configs/                            the zoo's configs (in the checkout a link to models/)
    tmm/tolerances.json                     the test tolerance table

The CMake build lives in build-pip/ beside the usual build/, at the same
depth, so that ccache (CCACHE_BASEDIR = this folder) reuses its objects.
"""
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

from distutils.command.build_scripts import build_scripts  # noqa: E402  (setuptools' own copy of distutils)

ROOT = Path(__file__).resolve().parent
BUILD_DIR = "build-pip"


def torch_requirement():
    """The torch already installed, pinned: the one this build binds to."""
    try:
        return f"torch=={importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        sys.exit(
            "setup.py: tmm is built against the torch of the environment it is installed into, and this one has "
            "none. Install torch first, then, in the same environment:\n"
            '    pip install torch "setuptools>=70.1" wheel "cmake>=3.25" ninja && pip install --no-build-isolation .\n'
            "(without --no-build-isolation pip builds in a fresh environment that has no torch)"
        )


def runtime_requirements():
    """requirements-runtime.txt: what the package imports at run time besides torch."""
    lines = (ROOT / "requirements-runtime.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


# Optional parts, each imported lazily; a missing one is an ImportError naming its extra.
EXTRAS = {
    "plots": ["matplotlib>=3.8"],            # the PNG plots of the benchmarks and experiments
    "hf": ["transformers>=4.46"],            # reading a Llama or Mamba2 config.json (tmm.hf)
    "bpe": ["tokenizers>=0.19"],             # training a BPE (tmm.text.train_bpe)
    "parquet": ["pyarrow>=14"],              # Parquet corpora (tmm.tasks)
    # benchmark evaluation with EleutherAI's harness (tmm.eval.harness, scripts/evaluate.py), with the
    # harness's own extras for the paper's IFEval and LongBench
    "eval": ["lm-eval[ifeval,longbench]>=0.4.13"],
}
EXTRAS["all"] = sorted({r for reqs in EXTRAS.values() for r in reqs})


def tool(name):
    """cmake or ninja: the pip package's binary when installed (it may not be on
    PATH outside an activated environment), else the one on PATH."""
    try:
        module = __import__(name)  # the packages cmake and ninja: cmake.CMAKE_BIN_DIR, ninja.BIN_DIR
        candidate = Path(getattr(module, "CMAKE_BIN_DIR" if name == "cmake" else "BIN_DIR")) / name
        if candidate.is_file():
            return str(candidate)
    except (ImportError, AttributeError, TypeError):
        pass
    found = shutil.which(name)
    if found is None:
        sys.exit(f'setup.py: {name} not found; install it with: pip install "cmake>=3.25" ninja')
    return found


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        # The torch files themselves (resolved): where they are, not how this
        # environment links them, is what the build and ccache see.
        torch_dir = Path(importlib.util.find_spec("torch").submodule_search_locations[0]).resolve()
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = ROOT / BUILD_DIR
        env = dict(os.environ)
        # ccache: objects hash alike in every clone and build folder (scripts/_env.sh)
        env.setdefault("CCACHE_BASEDIR", str(ROOT))
        env.setdefault("CCACHE_NOHASHDIR", "1")
        configure = [
            tool("cmake"), "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={tool('ninja')}",
            f"-DCMAKE_PREFIX_PATH={torch_dir / 'share' / 'cmake'}",  # torch.utils.cmake_prefix_path
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTMM_BUILD_TESTS=OFF",
        ]
        if self.inplace:  # setup.py build_ext --inplace: the binding beside the sources, as scripts/_env.sh builds it
            configure += [f"-DTMM_PYTHON_OUTPUT_DIR={package_dir}", "-DTMM_PYTHON_PACKAGE=OFF"]
        else:
            configure += ["-DTMM_PYTHON_OUTPUT_DIR=", "-DTMM_PYTHON_PACKAGE=ON"]
        if os.environ.get("TMM_WITH_CUDA"):
            configure.append(f"-DTMM_WITH_CUDA={os.environ['TMM_WITH_CUDA']}")
        subprocess.run(configure, check=True, env=env)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
        targets = ["--target", "tmm_python"] if self.inplace else []
        subprocess.run([tool("cmake"), "--build", str(build_dir), "-j", jobs, *targets], check=True, env=env)
        if not self.inplace:
            for stale in ("bin", "include", "lib"):  # what an earlier build installed here
                shutil.rmtree(package_dir / stale, ignore_errors=True)
            subprocess.run([tool("cmake"), "--install", str(build_dir), "--prefix", str(package_dir)], check=True,
                           env=env, stdout=subprocess.DEVNULL)


class BuildLauncher(build_scripts):
    """Installs tmm/_launcher.py as the script `tmm` (see that file)."""

    def run(self):
        super().run()
        built = Path(self.build_dir)
        os.replace(built / "_launcher.py", built / "tmm")


setup(
    name="tmm",
    version="0.1.0",
    description="Toeplitz MLP Mixers: fused causal-Toeplitz ops for PyTorch and a model zoo",
    long_description=(ROOT / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    license_files=["LICENSE"],
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: C++",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=find_packages(include=["tmm", "tmm.*"]),
    # tmm/configs links to models/ in the checkout; the wheel holds the files themselves.
    package_data={"tmm": ["tolerances.json", "configs/**/*.json"]},
    ext_modules=[Extension("tmm._C", sources=[])],
    scripts=["tmm/_launcher.py"],
    cmdclass={"build_ext": CMakeBuild, "build_scripts": BuildLauncher},
    options={"build": {"build_base": f"{BUILD_DIR}/setuptools"}},
    python_requires=">=3.9",
    install_requires=[torch_requirement(), *runtime_requirements()],
    extras_require=EXTRAS,
    zip_safe=False,
)
