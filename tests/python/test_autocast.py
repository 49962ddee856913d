"""The causal Toeplitz op under torch.autocast (CPU; CUDA where a GPU is).

Under autocast the op is a "lower precision fp" op like ATen's conv and
matmul: x, weight and bias are cast to the autocast dtype, the kernels
accumulate in float32, the result is in the autocast dtype and the
gradients of float32 leaves come back in float32. Errors are checked with
the tolerance table against a float64 reference computed from the same
rounded inputs (see conftest.py).
"""
import pytest
import torch
import torch.nn.functional as F

import copy

import tmm
import tmm.models
import tmm.nn
from tmm.ops.reference import causal_toeplitz_dense
from tmm.testing import assert_grads_close, rel_err, step_tolerance

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.cuda,
                                pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]),
]
DTYPES = [torch.bfloat16, torch.float16]


def _inputs(device):
    # x: B x L x C = 2 x 37 x 6 as a transposed (non-contiguous) view; weight G x K x N = 2 x 2 x 40.
    x = torch.randn(2, 6, 37, device=device).transpose(1, 2).requires_grad_()
    w = (torch.randn(2, 2, 40, device=device) / 6).requires_grad_()
    b = torch.randn(2, 40, device=device).requires_grad_()
    gy = torch.randn(2, 37, 6, device=device)
    return x, w, b, gy


def _reference(x, w, b, gy, dtype):
    """y and the gradients in float64 from the inputs rounded to dtype (the
    gradient reaching y is gy rounded to y's dtype by the backward of .float())."""
    xr, wr, br = (t.detach().to(dtype).double().requires_grad_() for t in (x, w, b))
    yr = causal_toeplitz_dense(xr, wr, br)
    yr.backward(gy.to(dtype).double())
    return yr, xr.grad, wr.grad, br.grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backward_inside", [False, True], ids=["backward-after", "backward-inside"])
def test_op_under_autocast(device, dtype, backward_inside, assert_close):
    x, w, b, gy = _inputs(device)
    with torch.autocast(device, dtype=dtype):
        y = torch.ops.tmm.causal_toeplitz(x, w, b)
        if backward_inside:
            (y.float() * gy).sum().backward()
    if not backward_inside:
        (y.float() * gy).sum().backward()
    assert y.dtype == dtype
    yr, gxr, gwr, gbr = _reference(x, w, b, gy, dtype)
    assert_close(y, yr, dtype, "y")
    for name, got, ref in (("x", x.grad, gxr), ("weight", w.grad, gwr), ("bias", b.grad, gbr)):
        assert got.dtype == torch.float32, name
        assert_close(got, ref, dtype, f"grad {name}")


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_brings_inputs_to_one_dtype(device):
    x = torch.randn(1, 8, 4, device=device, dtype=torch.bfloat16)
    w, b = torch.randn(1, 1, 8, device=device), torch.randn(1, 8, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        assert torch.ops.tmm.causal_toeplitz(x, w, b).dtype == torch.bfloat16
        assert torch.ops.tmm.causal_toeplitz(x.float(), w).dtype == torch.bfloat16
        grads = torch.ops.tmm.causal_toeplitz_backward(x.float(), x, w, [True, True, True])
        assert [g.dtype for g in grads] == [torch.bfloat16] * 3
        # float64 is not autocast (as with ATen's own ops).
        assert torch.ops.tmm.causal_toeplitz(x.double(), w.double()).dtype == torch.float64
    with torch.autocast(device, dtype=torch.float16):
        assert torch.ops.tmm.causal_toeplitz(x, w, b).dtype == torch.float16
    with pytest.raises(RuntimeError, match="expected weight to have x's dtype"):
        torch.ops.tmm.causal_toeplitz(x, w)  # outside autocast: one dtype is the caller's job


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_under_autocast(device, dtype, assert_close):
    """The layer is the op: y and the gradients of x, weight and bias within
    the dtype's one-op row of the float64 reference on the rounded inputs."""
    layer = tmm.nn.CausalToeplitz(8, 16, groups=2, kernel=2).to(device)
    with torch.no_grad():
        layer.bias.normal_()  # zero biases would hide a dropped bias term
    x = torch.randn(3, 16, 8, device=device, requires_grad=True)
    with torch.autocast(device, dtype=dtype):
        y = layer(x)
    y.float().square().sum().backward()
    assert y.dtype == dtype
    # The gradient reaching y: 2 y in float32, rounded to y's dtype by the backward of .float().
    yr, gxr, gwr, gbr = _reference(x, layer.weight, layer.bias, (2 * y.detach().float()), dtype)
    assert_close(y, yr, dtype, "y")
    for name, got, ref in (("x", x.grad, gxr), ("weight", layer.weight.grad, gwr), ("bias", layer.bias.grad, gbr)):
        assert got.dtype == torch.float32, name
        assert_close(got, ref, dtype, f"grad {name}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tiny_tmm_model_trains_a_step_under_autocast(device, dtype, one_thread):
    """tmm-tiny (C++ modules called from Python, float32 parameters): one
    AdamW step under autocast; logits in the autocast dtype, float32
    gradients, the loss and each gradient (against its own scale) within the
    table's whole-step row of the float32 step: not the op's row, two blocks
    of dtype-rounded Linear and LayerNorm are in it too."""
    model = tmm.models.build("tmm-tiny").to(device)
    ref = copy.deepcopy(model)
    ids = torch.randint(model.config["vocab_size"], (2, 24), device=device)
    loss32 = F.cross_entropy(ref(ids).flatten(0, 1), ids.flatten())
    loss32.backward()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with torch.autocast(device, dtype=dtype):
        logits = model(ids)
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
    loss.backward()
    assert logits.dtype == dtype
    tol = step_tolerance(dtype)
    assert rel_err(loss, loss32) <= tol, f"loss: {rel_err(loss, loss32):.3g} > {tol}"
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32, name
    assert_grads_close({n: p.grad for n, p in model.named_parameters()},
                       {n: p.grad for n, p in ref.named_parameters()}, tol)
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))


@pytest.mark.compile
def test_compiled_op_under_autocast_matches_eager(assert_close):
    """An autocast region inside a compiled function: dynamo and AOTAutograd
    trace the autocast kernel's casts and the op's fake kernel (aot_eager:
    no inductor code generation, which would only time the C++ compiler)."""
    x, w, b, _ = _inputs("cpu")

    def f(x, w, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.ops.tmm.causal_toeplitz(x, w, b)

    eager = f(x, w, b)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, b)
    assert compiled.dtype == torch.bfloat16
    assert_close(compiled, eager, torch.bfloat16, "compiled vs eager")
