"""The one-shot GPU check (scripts/gpu_check.sh, lab/bench/gpu_check/) in
its CPU mode: its Python half end to end on a small selection, the deadline
and a kill mid-run (both leave a readable partial gpu_check.json), the
verdict logic, and the shell script's dry run and build helpers. .ci/run
runs the whole shell script in CPU mode."""
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from lab.bench.gpu_check import summary, zoo_step
from tmm.testing import rel_err

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.py"
FEW_TESTS = ["tests/python/test_causal_toeplitz.py::test_gradcheck",
             "tests/python/test_causal_toeplitz.py::test_forced_path_edge_sizes"]


def check(out, *args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def report(out):
    run = check(out, "--report")
    assert run.stdout.splitlines()[-1].startswith("gpu_check exit status: "), run.stdout[-2000:] + run.stderr[-2000:]
    return run, json.loads((out / "gpu_check.json").read_text())


@pytest.mark.timeout(900)
def test_cpu_mode_end_to_end(tmp_path):
    run = check(tmp_path, "--budget", "400", "--tests", *FEW_TESTS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # what gpu_check.sh does around it in CPU mode: the sanitizer case, unsanitized
    san = check(tmp_path, "--sanitize-case")
    assert san.returncode == 0 and "sanitize case done" in san.stdout
    (tmp_path / "sanitizer.log").write_text(san.stdout)
    (tmp_path / "steps.tsv").write_text("preflight\t0\t1\t\nbuild\t0\t2\t\ncheck\t0\t60\t\nsanitizer\tcpu\t5\t\n")
    run, data = report(tmp_path)
    assert run.returncode == 0 and data["exit_status"] == 0 and data["verdict"] == "PASS", run.stdout[-3000:]
    assert data["complete"] and not data.get("truncated") and not data["failures"] and not data["not_run"]
    tests = data["tests"]["records"]
    assert tests and all(r["outcome"] == "passed" for r in tests)
    assert any("[direct-" in r["test"] for r in tests) and any("[fft-" in r["test"] for r in tests)
    assert [(r["path"], r["ok"]) for r in data["graphs"]] == [("direct", True), ("fft", True)]
    zoo = {(r["arch"], r["mode"]): r for r in data["zoo"]}
    assert len(zoo) == 8 and all(r["ok"] for r in zoo.values()), [r for r in zoo.values() if not r["ok"]]
    assert data["copy_bandwidth"]["bytes_per_s"] > 0
    bench = data["bench"]["float32"]
    assert bench["complete"] and bench["cells"] and all(c["ok"] for c in bench["checks"])
    assert {c["impl"] for c in bench["cells"]} == {"ours", "ours_direct", "ours_fft", "fft", "dense"}
    assert data["sanitizer"]["status"] == "cpu"
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("# tmm GPU check (cpu)") and "PASS (exit 0)" in table
    assert "## benchmark, float32, cpu" in table and "ours:direct ms" in table
    for name in ("tests.jsonl", "pytest.log", "junit.xml", "bench-float32/results.json", "bench-float32/table.md"):
        assert (tmp_path / name).exists(), name


def test_a_tiny_budget_leaves_a_partial_readable_json(tmp_path):
    # 12 s: too little for the graphs check (10 s, and 2 kept for the bandwidth after it); the bandwidth runs
    run = check(tmp_path, "--budget", "12", "--only", "graphs,bandwidth")
    assert run.returncode == summary.EXIT_PARTIAL, run.stdout[-2000:] + run.stderr[-2000:]
    run, data = report(tmp_path)
    assert run.returncode == 3 and data["verdict"] == "PARTIAL" and data["complete"] and data["truncated"]
    assert data["skipped_sections"] == [{"section": "graphs", "reason": "deadline"}]
    assert "section graphs: deadline" in data["not_run"]
    assert data["copy_bandwidth"]["bytes_per_s"] > 0
    assert "PARTIAL (exit 3)" in (tmp_path / "table.md").read_text()


@pytest.mark.timeout(600)
def test_a_kill_mid_run_leaves_a_readable_json(tmp_path):
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--device", "cpu", "--out", str(tmp_path), "--budget", "300",
                             "--only", "zoo,bench"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = tmp_path / "gpu_check.json"
    try:
        for _ in range(1200):  # until two training steps are recorded
            if path.exists() and len(json.loads(path.read_text()).get("zoo", [])) >= 2:
                break
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    data = json.loads(path.read_text())  # valid JSON, whatever the moment
    assert data["complete"] is False and data["schema"] == "tmm.gpu_check/2" and len(data["zoo"]) >= 2
    run, data = report(tmp_path)
    assert run.returncode == summary.EXIT_PARTIAL
    assert any("did not finish" in n for n in data["not_run"])


def test_sanitizer_verdicts():
    v = summary.sanitizer_verdict
    assert v("sanitize case done (18 calls)\n========= ERROR SUMMARY: 0 errors\n", "0")["status"] == "pass"
    assert v("========= Invalid __global__ read\n========= ERROR SUMMARY: 3 errors\n", "86")["verdict"].startswith("FAIL: 3")
    assert v("", "124")["status"] == "timeout"
    assert v("compute-sanitizer is not on PATH\n", "skipped")["status"] == "skipped"
    assert v("Traceback ...\nImportError: x\n", "1")["status"] == "error"
    assert v("sanitize case done\n", "cpu")["status"] == "cpu"


def test_exit_status():
    ok_test = {"test": "t::a", "outcome": "passed", "duration_s": 0.1, "message": ""}
    base = {"complete": True, "tests": {"rc": 0, "records": [ok_test]}, "sanitizer": {"status": "pass"},
            "steps": [{"name": "build", "rc": "0", "seconds": "1"}]}
    assert summary.exit_status(base) == summary.EXIT_OK
    autocast = {**base, "zoo": [{"arch": "tmm", "mode": "bf16 autocast", "ok": False, "error": "RuntimeError: x"}]}
    assert summary.exit_status(autocast) == summary.EXIT_WRONG and "bf16 autocast" in summary.failures(autocast)[0]
    wrong = {**base, "graphs": [{"path": "fused", "ok": False, "error": "x"}]}
    assert summary.exit_status(wrong) == summary.EXIT_WRONG
    failed = {**base, "tests": {"rc": 1, "records": [ok_test, {**ok_test, "outcome": "failed", "message": "E x\nboom"}]}}
    assert summary.exit_status(failed) == summary.EXIT_WRONG and "boom" in summary.failures(failed)[0]
    deadline = {**base, "tests": {"rc": 0, "records": [ok_test, {**ok_test, "outcome": "skipped", "message": "deadline"}]}}
    assert summary.exit_status(deadline) == summary.EXIT_PARTIAL
    build = {**base, "steps": [{"name": "build", "rc": "1", "seconds": "3"}]}
    assert summary.exit_status(build) == summary.EXIT_NOT_RUN
    timeout = {**base, "sanitizer": {"status": "timeout", "verdict": "timed out (inconclusive)"}}
    assert summary.exit_status(timeout) == summary.EXIT_PARTIAL
    assert summary.exit_status({"steps": []}) == summary.EXIT_NOT_RUN
    no_gpu = {"steps": [{"name": "preflight", "rc": "1", "seconds": "2"}],
              "preflight": ["preflight (gpu mode)", "  gpu:               MISSING (nvidia-smi: not found)"]}
    assert summary.exit_status(no_gpu) == summary.EXIT_NOT_RUN
    assert "gpu:               MISSING" in summary.not_run(no_gpu)[0]


def _judged(records):
    data = {"complete": True, "zoo": records, "steps": [{"name": "check", "rc": "1", "seconds": "1"}]}
    return summary.exit_status(data), summary.summary(data)


def test_an_autocast_step_that_raises_fails_the_check():
    """The op's AutocastCPU kernel swapped for one that does not cast (as if
    it were not registered): the TMM bf16 step meets mixed dtypes, raises,
    and the check says KERNEL WRONG."""
    def no_cast(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)):
            return torch.ops.tmm.causal_toeplitz.default(*args, **kwargs)

    lib = torch.library.Library("tmm", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
            lib.impl("causal_toeplitz", no_cast, "AutocastCPU")
        records = zoo_step.zoo_steps("cpu", time.time() + 120, archs=("tmm",))
    finally:
        lib._destroy()  # the real autocast kernel again
    by_mode = {r["mode"]: r for r in records}
    assert by_mode["float32"]["ok"] and by_mode["bf16 autocast"]["ok"] is False
    assert "expected weight to have x's dtype" in by_mode["bf16 autocast"]["error"]
    status, text = _judged(records)
    assert status == summary.EXIT_WRONG and "tmm bf16 autocast FAIL" in text and "KERNEL WRONG" in text
    assert all(r["ok"] for r in zoo_step.zoo_steps("cpu", time.time() + 120, archs=("tmm",)))  # restored


def test_a_wrong_small_gradient_under_autocast_fails_the_check(monkeypatch):
    """One small gradient (a Hyena filter's sine frequencies, ~150x below the
    largest) halved in the bf16 step: pooled with the others it would pass
    (0.3%), judged against its own scale the step fails."""
    real, name, pooled = zoo_step._step, "blocks.1.mixer.filter.freq", []

    def step(arch, device, autocast):
        out = real(arch, device, autocast)
        if autocast:
            out["grads"][name] *= 0.5
        else:
            pooled.append(out["grads"])
        return out

    monkeypatch.setattr(zoo_step, "_step", step)
    records = zoo_step.zoo_steps("cpu", time.time() + 120, archs=("hyena",))
    bad = [r for r in records if r["mode"] == "bf16 autocast"][0]
    assert bad["ok"] is False and bad["worst_grad"] == name and bad["err_grad_max"] > bad["tol"]
    assert _judged(records)[0] == summary.EXIT_WRONG
    want = pooled[0]
    halved = {n: g * 0.5 if n == name else g for n, g in want.items()}
    assert rel_err(torch.cat([g.flatten() for g in halved.values()]), torch.cat([g.flatten() for g in want.values()])) \
        < 0.1 * bad["tol"]


def shell(body, **env):
    """bash with scripts/gpu_check.sh sourced (its functions, main not run)."""
    return subprocess.run(["bash", "-c", f"source scripts/gpu_check.sh; PY={sys.executable}; {body}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})


@pytest.mark.skipif(not Path("/usr/include/nlohmann/json.hpp").exists(), reason="no nlohmann_json headers here")
def test_dry_run_prints_the_device_call():
    run = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for line in ("command:   bash scripts/gpu_check.sh", 'carry:     ["third_party/nlohmann_json", "third_party/utf8proc"]',
                 "timeout_s: 540"):
        assert line in run.stdout
    for staged in ("third_party/nlohmann_json/include/nlohmann/json.hpp", "third_party/utf8proc/include/utf8proc.h",
                   "third_party/utf8proc/lib/libutf8proc.a"):
        assert (REPO / staged).exists(), staged
        ignored = subprocess.run(["git", "check-ignore", "-q", staged], cwd=REPO)
        assert ignored.returncode == 0, f"{staged}: what is staged must be git-ignored (it travels as carry)"


@pytest.mark.skipif(not Path("/usr/include/nlohmann/json.hpp").exists(), reason="no nlohmann_json headers here")
def test_json_stub_package_is_found_by_cmake(tmp_path):
    run = shell(f"stage_json >/dev/null && json_cmake_args {tmp_path}/stub", TMM_GPU_CHECK_JSON_STUB="1")
    assert run.returncode == 0 and run.stdout.strip() == f"-Dnlohmann_json_DIR={tmp_path}/stub", run.stderr
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.22)\nproject(p LANGUAGES CXX)\nfind_package(nlohmann_json 3 REQUIRED)\n"
        "get_target_property(inc nlohmann_json::nlohmann_json INTERFACE_INCLUDE_DIRECTORIES)\n"
        "if(NOT EXISTS \"${inc}/nlohmann/json.hpp\")\n  message(FATAL_ERROR \"no json.hpp in ${inc}\")\nendif()\n")
    cm = subprocess.run(["cmake", "-S", tmp_path / "p", "-B", tmp_path / "b", f"-Dnlohmann_json_DIR={tmp_path}/stub"],
                        capture_output=True, text=True, timeout=120)
    assert cm.returncode == 0, cm.stdout[-2000:] + cm.stderr[-2000:]


@pytest.mark.skipif(not Path("/usr/include/utf8proc.h").exists(), reason="no utf8proc here")
def test_carried_utf8proc_is_found_by_cmake(tmp_path):
    run = shell("stage_utf8proc >/dev/null && utf8proc_cmake_args", TMM_GPU_CHECK_UTF8PROC_CARRIED="1")
    carried = REPO / "third_party" / "utf8proc"
    assert run.returncode == 0 and run.stdout.split() == [f"-DUTF8PROC_INCLUDE_DIR={carried}/include",
                                                          f"-DUTF8PROC_LIBRARY={carried}/lib/libutf8proc.a"], run.stderr
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.22)\nproject(p LANGUAGES CXX)\ninclude({REPO}/cmake/utf8proc.cmake)\n"
        "get_target_property(lib tmm_utf8proc IMPORTED_LOCATION)\nmessage(STATUS \"utf8proc: ${lib}\")\n")
    cm = subprocess.run(["cmake", "-S", tmp_path / "p", "-B", tmp_path / "b", *run.stdout.split()],
                        capture_output=True, text=True, timeout=120)
    assert cm.returncode == 0, cm.stdout[-2000:] + cm.stderr[-2000:]
    assert f"utf8proc: {carried}/lib/libutf8proc.a" in cm.stdout


def test_cufft_from_the_wheel(tmp_path):
    try:
        import importlib.metadata as md

        md.distribution("nvidia-cufft")
    except md.PackageNotFoundError:
        pytest.skip("the nvidia-cufft wheel is not installed here (a CPU-only torch)")
    run = shell(f"cufft_cmake_args {tmp_path}/inc", TMM_GPU_CHECK_CUFFT_WHEEL="1")
    assert run.returncode == 0, run.stderr
    args = run.stdout.split("\n")
    assert args[0].startswith("-DCUDA_cufft_LIBRARY=") and "libcufft.so" in args[0]
    assert Path(args[0].split("=", 1)[1]).exists()
    assert args[1] == f"-DCMAKE_CXX_FLAGS=-isystem {tmp_path}/inc" and (tmp_path / "inc" / "cufft.h").exists()
