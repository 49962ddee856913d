"""tmm.ops.path (the kernel path option): validation, the context manager's
restore (nested, on errors), process-wide visibility, and that each forced
CPU path runs and matches the reference on shapes auto sends elsewhere."""

import threading

import pytest
import torch

import tmm
from tmm.ops.reference import causal_toeplitz_backward_reference, causal_toeplitz_dense

op = torch.ops.tmm.causal_toeplitz
op_bwd = torch.ops.tmm.causal_toeplitz_backward


def inputs(B, L, C, G, K, dtype=torch.float64):
    x = torch.randn(B, L, C, dtype=dtype)
    w = torch.randn(G, K, L + 2, dtype=dtype) / (K * L) ** 0.5
    b = torch.randn(G, L + 2, dtype=dtype)
    return x, w, b


def test_default_and_names():
    assert tmm.ops.get_path() == "auto"
    assert tmm.ops.PATHS == ("auto", "direct", "fft", "cufft", "fused")
    assert tmm.ops.direct_crossover_length() == 24


@pytest.mark.parametrize("name", tmm.ops.PATHS)
def test_context_manager_sets_and_restores(name):
    with tmm.ops.path(name):
        assert tmm.ops.get_path() == name
    assert tmm.ops.get_path() == "auto"


def test_nested_and_restored_after_an_error():
    with pytest.raises(KeyError):
        with tmm.ops.path("fft"):
            with tmm.ops.path("direct"):
                assert tmm.ops.get_path() == "direct"
            assert tmm.ops.get_path() == "fft"
            raise KeyError("inside")
    assert tmm.ops.get_path() == "auto"


@pytest.mark.parametrize("bad", ["FFT", "cuda", "", "direct "])
def test_unknown_name_is_a_clear_error_before_the_block(bad):
    entered = False
    with pytest.raises(ValueError, match=r"expected auto, direct, fft, cufft or fused, got '" + bad + "'"):
        with tmm.ops.path(bad):
            entered = True
    assert not entered and tmm.ops.get_path() == "auto"
    with pytest.raises(ValueError, match="got '" + bad + "'"):
        tmm.ops.set_path(bad)


def test_set_path_persists_until_changed():
    try:
        tmm.ops.set_path("direct")
        assert tmm.ops.get_path() == "direct"
    finally:
        tmm.ops.set_path("auto")


def test_process_wide_other_threads_see_it():
    seen = []
    with tmm.ops.path("fft"):
        t = threading.Thread(target=lambda: seen.append(tmm.ops.get_path()))
        t.start()
        t.join()
    assert seen == ["fft"]


# (B, L, C, G, K): auto takes direct for L*K <= 24 and fft above; K > 16 runs one call per tap.
SHAPES = [(2, 6, 8, 2, 3), (4, 16, 12, 3, 3), (2, 40, 8, 1, 1), (1, 9, 40, 2, 17), (2, 1, 4, 4, 1)]


@pytest.mark.parametrize("name", ["direct", "fft"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=["B{}L{}C{}G{}K{}".format(*s) for s in SHAPES])
def test_each_cpu_path_matches_the_reference(shape, dtype, name, assert_close):
    x, w, b = inputs(*shape, dtype=dtype)
    gy = torch.randn_like(x)
    with tmm.ops.path(name):
        y = op(x, w, b)
        gx, gw, gb = op_bwd(gy, x, w, [True, True, True])
    assert_close(y, causal_toeplitz_dense(x.double(), w.double(), b.double()), dtype, "y")
    ex, ew, eb = causal_toeplitz_backward_reference(gy.double(), x.double(), w.double())
    assert_close(gx, ex, dtype, "grad_x")
    assert_close(gw, ew, dtype, "grad_weight")
    assert_close(gb, eb, dtype, "grad_bias")


def test_forcing_a_path_is_seen():
    """Direct and FFT round differently in float32: bitwise-equal results would
    mean the forced path was ignored. L*K = 40 > 24, so auto is fft."""
    x, w, b = inputs(2, 40, 8, 2, 1, dtype=torch.float32)
    with tmm.ops.path("direct"):
        direct = op(x, w, b)
    with tmm.ops.path("fft"):
        fft = op(x, w, b)
    assert not torch.equal(direct, fft)
    assert torch.equal(op(x, w, b), fft)


@pytest.mark.parametrize("name", ["cufft", "fused"])
def test_cuda_paths_on_cpu_run_autos_choice(name):
    for L in (5, 100):
        x, w, b = inputs(2, L, 6, 3, 2, dtype=torch.float32)
        expected = op(x, w, b)
        with tmm.ops.path(name):
            assert torch.equal(op(x, w, b), expected)


def test_backward_through_autograd_uses_the_path():
    x, w, b = inputs(2, 40, 8, 2, 1, dtype=torch.float32)
    grads = {}
    for name in ("direct", "fft"):
        xl = x.clone().requires_grad_()
        with tmm.ops.path(name):
            op(xl, w, b).square().sum().backward()
        grads[name] = xl.grad
    assert not torch.equal(grads["direct"], grads["fft"])
    torch.testing.assert_close(grads["direct"], grads["fft"], rtol=1e-4, atol=1e-4)


def test_cpu_algorithm_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match="tmm.ops.path"):
        ctx = tmm.ops.cpu_algorithm("direct")
    with ctx:
        assert tmm.ops.get_path() == "direct"
    assert tmm.ops.get_path() == "auto"
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="'cufft'"):
        tmm.ops.cpu_algorithm("cufft")
