"""pip install --no-build-isolation .   (into an environment that has torch)

setup.py only drives CMake: CMakeLists.txt is the one build description. The
native module tmm._C and libtmm_torch land inside the installed package; the
torch they were built against is recorded in tmm/_build_info.py and checked
at import.
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        import torch  # the torch this build binds to (hence --no-build-isolation)

        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DTMM_PYTHON_OUTPUT_DIR={package_dir}",
            "-DTMM_BUILD_TESTS=OFF",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        if os.environ.get("TMM_WITH_CUDA"):
            configure.append(f"-DTMM_WITH_CUDA={os.environ['TMM_WITH_CUDA']}")
        if subprocess.run(["ninja", "--version"], capture_output=True).returncode == 0:
            configure += ["-G", "Ninja"]
        subprocess.run(configure, check=True)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "tmm_python", "-j", jobs], check=True)


setup(
    name="tmm",
    version="0.1.0",
    description="Toeplitz MLP Mixers: fused causal-Toeplitz ops for PyTorch and a model zoo",
    packages=find_packages(include=["tmm", "tmm.*"]),
    ext_modules=[Extension("tmm._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["torch>=2.11,<2.16"],
    zip_safe=False,
)
