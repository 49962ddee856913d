"""The package: its import-time guard and build information, the one
config-name resolver, the launcher's errors in a source checkout, and the
public headers' dependencies (what an installed package may expose).
Installing it with pip: test_pip_install.py."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tmm
import tmm.models

REPO = Path(__file__).resolve().parents[2]


def test_build_info_matches_running_torch():
    import torch

    assert tmm._build_info.torch_version == torch.__version__
    assert tmm.__version__ == tmm._C.__version__
    assert tmm._C.torch_version == torch.__version__


def test_import_under_another_torch_is_a_clear_error():
    code = "import torch; torch.__version__ = '0.0.1'; import tmm"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode != 0
    assert "ImportError" in run.stderr
    assert "built against torch" in run.stderr and "0.0.1" in run.stderr


# ---------------------------------------------------------------- configs


def test_every_zoo_config_has_a_name_and_the_name_its_file():
    folder = REPO / "models"
    files = sorted(folder.rglob("*.json"))
    names = tmm.models.list_configs()
    assert len(names) == len(files) and len(set(names)) == len(names)
    for path in files:
        name = path.relative_to(folder).with_suffix("").as_posix()
        assert name in names
        assert tmm.models.config_path(name).resolve() == path.resolve()
    assert {"tmm-tiny", "ablation/tmm-flat"} <= set(names)
    assert names.index("tmm-tiny") < names.index("ablation/tmm-flat")  # the main zoo first


def test_the_configs_are_package_data_linked_to_the_checkouts_models():
    # The package reads only its own configs/ (no walk up to the checkout); in
    # the checkout that is the committed link to models/.
    assert tmm.models.models_dir() == Path(tmm.__file__).resolve().parent / "configs"
    assert tmm.models.models_dir().resolve() == (REPO / "models").resolve()


def test_build_takes_any_config_name_including_sub_folders():
    model = tmm.models.build("ablation/tmm-flat")
    assert model.config["heads"] == 0  # flat: one kernel for all channels
    assert tmm.models.build("tmm-tiny").config["d_model"] == 32


def test_an_unknown_config_name_is_an_error_naming_the_known_ones():
    with pytest.raises(FileNotFoundError, match=r"no config named 'tmm-huge'.*known: .*tmm-tiny"):
        tmm.models.config_path("tmm-huge")
    with pytest.raises(FileNotFoundError, match=r"build: 'tmm-huge' is not a file; as a config name: .*tmm-tiny"):
        tmm.models.build("tmm-huge")
    with pytest.raises(FileNotFoundError, match="no config named '../models/tmm-tiny'"):
        tmm.models.config_path("../models/tmm-tiny")  # names, not paths
    with pytest.raises(FileNotFoundError, match="no such config file: 'missing.json'"):
        tmm.models.build("missing.json")
    with pytest.raises(TypeError, match="expected a config name \\(str\\), got int"):
        tmm.models.config_path(3)


# ---------------------------------------------------------------- launcher


@pytest.mark.parametrize("args", [["--cmake-prefix-path"], ["--version"]])
def test_python_m_tmm_in_a_checkout_says_where_the_tool_is(args):
    # A source checkout holds no C++ install tree inside tmm/.
    run = subprocess.run([sys.executable, "-m", "tmm", *args], capture_output=True, text=True, cwd=REPO)
    assert run.returncode != 0
    assert "holds no C++ install tree" in run.stderr and "build/bin/tmm" in run.stderr, run.stderr


def test_python_m_tmm_rejects_extra_arguments_to_cmake_prefix_path():
    run = subprocess.run([sys.executable, "-m", "tmm", "--cmake-prefix-path", "x"], capture_output=True, text=True)
    assert run.returncode != 0 and "expected no other arguments, got ['x']" in run.stderr


# ---------------------------------------------------------------- headers


def _torch_include_dirs():
    import torch  # torch.utils.cpp_extension.include_paths(), without its CUDA probing

    root = Path(torch.__file__).parent / "include"
    return [root, root / "torch" / "csrc" / "api" / "include"]


def test_public_headers_include_only_std_torch_and_tmm():
    """What csrc/include installs is compiled by consumers that have only torch
    and tmm: no header may include anything else (e.g. nlohmann/json)."""
    include = REPO / "csrc" / "include"
    generated = {"tmm/version.h"}  # configured by CMake into the build's include/
    torch_dirs = _torch_include_dirs()
    problems = []
    for header in sorted(include.rglob("*.h")):
        for line_no, line in enumerate(header.read_text().splitlines(), 1):
            m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
            if not m:
                continue
            target = m.group(1)
            standard = "/" not in target and "." not in target  # <vector>, <cstdint>, ...
            ours = (include / target).is_file() or target in generated
            torchs = any((d / target).is_file() for d in torch_dirs)
            if not (standard or ours or torchs):
                problems.append(f"{header.relative_to(REPO)}:{line_no}: #include {target}")
    assert not problems, "public headers include what an installed package does not provide:\n" + "\n".join(problems)
