"""Tests of torch.ops.tmm.causal_toeplitz and its backward against the
pure-PyTorch references in tmm.testing.

The numeric tests run on the --device of the run (conftest.py: cpu by
default; the GPU check runs this file with --device cuda), and those that take
`kernel_path` once per path of that device (cpu: direct, fft; cuda: cufft,
fused), forced with tmm.ops.path whatever auto would pick."""

import itertools
import resource
import time

import pytest
import torch

import tmm
from tmm.testing import (
    causal_toeplitz_backward_reference,
    causal_toeplitz_dense,
    causal_toeplitz_fft,
    make_inputs,
    tolerance,
)

op = torch.ops.tmm.causal_toeplitz
op_bwd = torch.ops.tmm.causal_toeplitz_backward

DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.float16]
HAS_CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="CUDA not available on this machine")

# (B, L, C, G, K, N)
SHAPES = [
    (2, 1, 4, 1, 1, 1),  # L = 1
    (2, 2, 4, 1, 1, 5),  # N > L
    (3, 7, 6, 1, 1, 7),  # odd length
    (2, 97, 8, 1, 1, 100),  # prime length
    (2, 129, 8, 4, 1, 129),  # multi-head (G = h)
    (2, 300, 16, 4, 3, 301),  # heads and a kernel
    (1, 64, 16, 1, 8, 64),  # kernel 8, flat
    (2, 33, 32, 4, 8, 40),  # kernel 8 = C/G
    (2, 50, 6, 6, 1, 50),  # G = C
    (2, 17, 6, 3, 2, 20),
    (2, 16, 12, 2, 6, 16),  # K = C/G
]
SHAPE_IDS = ["B{}L{}C{}G{}K{}N{}".format(*s) for s in SHAPES]


def ref_forward(x, w, b, fft=False):
    """float64 reference from the same (possibly rounded) inputs."""
    f = causal_toeplitz_fft if fft else causal_toeplitz_dense
    return f(x.double(), w.double(), None if b is None else b.double())


def check_forward(x, w, b, assert_close, fft_ref=False):
    y = op(x, w, b)
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
    assert y.is_contiguous()
    assert_close(y, ref_forward(x, w, b, fft_ref), x.dtype, "y")
    return y


def check_autograd(x, w, b, gy, assert_close, fft_ref=False):
    """Gradients through the autograd kernel vs the float64 reference."""
    L = x.shape[1]
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    b = None if b is None else b.detach().requires_grad_()
    y = op(x, w, b)
    inputs = (x, w) if b is None else (x, w, b)
    grads = torch.autograd.grad(y, inputs, gy)
    expected = causal_toeplitz_backward_reference(gy, x, w, fft=fft_ref)
    for name, g, e in zip(("grad_x", "grad_weight", "grad_bias"), grads, expected):
        assert g.dtype == x.dtype and g.device == x.device
        assert_close(g, e, x.dtype, name)
    assert (grads[1][..., L:] == 0).all(), "taps past L must get zero gradient"
    if b is not None:
        assert (grads[2][:, L:] == 0).all(), "bias entries past L must get zero gradient"


# ---------------------------------------------------------------------------
# Forward / backward against the references


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_forward_matches_reference(shape, dtype, bias, device, assert_close):
    x, w, b, _ = make_inputs(*shape, dtype=dtype, bias=bias, device=device)
    check_forward(x, w, b, assert_close)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_autograd_matches_reference(shape, dtype, bias, device, assert_close):
    x, w, b, gy = make_inputs(*shape, dtype=dtype, bias=bias, device=device)
    check_autograd(x, w, b, gy, assert_close)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_forced_path_matches_reference(shape, dtype, kernel_path, device, assert_close):
    """Each path of the device on every shape, whatever length auto would pick it for."""
    x, w, b, gy = make_inputs(*shape, dtype=dtype, device=device)
    with tmm.ops.path(kernel_path):
        check_forward(x, w, b, assert_close)
        check_autograd(x, w, b, gy, assert_close)


