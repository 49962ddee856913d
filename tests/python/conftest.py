"""Shared fixtures for the tmm Python tests.

The comparison metric and the tolerances are tmm.testing's (the project's one
table, tmm/tolerances.json): max|actual - expected| / max|expected| against
a float64 reference computed from the same (rounded) inputs.

Options (the GPU check, scripts/gpu_check.py, runs the op tests with them):
  --device cpu|cuda   the device of the tests that take the `device` fixture;
                      `kernel_path` parametrizes a test over that device's
                      paths (cpu: direct, fft; cuda: cufft, fused); on cuda the
                      caching allocator is filled with NaN before each test.
  --records FILE      one JSON line per test outcome, appended and flushed as
                      each test ends (a killed run leaves the finished ones).
  --deadline EPOCH    tests that would start later are skipped ("deadline").

No silent skips: skip reasons are printed (-rs, pyproject.toml), and a skip
is allowed only where EXPECTED_SKIPS names its reason and the reason holds on
this machine (no GPU, say); any other skip fails the run, listed at the end.
An expected failure is policed the same way: xfail is strict (an unexpected
pass fails, pyproject.toml), and an xfail that EXPECTED_XFAILS does not name
fails the run too.
"""

import importlib.util
import json
import os
import re
import time
from pathlib import Path

import pytest
import torch

import tmm
from tmm import testing

REPO = Path(__file__).resolve().parents[2]

TOLERANCE = testing.TOLERANCE
rel_err = testing.rel_err
KERNEL_PATHS = {"cpu": ("direct", "fft"), "cuda": ("cufft", "fused")}
_RECORDS_FILE = [None]  # --records, set in pytest_configure (reports do not carry the config)

# The skips a green run may contain: (reason, a full match of the skip's
# message, whether it is expected on this machine). Nothing else may skip:
# a missing test dependency or an unbuilt binary is a failure, not a skip.
_NO_GPU = not torch.cuda.is_available()
_AVX512 = "avx512" in tmm.ops.cpu_capabilities()
EXPECTED_SKIPS = (
    ("GPU-only case, no CUDA device here",
     r"CUDA not available on this machine|no CUDA device|(load\(device='cuda'\) )?needs a CUDA device", _NO_GPU),
    ("the AVX2 fallback test needs a CPU without AVX-512 (this one has it)",
     r"needs an x86-64 dispatched build on a CPU without AVX-512 .*", _AVX512),
    ("--deadline passed (the GPU check's time limit)", r"deadline", None),  # None: when --deadline is given
)
# The expected failures a green run may contain, as EXPECTED_SKIPS: (reason,
# a full match of the xfail's reason, whether it is expected on this machine).
EXPECTED_XFAILS = ()
_UNEXPECTED_SKIPS = []
_CONFIG = [None]


def pytest_terminal_summary(terminalreporter):
    if _UNEXPECTED_SKIPS:
        terminalreporter.section("unexpected skips or xfails (not in conftest.EXPECTED_SKIPS or EXPECTED_XFAILS): "
                                 "the run fails", red=True)
        for line in _UNEXPECTED_SKIPS:
            terminalreporter.line(line)


def pytest_sessionfinish(session):
    if _UNEXPECTED_SKIPS and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", choices=sorted(KERNEL_PATHS),
                     help="device of the op tests (tmm: default cpu)")
    parser.addoption("--records", default=None, metavar="FILE",
                     help="append one JSON line per test outcome to FILE, flushed as each test ends")
    parser.addoption("--deadline", type=float, default=None, metavar="EPOCH",
                     help="skip the tests that would start after this time (seconds since the epoch)")


def pytest_configure(config):
    config.addinivalue_line("markers", "compile: torch.compile tests (a few seconds each)")
    config.addinivalue_line("markers", "cuda: needs a CUDA device")
    # opcheck's internals still touch torch.jit; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
    if config.getoption("device") == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("--device cuda: torch.cuda.is_available() is False on this machine")
    _RECORDS_FILE[0] = config.getoption("records")
    _CONFIG[0] = config


def pytest_generate_tests(metafunc):
    if "kernel_path" in metafunc.fixturenames:
        metafunc.parametrize("kernel_path", KERNEL_PATHS[metafunc.config.getoption("device")])


def pytest_runtest_setup(item):
    deadline = item.config.getoption("deadline")
    if deadline is not None and time.time() > deadline:
        pytest.skip("deadline")


def _skip_message(report):
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr)


def _check_skip(report, config):
    if report.outcome != "skipped":
        return
    if hasattr(report, "wasxfail"):
        message, table, kind = report.wasxfail, EXPECTED_XFAILS, "xfail"
    else:
        message, table, kind = _skip_message(report), EXPECTED_SKIPS, "skip"
    for _, pattern, expected in table:
        if expected is None:
            expected = config.getoption("deadline") is not None
        if expected and re.fullmatch(pattern, message):
            return
    _UNEXPECTED_SKIPS.append(f"{report.nodeid}: {kind}: {message}")


def pytest_collectreport(report):
    _check_skip(report, _CONFIG[0])  # a module-level skip (importorskip) while collecting


def pytest_runtest_logreport(report):
    """--records: the outcome of each test once it is known (a failed or
    skipped setup, the call, a failed teardown). Also notes unexpected skips."""
    _check_skip(report, _CONFIG[0])
    path = _RECORDS_FILE[0]
    if not path or not (report.when == "call" or report.outcome != "passed"):
        return
    message = ""
    if report.outcome == "skipped":
        message = _skip_message(report)
    elif report.outcome == "failed":
        message = str(report.longrepr)[-2000:]
    line = dict(test=report.nodeid, when=report.when, outcome=report.outcome,
                duration_s=round(report.duration, 4), message=message)
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()


@pytest.fixture(scope="session")
def device(request):
    """The --device of this run: "cpu" (default) or "cuda"."""
    return request.config.getoption("device")


@pytest.fixture(autouse=True)
def _poison_cuda(request):
    if request.config.getoption("device") == "cuda":
        testing.poison_cuda_allocator()


@pytest.fixture
def assert_close():
    """assert_close(actual, expected, dtype, what="", tol=None): tmm.testing.assert_close
    with the tolerance of `dtype` (the dtype the op computed in)."""

    def check(actual, expected, dtype, what="", tol=None):
        testing.assert_close(actual, expected, dtype, what, tol)

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
