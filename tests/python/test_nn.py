"""Tests of the tmm.nn.CausalToeplitz module."""

import math

import pytest
import torch

from tmm.nn import CausalToeplitz
from tmm.ops.reference import causal_toeplitz_dense


def test_init_statistics():
    G, K, N = 4, 8, 4096
    m = CausalToeplitz(64, N, groups=G, kernel=K)
    assert m.weight.shape == (G, K, N)
    assert m.bias.shape == (G, N)
    assert m.weight.dtype == torch.float32
    expected_std = math.sqrt(2.0 / N)  # Kaiming normal, fan_in = max_len for every tap (as ToeplitzMixer)
    w = m.weight.detach().double()
    assert abs(w.std().item() / expected_std - 1) < 0.02
    assert abs(w.mean().item()) < 5 * expected_std / math.sqrt(w.numel())
    assert (m.bias == 0).all()


@pytest.mark.parametrize("K", [1, 3])
def test_init_std_small_kernel(K):
    m = CausalToeplitz(12, 2048, groups=3, kernel=K)
    expected_std = math.sqrt(2.0 / 2048)
    assert abs(m.weight.detach().double().std().item() / expected_std - 1) < 0.05


def test_init_differs_between_modules():
    a, b = CausalToeplitz(8, 64), CausalToeplitz(8, 64)
    assert not torch.equal(a.weight, b.weight)


def test_parameters_and_state_dict():
    m = CausalToeplitz(8, 32, groups=2, kernel=3)
    assert set(m.state_dict().keys()) == {"weight", "bias"}
    assert {n for n, _ in m.named_parameters()} == {"weight", "bias"}
    assert all(p.requires_grad for p in m.parameters())
    m2 = CausalToeplitz(8, 32, groups=2, kernel=3)
    m2.load_state_dict(m.state_dict())
    assert torch.equal(m2.weight, m.weight) and torch.equal(m2.bias, m.bias)


def test_defaults():
    m = CausalToeplitz(6, 10)
    assert m.weight.shape == (1, 1, 10)
    assert m.bias is not None and m.bias.shape == (1, 10)


def test_no_bias():
    m = CausalToeplitz(8, 32, groups=2, kernel=2, bias=False)
    assert m.bias is None
    assert set(m.state_dict().keys()) == {"weight"}
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    x = torch.randn(2, 20, 8)
    torch.testing.assert_close(m(x), torch.ops.tmm.causal_toeplitz(x, m.weight, None), rtol=0, atol=0)


@pytest.mark.parametrize("G,K", [(1, 1), (4, 1), (2, 3), (1, 4)])
@pytest.mark.parametrize("L", [1, 17, 32])
def test_forward_equals_op(G, K, L):
    m = CausalToeplitz(8, 32, groups=G, kernel=K)
    with torch.no_grad():
        m.bias.normal_()
    x = torch.randn(3, L, 8)
    y = m(x)
    assert y.shape == x.shape
    torch.testing.assert_close(y, torch.ops.tmm.causal_toeplitz(x, m.weight, m.bias), rtol=0, atol=0)
    ref = causal_toeplitz_dense(x.double(), m.weight.double(), m.bias.double())
    torch.testing.assert_close(y.double(), ref, rtol=1e-4, atol=1e-5)


def test_backward_fills_parameter_grads():
    m = CausalToeplitz(8, 24, groups=2, kernel=2)
    x = torch.randn(2, 16, 8, requires_grad=True)
    m(x).square().sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    assert m.weight.grad.shape == m.weight.shape and m.bias.grad.shape == m.bias.shape
    assert (m.weight.grad[..., 16:] == 0).all() and (m.bias.grad[:, 16:] == 0).all()
    assert m.weight.grad[..., :16].abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_module_dtype_conversion(dtype):
    m = CausalToeplitz(8, 16, groups=2, kernel=2).to(dtype)
    x = torch.randn(2, 16, 8, dtype=dtype)
    y = m(x)
    assert y.dtype == dtype and y.shape == x.shape


def test_length_beyond_max_len_errors():
    m = CausalToeplitz(8, 16)
    with pytest.raises((RuntimeError, ValueError)):
        m(torch.randn(2, 17, 8))


def test_wrong_channels_errors():
    m = CausalToeplitz(8, 16, groups=2)
    with pytest.raises((RuntimeError, ValueError)):
        m(torch.randn(2, 10, 7))


@pytest.mark.compile
@pytest.mark.timeout(300)
def test_module_compiles_fullgraph():
    torch._dynamo.reset()
    m = CausalToeplitz(8, 32, groups=2, kernel=3)
    cm = torch.compile(m, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 20, 8, requires_grad=True)
    torch.testing.assert_close(cm(x), m(x), rtol=1e-6, atol=1e-6)
    (gc,) = torch.autograd.grad(cm(x).sum(), x)
    (ge,) = torch.autograd.grad(m(x).sum(), x)
    torch.testing.assert_close(gc, ge, rtol=1e-6, atol=1e-6)