@pytest.mark.parametrize("B,L", [(0, 5), (2, 0), (2, 1)])
def test_forced_path_edge_sizes(B, L, kernel_path, device, assert_close):
    x, w, b, gy = make_inputs(B, L, 6, 2, 3, L + 3, dtype=torch.float64, device=device)
    with tmm.ops.path(kernel_path):
        check_forward(x, w, b, assert_close)
        check_autograd(x, w, b, gy, assert_close)


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(2, 7, 6, 3, 2, 9), (2, 97, 8, 2, 3, 97), (1, 300, 4, 1, 4, 300)],
                         ids=["short", "prime", "long"])
def test_noncontiguous_x(shape, dtype, layout, kernel_path, device, assert_close):
    x, w, b, gy = make_inputs(*shape, dtype=dtype, layout=layout, device=device)
    assert not x.is_contiguous() and not gy.is_contiguous()
    with tmm.ops.path(kernel_path):
        y = check_forward(x, w, b, assert_close)
        assert_close(y, op(x.contiguous(), w, b), dtype, "y vs contiguous x")
        check_autograd(x, w, b, gy, assert_close)


def test_noncontiguous_weight_bias_and_grad_y(device, assert_close):
    x, w, b, _ = make_inputs(2, 20, 8, 2, 3, 30, dtype=torch.float64, device=device)
    w_nc = torch.randn(3, 2, 60, dtype=torch.float64, device=device).transpose(0, 1)[:, :, ::2]  # (2, 3, 30)
    b_nc = torch.randn(30, 2, dtype=torch.float64, device=device).t()
    assert not w_nc.is_contiguous() and not b_nc.is_contiguous()
    check_forward(x, w_nc, b_nc, assert_close)
    gy = torch.randn(2, 8, 20, dtype=torch.float64, device=device).transpose(1, 2)
    gx, gw, gb = op_bwd(gy, x, w_nc, [True, True, True])
    ex, ew, eb = causal_toeplitz_backward_reference(gy, x, w_nc)
    assert_close(gx, ex, torch.float64, "grad_x")
    assert_close(gw, ew, torch.float64, "grad_weight")
    assert_close(gb, eb, torch.float64, "grad_bias")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("L,N", [(1000, 1000), (4096, 4096), (4097, 5000)])
def test_long_sequences(L, N, dtype, kernel_path, device, assert_close):
    """Long enough for the FFT paths (4096 is the fused path's longest);
    checked against the float64 FFT reference."""
    x, w, b, gy = make_inputs(1, L, 4, 2, 2, N, dtype=dtype, device=device)
    with tmm.ops.path(kernel_path):
        check_forward(x, w, b, assert_close, fft_ref=True)
        check_autograd(x, w, b, gy, assert_close, fft_ref=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("K", [1, 3])
def test_short_sequences(K, dtype, device, assert_close):
    """L = 16, forced onto the direct path on the CPU (auto would take FFT for K = 3)."""
    x, w, b, gy = make_inputs(4, 16, 12, 3, K, 16, dtype=dtype, device=device)
    with tmm.ops.path("direct"):
        check_forward(x, w, b, assert_close)
        check_autograd(x, w, b, gy, assert_close)


def test_python_api_matches_reference(device, assert_close):
    """tmm.ops.causal_toeplitz, with bias given every way, against the reference."""
    x, w, b, _ = make_inputs(2, 9, 6, 2, 2, 12, device=device)
    assert_close(tmm.ops.causal_toeplitz(x, w, b), ref_forward(x, w, b), torch.float32, "with bias")
    no_bias = ref_forward(x, w, None)
    assert_close(tmm.ops.causal_toeplitz(x, w), no_bias, torch.float32, "bias omitted")
    assert_close(tmm.ops.causal_toeplitz(x, w, bias=None), no_bias, torch.float32, "bias=None")


def test_weight_and_bias_past_L_are_ignored(device):
    x, w, b, _ = make_inputs(2, 10, 6, 3, 2, 25, dtype=torch.float64, device=device)
    w2, b2 = w.clone(), b.clone()
    w2[..., 10:] = 1e6
    b2[:, 10:] = -1e6
    torch.testing.assert_close(op(x, w2, b2), op(x, w, b), rtol=0, atol=0)


def test_causality(device):
    """Changing x at time s leaves y[:, :s] unchanged."""
    x, w, b, _ = make_inputs(2, 40, 8, 2, 3, 40, dtype=torch.float64, device=device)
    x2 = x.clone()
    x2[:, 25:] += 1.0
    y, y2 = op(x, w, b), op(x2, w, b)
    torch.testing.assert_close(y2[:, :25], y[:, :25], rtol=1e-12, atol=1e-12)
    assert (y2[:, 25:] - y[:, 25:]).abs().max() > 1e-3


# ---------------------------------------------------------------------------
# The backward op directly, with partial masks

MASKS = list(itertools.product([True, False], repeat=3))


@pytest.mark.parametrize("mask", MASKS, ids=lambda m: "".join("1" if v else "0" for v in m))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_backward_op_masks(mask, dtype, kernel_path, device, assert_close):
    x, w, _, gy = make_inputs(2, 13, 8, 2, 3, 17, dtype=dtype, bias=False, device=device)
    with tmm.ops.path(kernel_path):
        out = op_bwd(gy, x, w, list(mask))
    assert len(out) == 3
    expected = causal_toeplitz_backward_reference(gy, x, w)
    shapes = [x.shape, w.shape, (w.shape[0], w.shape[2])]
    for name, m, g, e, s in zip(("grad_x", "grad_weight", "grad_bias"), mask, out, expected, shapes):
        if m:
            assert g.shape == s and g.dtype == dtype and g.device == x.device, name
            assert_close(g, e, dtype, name)
        else:
            assert g.shape == (0,), f"{name} not requested: expected an empty (0,) tensor, got {tuple(g.shape)}"


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, False), (False, False, True),
                                   (False, True, True), (True, False, True)],
                         ids=["x", "w", "b", "wb", "xb"])
