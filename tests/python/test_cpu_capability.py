"""The CPU kernels' instruction-set variants: tmm.ops.cpu_capability() and
TMM_CPU_CAPABILITY. The op runs under every capability this machine has,
each in its own process (the choice is made once per process), against the
float64 reference at the project's tolerances (tmm/tolerances.json)."""

import os
import platform
import subprocess
import sys
import textwrap

import pytest

import tmm

CAPABILITIES = tmm.ops.cpu_capabilities()

# Run in a subprocess: the op forward and backward on both CPU paths, the
# per-tap split, strided inputs, all four dtypes, mixed-radix transform sizes
# (L = 150, 250, 1025), against the reference.
CHECK = textwrap.dedent(
    """
    import json, pathlib, sys
    import torch, tmm
    from tmm.ops.reference import causal_toeplitz_backward_reference, causal_toeplitz_dense
    expected = sys.argv[1]
    assert tmm.ops.cpu_capability() == expected, (tmm.ops.cpu_capability(), expected)
    table = json.loads((pathlib.Path(tmm.__file__).parent / "tolerances.json").read_text())
    def rel(a, e):
        a, e = a.double(), e.double()
        return ((a - e).abs().max() / e.abs().max().clamp_min(1e-300)).item()
    torch.manual_seed(0)
    worst = 0.0
    for B, L, C, G, K in [(2, 5, 6, 2, 3), (2, 37, 8, 1, 1), (1, 200, 12, 3, 2), (2, 64, 6, 6, 1), (1, 20, 36, 2, 17),
                          (1, 150, 8, 1, 1), (1, 250, 6, 2, 3), (1, 1025, 4, 4, 1)]:
        for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
            x = torch.randn(B, C, L, dtype=torch.float64).transpose(1, 2).to(dtype)
            w = (torch.randn(G, K, L + 3, dtype=torch.float64) / (K * L) ** 0.5).to(dtype)
            b = torch.randn(G, L + 3, dtype=torch.float64).to(dtype)
            gy = torch.randn(B, L, C, dtype=torch.float64).to(dtype)
            ey = causal_toeplitz_dense(x.double(), w.double(), b.double())
            eg = causal_toeplitz_backward_reference(gy.double(), x.double(), w.double())
            for path in ("direct", "fft"):
                with tmm.ops.path(path):
                    y = torch.ops.tmm.causal_toeplitz(x, w, b)
                    g = torch.ops.tmm.causal_toeplitz_backward(gy, x, w, [True, True, True])
                tol = table[str(dtype).replace("torch.", "")]
                for name, a, e in zip(("y", "grad_x", "grad_weight", "grad_bias"), (y,) + tuple(g), (ey,) + tuple(eg)):
                    err = rel(a, e)
                    worst = max(worst, err / tol)
                    assert err <= tol, f"{expected} {path} {dtype} {(B, L, C, G, K)} {name}: {err:.2e} > {tol:.0e}"
    print(f"ok {expected}: worst error {worst:.2f} of the tolerance")
    """
)


def run_python(code, *args, capability=None):
    env = dict(os.environ)
    env.pop("TMM_CPU_CAPABILITY", None)
    if capability is not None:
        env["TMM_CPU_CAPABILITY"] = capability
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_best_supported_capability_runs():
    assert CAPABILITIES, "no CPU capability at all"
    if not os.environ.get("TMM_CPU_CAPABILITY"):
        assert tmm.ops.cpu_capability() == CAPABILITIES[0]
    assert CAPABILITIES[-1] in ("default", "native")
    if platform.machine() in ("x86_64", "AMD64") and CAPABILITIES != ["native"]:
        assert set(CAPABILITIES) <= {"default", "avx2", "avx512"}


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_op_matches_the_reference_under_each_capability(capability):
    r = run_python(CHECK, capability, capability=capability)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ok {capability}" in r.stdout


def test_unknown_capability_is_an_error_naming_the_variable():
    code = textwrap.dedent(
        """
        import torch, tmm
        try:
            torch.ops.tmm.causal_toeplitz(torch.randn(1, 4, 2), torch.randn(1, 1, 4))
        except RuntimeError as e:
            print("op:", e)
        try:
            tmm.ops.cpu_capability()
        except ValueError as e:
            print("getter:", e)
        """
    )
    r = run_python(code, capability="sse9")
    assert r.returncode == 0, r.stderr
    for where in ("op:", "getter:"):
        line = next(l for l in r.stdout.splitlines() if l.startswith(where))
        assert "TMM_CPU_CAPABILITY" in line and "'sse9'" in line and CAPABILITIES[-1] in line, line


def test_a_cap_above_the_cpu_warns_and_runs_the_best_supported():
    if "avx512" in CAPABILITIES or CAPABILITIES == ["native"] or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs an x86-64 dispatched build on a CPU without AVX-512 (this one: %s)" % CAPABILITIES)
    r = run_python("import tmm; print(tmm.ops.cpu_capability())", capability="avx512")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == CAPABILITIES[0]
    assert "TMM_CPU_CAPABILITY=avx512 is above what this CPU supports" in r.stderr


def test_a_lower_cap_is_taken():
    r = run_python("import tmm; print(tmm.ops.cpu_capability())", capability=CAPABILITIES[-1])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == CAPABILITIES[-1]
    assert "TMM_CPU_CAPABILITY" not in r.stderr


CLI = os.environ.get("TMM_CLI", str(tmm.__file__).rsplit("/tmm/", 1)[0] + "/build/bin/tmm")


# capped: the lowest this build has ("default" in a dispatched build, "native" in a TMM_NATIVE_ARCH one)
@pytest.mark.parametrize("capability", [None, CAPABILITIES[-1]], ids=["best", "capped"])
def test_cli_info_reports_the_capability(tmp_path, capability):
    if not os.path.exists(CLI):
        if "TMM_CLI" in os.environ:
            pytest.fail(f"{CLI} was not built")
        pytest.skip(f"{CLI} not built (run scripts/test.sh)")
    import tmm.models

    tmm.models.build({"arch": "tmm", "vocab_size": 300, "d_model": 8, "n_layers": 1, "max_len": 16}).save(tmp_path)
    env = dict(os.environ)
    env.pop("TMM_CPU_CAPABILITY", None)
    if capability:
        env["TMM_CPU_CAPABILITY"] = capability
    r = subprocess.run([CLI, "info", "--model", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"cpu capability {capability or CAPABILITIES[0]}\n" in r.stdout
