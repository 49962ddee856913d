"""The op from several Python threads at once (it releases the GIL in C++),
and its float32 accuracy on long sequences against float64 (docs/ops.md,
"Accuracy on long sequences")."""
from concurrent.futures import ThreadPoolExecutor

import torch

import tmm
from tmm.testing import rel_err


def _fwd_bwd(x, w, b):
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    y = tmm.ops.causal_toeplitz(x, w, b)
    (y * torch.linspace(-1, 1, y.shape[1]).view(1, -1, 1)).sum().backward()
    return [y.detach(), x.grad, w.grad, b.grad]


def test_op_from_threads_equals_serial():
    g = torch.Generator().manual_seed(0)
    cases = []
    for i, L in enumerate([5, 64, 300, 2048] * 3):
        G, K = (1, 1) if i % 2 else (2, 3)
        cases.append((torch.randn(2, L, 8, generator=g), torch.randn(G, K, L, generator=g),
                      torch.randn(G, L, generator=g)))
    expected = [_fwd_bwd(*c) for c in cases]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda c: _fwd_bwd(*c), cases * 3))
    for got, want in zip(results, expected * 3):
        for a, b in zip(got, want):
            assert torch.equal(a, b)


def test_float32_accuracy_at_65536():
    """tmm.testing.rel_err (max|a-e|/max|e|) of float32 against float64,
    forward and the gradients of x and weight, at L = 65536 with the
    authors' init scale (w ~ N(0, 2/n)); measured about 4e-7."""
    g = torch.Generator().manual_seed(1)
    L, C = 65536, 4
    x = torch.randn(1, L, C, generator=g, dtype=torch.float64)
    w = torch.randn(1, 1, L, generator=g, dtype=torch.float64) * (2.0 / L) ** 0.5
    b = torch.zeros(1, L, dtype=torch.float64)
    ref = _fwd_bwd(x, w, b)
    got = _fwd_bwd(x.float(), w.float(), b.float())
    errs = [rel_err(a, r) for a, r in zip(got[:3], ref[:3])]  # grad_bias is a plain sum: exact enough
    assert max(errs) < 1e-5, errs
    # The float64 result itself against torch.fft in float64 (an independent transform).
    n = 2 * L
    y64 = torch.fft.irfft(torch.fft.rfft(x[0].T, n=n) * torch.fft.rfft(w[0, 0], n=n), n=n)[:, :L].T
    assert rel_err(ref[0][0], y64) < 1e-12