def test_autograd_partial_requires_grad(needs, device, assert_close):
    x, w, b, gy = make_inputs(2, 11, 6, 3, 2, 14, dtype=torch.float64, device=device)
    leaves = [t.requires_grad_(n) for t, n in zip((x, w, b), needs)]
    y = op(x, w, b)
    wanted = [t for t in leaves if t.requires_grad]
    grads = torch.autograd.grad(y, wanted, gy)
    expected = causal_toeplitz_backward_reference(gy, x, w)
    for g, e in zip(grads, [e for e, n in zip(expected, needs) if n]):
        assert_close(g, e, torch.float64)


def test_backward_op_matches_autograd(device):
    x, w, b, gy = make_inputs(2, 21, 8, 4, 2, 21, dtype=torch.float64, device=device)
    x.requires_grad_()
    w.requires_grad_()
    b.requires_grad_()
    y = op(x, w, b)
    ga = torch.autograd.grad(y, (x, w, b), gy)
    gd = op_bwd(gy, x.detach(), w.detach(), [True, True, True])
    for a, d in zip(ga, gd):
        torch.testing.assert_close(a, d, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# gradcheck in float64 for every group/kernel/bias combination

GK = [(1, 1), (1, 2), (1, 6), (2, 1), (2, 3), (3, 2), (6, 1)]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("G,K", GK, ids=[f"G{g}K{k}" for g, k in GK])
def test_gradcheck(G, K, bias, device):
    x, w, b, _ = make_inputs(2, 5, 6, G, K, 7, dtype=torch.float64, bias=bias, device=device)
    inputs = [t.requires_grad_() for t in (x, w, b) if t is not None]
    if bias:
        assert torch.autograd.gradcheck(lambda x, w, b: op(x, w, b), inputs)
    else:
        assert torch.autograd.gradcheck(lambda x, w: op(x, w), inputs)


def test_gradcheck_noncontiguous_L1(device):
    x = torch.randn(3, 4, 1, dtype=torch.float64, device=device).transpose(1, 2).requires_grad_()
    w = torch.randn(2, 2, 3, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(2, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: op(x, w, b), (x, w, b))


# ---------------------------------------------------------------------------
# torch.library.opcheck


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_opcheck_forward(bias, dtype, device):
    x, w, b, _ = make_inputs(2, 9, 6, 3, 2, 12, dtype=dtype, bias=bias, device=device)
    torch.library.opcheck(op.default, (x, w, b))
    x.requires_grad_()
    w.requires_grad_()
    if b is not None:
        b.requires_grad_()
    torch.library.opcheck(op.default, (x, w, b))


@pytest.mark.parametrize("mask", [[True, True, True], [True, False, True], [False, True, False]],
                         ids=["111", "101", "010"])
def test_opcheck_backward(mask, device):
    x, w, _, gy = make_inputs(2, 9, 6, 3, 2, 12, bias=False, device=device)
    torch.library.opcheck(op_bwd.default, (gy, x, w, mask))


# ---------------------------------------------------------------------------
# Empty tensors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("B,L,N", [(0, 5, 8), (3, 0, 8), (0, 0, 4), (2, 0, 0)], ids=["B0", "L0", "B0L0", "L0N0"])
def test_empty(B, L, N, dtype, device):
    C, G, K = 6, 2, 2
    x = torch.randn(B, L, C, dtype=dtype, device=device, requires_grad=True)
    w = torch.randn(G, K, N, dtype=dtype, device=device, requires_grad=True)
    b = torch.randn(G, N, dtype=dtype, device=device, requires_grad=True)
    y = op(x, w, b)
    assert y.shape == (B, L, C) and y.dtype == dtype
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), torch.ones_like(y))
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == b.shape
    assert (gw == 0).all() and (gb == 0).all()
    gx, gw, gb = op_bwd(torch.zeros(B, L, C, dtype=dtype, device=device), x.detach(), w.detach(), [True, True, True])
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == (G, N)
    assert (gw == 0).all() and (gb == 0).all()
    y = op(x.detach(), w.detach())
    assert y.shape == (B, L, C)


