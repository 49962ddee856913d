#!python
"""The `tmm` command on PATH, and where the installed C++ pieces are (the
package folder tmm/ is also a CMake install prefix: bin/tmm, lib/, include/tmm/,
lib/cmake/tmm_torch/; docs/install.md, docs/cpp.md). setup.py installs this
file as the module tmm._launcher (python -m tmm) and as the script `tmm`, which
starts the C++ tool without importing torch (seconds): it finds this Python's
torch, checks its release and puts its libraries on the loader's path. Hence
the standard library only, and no relative imports.
"""
import importlib.util
import os
import re
import sys
from pathlib import Path


def _located(name):
    """The folder of package `name` for this Python, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"tmm: the {name} package is not installed for {sys.executable}")
    return Path(list(spec.submodule_search_locations)[0])


def _version_in(path, pattern):
    match = re.search(pattern, path.read_text()) if path.is_file() else None
    return match.group(1) if match else None


def _checked_torch():
    """torch's folder, after checking that it is the release tmm was built against."""
    tmm_dir, torch_dir = _located("tmm"), _located("torch")
    built = _version_in(tmm_dir / "_build_info.py", r'torch_version = "([^"]+)"')
    found = _version_in(torch_dir / "version.py", r"__version__ = '([^']+)'")
    if built is None or found is None:
        raise SystemExit(f"tmm: cannot read the torch versions ({tmm_dir / '_build_info.py'}, {torch_dir / 'version.py'})")
    if built != found:
        raise SystemExit(
            f"tmm: tmm was built against torch {built} but this Python has torch {found} ({torch_dir}); "
            "reinstall tmm for this torch (pip install --no-build-isolation .)"
        )
    return torch_dir


def installed_prefix():
    """The installed package's folder, when it holds the C++ install tree."""
    prefix = _located("tmm")
    if not (prefix / "lib" / "cmake" / "tmm_torch" / "tmm_torchConfig.cmake").is_file():
        raise SystemExit(
            f"tmm: {prefix} holds no C++ install tree (a source checkout?): there the tool is build/bin/tmm and "
            "the CMake package is installed by `cmake --install build --prefix DIR`; pip install --no-build-isolation . "
            "installs both inside the package"
        )
    return prefix


def cmake_prefix_path():
    """CMAKE_PREFIX_PATH for find_package(tmm_torch): tmm's prefix and the CMake
    prefix of the torch it was built against (torch.utils.cmake_prefix_path)."""
    prefix = installed_prefix()
    return f"{prefix};{_checked_torch() / 'share' / 'cmake'}"


def run_tool(argv):
    """Replaces this process with the C++ tool run on `argv`."""
    exe = installed_prefix() / "bin" / "tmm"
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"tmm: {exe} is missing or not executable; reinstall tmm")
    torch_dir = _checked_torch()
    # torch's libraries, and the CUDA libraries of pip's nvidia-* packages,
    # which torch's own libraries do not point to (import torch preloads them).
    dirs = [torch_dir / "lib", *sorted(torch_dir.parent.glob("nvidia/*/lib"))]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*map(str, dirs), *filter(None, [env.get("LD_LIBRARY_PATH")])])
    os.execve(exe, [str(exe), *argv], env)


if __name__ == "__main__":
    run_tool(sys.argv[1:])
