"""The CPU FFT path's transform sizes (docs/ops.md, "Transform size rule"):
mixed-radix sizes n = 4 * 2^a 3^b 5^c chosen by a cost model, forward and
backward against the float64 references, at odd, prime and mixed-radix
lengths, at sizes forced through TMM_CPU_FFT_SIZE (every radix and order of
passes), and under the power-of-two rule the model replaced."""

import pytest
import torch

import tmm
from lab.bench.floor import size_rule
from tmm.testing import causal_toeplitz_backward_reference, causal_toeplitz_dense, causal_toeplitz_fft, make_inputs

op = torch.ops.tmm.causal_toeplitz
op_bwd = torch.ops.tmm.causal_toeplitz_backward

LENGTHS = [1, 2, 3, 5, 7, 97, 100, 129, 250, 1000, 1025, 2049, 3000]
# (G, K) with C = 8: the packed uniform product, the general one (taps and
# group masks), one channel per group.
LAYOUTS = [(1, 1), (2, 3), (8, 1)]


def check(x, w, b, gy, tol_dtype, what=""):
    L = x.shape[1]
    ref = causal_toeplitz_fft if L > 300 else causal_toeplitz_dense
    y = op(x, w, b)
    gx, gw, gb = op_bwd(gy, x, w, [True, True, True])
    ey = ref(x.double(), w.double(), None if b is None else b.double())
    egx, egw, egb = causal_toeplitz_backward_reference(gy, x, w, fft=L > 300)
    tol = tmm.testing.tolerance(tol_dtype)
    for name, a, e in (("y", y, ey), ("grad_x", gx, egx), ("grad_weight", gw, egw), ("grad_bias", gb, egb)):
        tmm.testing.assert_close(a, e, tol_dtype, f"{what} {name}", tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("G,K", LAYOUTS, ids=[f"G{g}K{k}" for g, k in LAYOUTS])
@pytest.mark.parametrize("L", LENGTHS)
def test_lengths_match_the_reference(L, G, K, dtype):
    B = 2 if L < 1000 else 1
    x, w, b, gy = make_inputs(B, L, 8, G, K, L + 2, dtype=dtype, seed=L)
    with tmm.ops.path("fft"):
        check(x, w, b, gy, dtype, f"L={L} G={G} K={K}")


# Sizes forced one by one: every radix (4 first, then 4s, 5s, 3s, a last 2),
# each alone and mixed, at the longest length the size holds (n = 2L) and a
# shorter one.
SIZES = [4, 8, 12, 16, 20, 24, 32, 36, 40, 48, 60, 72, 80, 100, 108, 120, 160, 180, 240, 300, 320, 360, 500, 540,
         600, 720, 900, 1000, 1200, 1500, 2000, 2160, 3000]


@pytest.mark.parametrize("n", SIZES)
def test_forced_sizes_match_the_reference(n):
    for L, (G, K) in ((n // 2, (1, 1)), (n // 3 + 1, (2, 3)), (n // 2, (8, 1))):
        x, w, b, gy = make_inputs(1, L, 8, G, K, L, dtype=torch.float64, seed=n)
        with size_rule(str(n)), tmm.ops.path("fft"):
            check(x, w, b, gy, torch.float64, f"n={n} L={L} G={G} K={K}")


@pytest.mark.parametrize("L", [100, 1025, 3000])
def test_power_of_two_rule_still_matches(L):
    x, w, b, gy = make_inputs(1, L, 8, 2, 3, L, dtype=torch.float64, seed=1)
    with size_rule("pow2"), tmm.ops.path("fft"):
        check(x, w, b, gy, torch.float64, f"pow2 L={L}")


def test_sizes_agree_to_rounding():
    """Two transform sizes compute the same convolution: their results differ
    by rounding only (float32: a few ulps of the output's scale)."""
    x, w, b, _ = make_inputs(2, 1000, 32, 1, 1, 1000, dtype=torch.float32, seed=3)
    with tmm.ops.path("fft"):
        ys = []
        for rule in ("2000", "2048", "2400", "3000", None):
            with size_rule(rule):
                ys.append(op(x, w, b).double())
    scale = ys[0].abs().max().item()
    for y in ys[1:]:
        assert (y - ys[0]).abs().max().item() <= 2e-6 * scale


@pytest.mark.parametrize("value", ["6", "14", "1000", "abc", "1999"])
def test_bad_forced_size_is_an_error_naming_the_variable(value):
    x, w, b, _ = make_inputs(1, 1000, 8, 1, 1, 1000, dtype=torch.float32)
    with size_rule(value), tmm.ops.path("fft"), pytest.raises(Exception, match="TMM_CPU_FFT_SIZE"):
        op(x, w, b)


@pytest.mark.parametrize("L", [1025, 3000])
def test_mixed_sizes_are_thread_count_independent(L, restore_threads):
    x, w, b, gy = make_inputs(3, L, 64, 2, 3, L, dtype=torch.float32, seed=L)
    results = []
    with tmm.ops.path("fft"):
        for n in (1, 2):
            torch.set_num_threads(n)
            results.append((op(x, w, b),) + tuple(op_bwd(gy, x, w, [True, True, True])))
    for name, r1, r2 in zip(("y", "grad_x", "grad_weight", "grad_bias"), *results):
        assert torch.equal(r1, r2), f"{name} differs between 1 and 2 threads at L={L}"


@pytest.mark.parametrize("L", [1025, 2048])
def test_block_size_changes_no_result(L, monkeypatch):
    """The recursion into blocks (LaneFft's forward, inverse and the fused
    convolve_padded) at a block size small enough to recurse several levels:
    float64 against the reference, float32 bitwise equal to the default
    block size, for every layout (the fused row product of uniform tiles,
    the pair products of the others)."""
    with tmm.ops.path("fft"):
        for G, K in LAYOUTS:
            x, w, b, gy = make_inputs(2, L, 40, G, K, L, dtype=torch.float64, seed=L + G)
            monkeypatch.setenv("TMM_CPU_FFT_BLOCK_BYTES", "2048")
            check(x, w, b, gy, torch.float64, f"blocks of 2 KiB L={L} G={G} K={K}")
            x, w, b, gy = (t.float() for t in (x, w, b, gy))
            results = []
            for block in ("2048", None):
                if block is None:
                    monkeypatch.delenv("TMM_CPU_FFT_BLOCK_BYTES")
                else:
                    monkeypatch.setenv("TMM_CPU_FFT_BLOCK_BYTES", block)
                results.append((op(x, w, b),) + tuple(op_bwd(gy, x, w, [True, True, True])))
            for name, r1, r2 in zip(("y", "grad_x", "grad_weight", "grad_bias"), *results):
                assert torch.equal(r1, r2), f"{name} depends on the block size at L={L} G={G} K={K}"