# ---------------------------------------------------------------------------
# torch.compile


@pytest.mark.compile
@pytest.mark.timeout(300)
def test_compile_fullgraph_matches_eager(device):
    # Inductor, forward and backward. The graph holds only the op (and its
    # backward op), so inductor has no C++ kernel of its own to compile: this
    # keeps the test at about a second. Surrounding ops are covered with
    # aot_eager below.
    def f(x, w, b):
        return torch.ops.tmm.causal_toeplitz(x, w, b)

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True)
    x, w, b, gy = make_inputs(2, 12, 8, 2, 3, 16, device=device)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    y_eager = f(*leaves)
    y_comp = cf(*leaves)
    torch.testing.assert_close(y_comp, y_eager, rtol=1e-5, atol=1e-5)
    g_eager = torch.autograd.grad(y_eager, leaves, gy)
    g_comp = torch.autograd.grad(y_comp, leaves, gy)
    for a, e in zip(g_comp, g_eager):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


@pytest.mark.compile
@pytest.mark.timeout(300)
def test_compile_python_api_no_bias(device):
    def f(x, w):
        return torch.nn.functional.silu(tmm.ops.causal_toeplitz(x * 2.0, w)).sum(-1)

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, backend="aot_eager")
    x, w, _, _ = make_inputs(3, 10, 6, 1, 3, 10, bias=False, device=device)
    x.requires_grad_()
    w.requires_grad_()
    y, yc = f(x, w), cf(x, w)
    torch.testing.assert_close(yc, y, rtol=1e-6, atol=1e-6)
    # The traced silu backward rounds differently from eager's, and the op
    # sums those gradients over the batch and the channels: grad_weight (up
    # to ~60 here, where a float32 ulp is 4e-6) agrees to float32 rounding.
    for a, e in zip(torch.autograd.grad(yc.sum(), (x, w)), torch.autograd.grad(y.sum(), (x, w))):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Thread-count independence


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("L", [16, 1000])
@pytest.mark.parametrize("cpu_path", ["direct", "fft"])
def test_thread_count_independent(L, cpu_path, dtype, restore_threads):
    x, w, b, gy = make_inputs(3, L, 8, 2, 3, L, dtype=dtype)
    results = []
    with tmm.ops.path(cpu_path):
        for n in (1, 2):
            torch.set_num_threads(n)
            results.append((op(x, w, b),) + tuple(op_bwd(gy, x, w, [True, True, True])))
    tol = 1e-13 if dtype == torch.float64 else 1e-6
    for name, r1, r2 in zip(("y", "grad_x", "grad_weight", "grad_bias"), *results):
        scale = max(r1.abs().max().item(), 1e-30)
        assert (r1 - r2).abs().max().item() <= tol * scale, f"{name} differs between 1 and 2 threads"


