"""The model pieces registered as ops for tmm.nn (torch.ops.tmm.causal_matrix_mix,
hyena_filter, mamba2_ssd_chunked, mamba2_ssd_scan, mamba2_causal_depthwise_conv1d,
mamba2_gated_rms_norm): float64 gradcheck, shapes on the meta device, and a
fullgraph compile that gives the eager result; mamba2_ssd_scan also against
the recurrence written here from Mamba2's formulas."""
import pytest
import torch
from torch.nn import functional as F

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
        # the same sizes flattened (x: H*P = 8, B and C: G*N = 6), from the raw dt and the parameters
        "mamba2_ssd_scan": (lambda *t: ops.mamba2_ssd_scan(*t, 2, 2),
                            (f64(2, 5, 8), f64(2, 5, 4), f64(4), f64(4), f64(2, 5, 6), f64(2, 5, 6), f64(4))),
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


def ssd_scan_reference(x, dt_raw, dt_bias, A_log, B, C, D, groups):
    """Mamba2's recurrence token by token (Dao and Gu 2024; mamba_ssm's
    selective_state_update): per head h of group g = h // (H/G),
    dt = softplus(dt_raw + dt_bias), A = -exp(A_log),
    s_t = exp(dt_t A) s_{t-1} + dt_t x_t B_t^T, y_t = s_t C_t + D x_t."""
    b, L, H = dt_raw.shape
    x = x.reshape(b, L, H, -1)
    B, C = (m.reshape(b, L, groups, -1).repeat_interleave(H // groups, 2) for m in (B, C))  # b L H N
    dt, A = F.softplus(dt_raw + dt_bias), -torch.exp(A_log)
    s = x.new_zeros(b, H, x.shape[-1], B.shape[-1])
    ys = []
    for t in range(L):
        s = torch.exp(dt[:, t] * A)[..., None, None] * s + (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None]
        ys.append((s @ C[:, t, ..., None]).squeeze(-1) + D[:, None] * x[:, t])
    return torch.stack(ys, 1).reshape(b, L, -1)


@pytest.mark.parametrize("chunk_size", [1, 3, 16])
def test_mamba2_ssd_scan_matches_the_recurrence(chunk_size):
    torch.manual_seed(1)
    # b=2, L=7, H=6 heads of P=2, G=3 groups of N=4
    args = (f64(2, 7, 12), f64(2, 7, 6), f64(6), f64(6), f64(2, 7, 12), f64(2, 7, 12), f64(6))
    got = ops.mamba2_ssd_scan(*args, 3, chunk_size)
    want = ssd_scan_reference(*args, 3)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    r = torch.randn_like(got)
    grads = torch.autograd.grad((got * r).sum(), args)
    for g, w in zip(grads, torch.autograd.grad((want * r).sum(), args)):
        assert torch.allclose(g, w, rtol=1e-10, atol=1e-10)


def test_mamba2_ssd_scan_computes_in_float32_at_least():
    args = [a.detach().to(torch.bfloat16) for a in cases()["mamba2_ssd_scan"][1]]
    y = ops.mamba2_ssd_scan(*args, 2, 2)
    assert y.dtype == torch.float32
    assert torch.equal(y, ops.mamba2_ssd_scan(*[a.float() for a in args], 2, 2))
    with pytest.raises(RuntimeError, match="ngroups"):
        ops.mamba2_ssd_scan(*args, 4, 2)  # 4 groups do not divide B's 6 columns
