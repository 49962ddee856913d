"""The package's import-time guard and build information."""
import subprocess
import sys

import tmm


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