def test_op_runs_on_torch_threads(restore_threads):
    """With 2 torch threads the kernels' tiles are shared between two
    threads: the threads other than the caller do at least 30% of the CPU
    time of the calls (measured 50%). A glue file compiled without OpenMP
    runs at::parallel_for's body on the caller alone (measured 0.9%), which
    the thread count tests above cannot see: one thread gives the same
    results."""
    def process_cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    torch.set_num_threads(2)
    x, w = torch.randn(4, 4096, 128), torch.randn(1, 1, 4096)
    op(x, w, None)  # plans and first touch outside the measurement
    p0, t0 = process_cpu(), time.thread_time()
    for _ in range(10):
        op(x, w, None)
    p1, t1 = process_cpu(), time.thread_time()
    others = 1 - (t1 - t0) / (p1 - p0)
    assert others >= 0.3, f"threads other than the caller did {others:.0%} of the op's CPU time"


# ---------------------------------------------------------------------------
# Bad inputs: RuntimeError naming the argument and saying what it got


def _raises(fn, name, *fragments):
    """fn() raises a RuntimeError naming `name` (as a word, not the "x" of
    "B x L x C") and containing every fragment."""
    with pytest.raises(RuntimeError, match=rf"\b{name}\b(?! [A-Z]\b)") as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in error message: {msg}"
    return msg


def _xwb(L=10, C=8, G=2, K=2, N=16, dtype=torch.float32, device="cpu"):
    return (torch.randn(2, L, C, dtype=dtype, device=device),
            torch.randn(G, K, N, dtype=dtype, device=device),
            torch.randn(G, N, dtype=dtype, device=device))


def test_bad_x_rank():
    _, w, b = _xwb()
    msg = _raises(lambda: op(torch.randn(3, 4), w, b), "x", "[3, 4]")
    assert "3-D" in msg
    _raises(lambda: op(torch.randn(1, 2, 10, 8), w, b), "x", "[1, 2, 10, 8]")


def test_bad_weight_rank():
    x, _, b = _xwb()
    _raises(lambda: op(x, torch.randn(2, 16), b), "weight", "[2, 16]")
    _raises(lambda: op(x, torch.randn(2, 1, 2, 16), b), "weight", "[2, 1, 2, 16]")


def test_bad_bias_rank():
    x, w, _ = _xwb()
    _raises(lambda: op(x, w, torch.randn(16)), "bias", "[16]")
    _raises(lambda: op(x, w, torch.randn(2, 16, 1)), "bias", "[2, 16, 1]")


def test_bad_bias_shape():
    x, w, _ = _xwb()
    _raises(lambda: op(x, w, torch.randn(2, 15)), "bias", "[2, 15]", "[2, 16]")
    _raises(lambda: op(x, w, torch.randn(1, 16)), "bias", "[1, 16]", "[2, 16]")


def test_L_greater_than_N():
    x, w, _ = _xwb(L=10, N=8)
    _raises(lambda: op(x, w), "weight", "8", "10")


def test_channels_not_divisible_by_groups():
    x = torch.randn(2, 5, 10)
    w = torch.randn(3, 1, 8)
    _raises(lambda: op(x, w), "weight", "10", "3")


def test_K_too_large():
    x = torch.randn(2, 5, 8)
    w = torch.randn(2, 5, 8)  # C/G = 4
    _raises(lambda: op(x, w), "weight", "5", "4")


def test_K_zero():
    x = torch.randn(2, 5, 8)
    w = torch.randn(2, 0, 8)
    _raises(lambda: op(x, w), "weight", "0")


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.complex64], ids=str)
def test_bad_x_dtype(dtype):
    x, w, b = _xwb()
    x = x.to(dtype)
    name = {torch.int64: "Long", torch.int32: "Int", torch.complex64: "ComplexFloat"}[dtype]
    _raises(lambda: op(x, w.to(dtype), b.to(dtype)), "x", name)
    _raises(lambda: op(x, w, b), "x", name)


