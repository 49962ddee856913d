"""The checks only a GPU run needs, beyond the shared op tests: the copy
bandwidth (the ceiling of the benchmark's bytes/s), CUDA graphs through
torch.compile(mode="reduce-overhead") against eager, and the small case that
scripts/gpu_check.sh runs under compute-sanitizer. On the CPU (the check's
CPU mode) the same code runs: graphs are then inductor without CUDA graphs,
and the sanitizer case runs unsanitized."""
from __future__ import annotations

import time
import traceback
from typing import Any, Callable, Dict, List, Sequence

import torch

from tmm import testing
from ..timing import time_calls

__all__ = ["copy_bandwidth", "graphs_check", "sanitize_case"]


def copy_bandwidth(device: str) -> Dict[str, Any]:
    """Device-to-device copy of a 2 GiB (CUDA) or 64 MiB (CPU) float32
    buffer: bytes read + written per second, median of 20 copies."""
    n = ((2 << 30) if torch.device(device).type == "cuda" else (64 << 20)) // 4
    a = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    t = time_calls(lambda: b.copy_(a), device, warmup=3, repeats=20, budget_s=10.0)
    del a, b
    return dict(bytes_moved=2 * n * 4, median_ms=t["median_ms"], bytes_per_s=2 * n * 4 / (t["median_ms"] * 1e-3))


def graphs_check(device: str, paths: Sequence[str], force: Callable, deadline: float) -> List[Dict[str, Any]]:
    """Per path: the op compiled with mode="reduce-overhead" (CUDA graphs on
    CUDA), replayed on new input values copied into the same tensors, forward
    and backward, against eager on each."""
    op = torch.ops.tmm.causal_toeplitz
    out = []
    for path in paths:
        rec: Dict[str, Any] = dict(path=path, mode="reduce-overhead")
        if time.time() > deadline:
            rec.update(ok=None, skipped="deadline")
            out.append(rec)
            continue
        try:
            with force(path):
                torch._dynamo.reset()
                compiled = torch.compile(lambda x, w, b: op(x, w, b), mode="reduce-overhead", fullgraph=True)
                fwd, bwd = [], []
                x, w, b, gy = (t.detach().clone() for t in testing.make_inputs(2, 300, 32, 4, 2, dtype=torch.float32,
                                                                                 device=device, seed=0))
                for replay in range(4):  # warm-up, record, replays
                    new = testing.make_inputs(2, 300, 32, 4, 2, device=device, seed=replay + 1)
                    for t, v in zip((x, w, b, gy), new):
                        t.copy_(v)
                    leaves = [t.detach().requires_grad_(True) for t in (x, w, b)]
                    got = compiled(*leaves)
                    want = op(*leaves)
                    fwd.append(testing.rel_err(got, want))
                    grads = torch.autograd.grad(got, leaves, gy)
                    eager = torch.autograd.grad(want, leaves, gy)
                    bwd.append(max(testing.rel_err(a, e) for a, e in zip(grads, eager)))
            tol = testing.tolerance(torch.float32)
            rec.update(fwd_errs=fwd, bwd_errs=bwd, tol=tol, ok=max(fwd) <= tol and max(bwd) <= tol)
        except Exception as e:  # noqa: BLE001 - a record, not a crash of the check
            rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:1000], trace=traceback.format_exc()[-2000:])
        out.append(rec)
    return out


def sanitize_case(device: str, paths: Sequence[str], force: Callable) -> int:
    """A few small shapes, every path, forward, backward and partial masks:
    what compute-sanitizer watches (it slows every kernel down a lot).
    Returns the number of calls made."""
    op, op_bwd = torch.ops.tmm.causal_toeplitz, torch.ops.tmm.causal_toeplitz_backward
    calls = 0
    for path in paths:
        for dtype in (torch.float32, torch.bfloat16):
            for B, L, C, G, K, N in [(2, 100, 24, 4, 3, 101), (1, 37, 16, 16, 1, 37), (2, 1025, 8, 1, 2, 1025)]:
                x, w, b, gy = testing.make_inputs(B, L, C, G, K, N, dtype=dtype, device=device,
                                                  layout="transposed", seed=L)
                with force(path):
                    leaves = [t.detach().requires_grad_(True) for t in (x, w, b)]
                    torch.autograd.grad(op(*leaves), leaves, gy)
                    op_bwd(gy, x, w, [False, True, False])
                calls += 3
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return calls
