"""Shared fixtures for the tmm Python tests.

The comparison metric is relative to the largest magnitude of the expected
tensor: max|actual - expected| / max|expected|. Reduced-precision results are
compared with a float64 reference computed from the same (rounded) inputs, so
the tolerance only has to cover float32 arithmetic inside the op plus the final
rounding to the output dtype.
"""

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

# max|actual - expected| / max|expected|, per result dtype.
TOLERANCE = {
    torch.float64: 1e-10,
    torch.float32: 1e-4,
    torch.float16: 2e-3,  # half an ulp is 2^-11 ~ 4.9e-4 of the value
    torch.bfloat16: 1e-2,  # half an ulp is 2^-8 ~ 3.9e-3 of the value
}


def pytest_configure(config):
    config.addinivalue_line("markers", "compile: torch.compile tests (a few seconds each)")
    config.addinivalue_line("markers", "cuda: needs a CUDA device")
    # opcheck's internals still touch torch.jit; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


def rel_err(actual, expected):
    """max|actual - expected| / max|expected| in float64 (0 for empty tensors)."""
    assert actual.shape == expected.shape, (tuple(actual.shape), tuple(expected.shape))
    if expected.numel() == 0:
        return 0.0
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    assert torch.isfinite(a).all(), "result has non-finite entries"
    scale = e.abs().max().item()
    diff = (a - e).abs().max().item()
    return diff / scale if scale > 0 else diff


@pytest.fixture
def assert_close():
    """assert_close(actual, expected, dtype, what=""): shape and rel_err check
    with the tolerance of `dtype` (the dtype the op computed in)."""

    def check(actual, expected, dtype, what="", tol=None):
        tol = TOLERANCE[dtype] if tol is None else tol
        err = rel_err(actual, expected)
        assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.1e} ({dtype})"

    return check


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def restore_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.fixture
def one_thread(restore_threads):
    """Tiny models gain nothing from threads, and on a loaded 2-core machine
    OpenMP's spinning workers make each call ~100x slower."""
    torch.set_num_threads(1)
