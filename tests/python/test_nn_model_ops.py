"""The model pieces registered as ops for tmm.nn (torch.ops.tmm.causal_matrix_mix,
hyena_filter, mamba2_ssd_chunked, mamba2_causal_depthwise_conv1d,
mamba2_gated_rms_norm): float64 gradcheck, shapes on the meta device, and a
fullgraph compile that gives the eager result."""
import pytest
import torch

import tmm  # noqa: F401  (registers torch.ops.tmm)

ops = torch.ops.tmm


def f64(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def cases():
    torch.manual_seed(0)
    mlp = [f64(8, 3), f64(8), f64(8, 8), f64(8), f64(8, 8), f64(8), f64(4, 8)]
    return {
        "causal_matrix_mix": (ops.causal_matrix_mix, (f64(2, 5, 4), f64(2, 7, 7), f64(2, 7))),
        "hyena_filter": (lambda *t: ops.hyena_filter(list(t[:7]), t[7], t[8], 6, 9, True),
                         (*mlp, f64(8), f64(4))),
        "hyena_filter_unmodulated": (lambda *t: ops.hyena_filter(list(t[:7]), t[7], t[8], 6, 9, False),
                                     (*mlp, f64(8), f64(4))),
        # b=2, L=5 (a ragged chunk of 2), H=4 heads of P=2, G=2 groups of N=3
        "mamba2_ssd_chunked": (lambda x, dt, A, B, C: ops.mamba2_ssd_chunked(x, dt.exp(), -A.exp(), B, C, 2),
                               (f64(2, 5, 4, 2), f64(2, 5, 4), f64(4), f64(2, 5, 2, 3), f64(2, 5, 2, 3))),
        "mamba2_causal_depthwise_conv1d": (ops.mamba2_causal_depthwise_conv1d, (f64(2, 6, 5), f64(5, 1, 3), f64(5))),
        "mamba2_gated_rms_norm": (lambda y, z, w: ops.mamba2_gated_rms_norm(y, z, w, 2, 1e-5),
                                  (f64(2, 3, 8), f64(2, 3, 8), f64(8))),
    }


@pytest.mark.parametrize("name", sorted(cases()))
def test_gradcheck_float64(name):
    fn, args = cases()[name]
    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("name", sorted(cases()))
def test_meta_shapes_and_fullgraph_compile(name):
    fn, args = cases()[name]
    eager = fn(*args)
    meta = fn(*[a.detach().to("meta") for a in args])
    assert meta.shape == eager.shape and meta.dtype == eager.dtype
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(*args), eager, rtol=1e-12, atol=1e-12)