def test_dtype_mismatch():
    x, w, b = _xwb()
    _raises(lambda: op(x, w.double(), b), "weight", "Float", "Double")
    _raises(lambda: op(x, w, b.double()), "bias", "Float", "Double")
    _raises(lambda: op(x, w.half(), None), "weight", "Float", "Half")


def test_backward_op_bad_inputs():
    x, w, _ = _xwb()
    _raises(lambda: op_bwd(torch.randn(2, 9, 8), x, w, [True, True, True]), "grad_y", "[2, 9, 8]")
    _raises(lambda: op_bwd(torch.randn(2, 10, 8, dtype=torch.float64), x, w, [True, True, True]),
            "grad_y", "Double")
    _raises(lambda: op_bwd(torch.randn(2, 10, 8), x, w.double(), [True, True, True]), "weight", "Double")
    _raises(lambda: op_bwd(torch.randn(2, 10, 8), x, torch.randn(2, 2, 8), [True, True, True]), "weight")


def test_bad_inputs_through_autograd_and_python_api():
    x, w, b = _xwb()
    x.requires_grad_()
    _raises(lambda: op(x, w.double(), b), "weight", "Double")
    _raises(lambda: tmm.ops.causal_toeplitz(x, w, torch.randn(2, 15)), "bias", "[2, 15]")


def test_device_mismatch_meta():
    """The meta device stands in for a second device on CPU-only machines."""
    x, w, b = _xwb()
    _raises(lambda: op(x, w.to("meta"), b), "weight", "meta")
    _raises(lambda: op(x.to("meta"), w, b.to("meta")), "weight", "cpu")
    _raises(lambda: op(x, w, b.to("meta")), "bias", "meta")
    gy = torch.randn(2, 10, 8)
    _raises(lambda: op_bwd(gy.to("meta"), x, w, [True, True, True]), "grad_y", "meta")


def test_meta_tensors_give_shapes():
    x, w, b = (t.to("meta") for t in _xwb(L=10, C=8, G=2, K=3, N=16))
    y = op(x, w, b)
    assert y.device.type == "meta" and y.shape == (2, 10, 8)
    gx, gw, gb = op_bwd(y, x, w, [True, False, True])
    assert gx.shape == x.shape and gw.shape == (0,) and gb.shape == (2, 16)


@cuda_only
def test_device_mismatch_cuda():
    x, w, b = _xwb()
    _raises(lambda: op(x, w.cuda(), b.cuda()), "weight")
    _raises(lambda: op(x.cuda(), w, b.cuda()), "weight")
    _raises(lambda: op(x.cuda(), w.cuda(), b), "bias")
    gy = torch.randn(2, 10, 8)
    _raises(lambda: op_bwd(gy, x.cuda(), w.cuda(), [True, True, True]), "grad_y")


# ---------------------------------------------------------------------------
# Double backward is not supported


def test_double_backward_raises(device):
    x, w, b, _ = make_inputs(2, 6, 4, 2, 2, 8, dtype=torch.float64, device=device)
    for t in (x, w, b):
        t.requires_grad_()
    y = op(x, w, b)
    with pytest.raises(RuntimeError, match="double backward"):
        gx, gw = torch.autograd.grad((y * y).sum(), (x, w), create_graph=True)
        torch.autograd.grad((gx.sum() + gw.sum()), (x, w))


# ---------------------------------------------------------------------------
# CUDA against the CPU op (the tests above run on CUDA with --device cuda)


@cuda_only
@pytest.mark.cuda
@pytest.mark.parametrize("cuda_path", ["cufft", "fused"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_cuda_matches_cpu(dtype, cuda_path, assert_close):
    x, w, b, gy = make_inputs(2, 200, 8, 2, 3, 200, dtype=dtype)
    cpu = (op(x, w, b),) + tuple(op_bwd(gy, x, w, [True, True, True]))
    with tmm.ops.path(cuda_path):
        cuda = (op(x.cuda(), w.cuda(), b.cuda()),) + tuple(op_bwd(gy.cuda(), x.cuda(), w.cuda(), [True, True, True]))
    for name, c, g in zip(("y", "grad_x", "grad_weight", "grad_bias"), cpu, cuda):
        assert g.is_cuda
        # Two roundings of one result: each within the tolerance of the exact one.
        assert_close(g, c, dtype, name, tol=2 * tolerance(dtype))
