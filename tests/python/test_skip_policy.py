"""The skip policy of conftest.py (docs/testing.md, "What a green run
means"), run on small test files with this checkout's conftest.py and
pyproject.toml: a skip that EXPECTED_SKIPS does not name fails the run, so
does an xfail that EXPECTED_XFAILS does not name, and an unexpected pass of
an xfail (xfail_strict); the AVX2-fallback skip is expected only on a CPU
with AVX-512."""
import shutil
from pathlib import Path

import pytest

import tmm

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
AVX2_SKIP = "needs an x86-64 dispatched build on a CPU without AVX-512 (this one: ['x'])"


def run(pytester, body):
    shutil.copy(REPO / "tests" / "python" / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(REPO / "pyproject.toml", pytester.path / "pyproject.toml")
    pytester.makepyfile(test_policed="import pytest\n\n" + body)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_an_unnamed_skip_fails_the_run(pytester):
    r = run(pytester, "def test_a():\n    pytest.skip('not today')\n")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*unexpected skips or xfails*", "*test_a: skip: not today"])


def test_an_unnamed_xfail_fails_the_run(pytester):
    r = run(pytester, "@pytest.mark.xfail(reason='flaky')\ndef test_a():\n    assert False\n")
    r.assert_outcomes(xfailed=1)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*test_a: xfail: flaky"])


def test_an_xfail_that_passes_fails(pytester):
    r = run(pytester, "@pytest.mark.xfail(reason='flaky')\ndef test_a():\n    pass\n")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*XPASS(strict)*"])


def test_the_avx2_fallback_skip_only_on_a_cpu_with_avx512(pytester):
    r = run(pytester, f"def test_a():\n    pytest.skip({AVX2_SKIP!r})\n")
    r.assert_outcomes(skipped=1)
    if "avx512" in tmm.ops.cpu_capabilities():
        assert r.ret == pytest.ExitCode.OK, r.stdout.str()
    else:
        assert r.ret == pytest.ExitCode.TESTS_FAILED
        r.stdout.fnmatch_lines(["*test_a: skip: needs an x86-64 dispatched build*"])
