"""One training step of each zoo model (the tiny configs in models/) on the
check's device, in float32 and under bf16 autocast, against the same step
in float32 on the CPU.

A step: forward on a fixed batch, the loss, backward, one SGD step (lr 0.1),
and the loss again after it. float32: the loss before and after and every
gradient within the float32 tolerance (tmm.testing) of the CPU's; TF32 is
off for the comparison. bf16 autocast: the losses within the bfloat16
tolerance of the CPU's float32 ones and every gradient finite (bf16 rounding
through the layers moves single gradient entries by more than an op's
tolerance: their errors are recorded, not judged; the op itself is judged
in bf16 by the op tests).

The op's autocast registration (csrc/ops/causal_toeplitz_autocast.cpp) is
being added; until the dispatcher has it, the autocast step of a model that
calls the op fails with the op's dtype error, recorded as the known gap
"autocast not registered" (gap=..., not a failure of the check).
"""
from __future__ import annotations

import contextlib
import math
import time
import traceback
from typing import Any, Dict, List, Sequence

import torch

from ... import testing

__all__ = ["ARCHS", "autocast_registered", "zoo_steps"]

ARCHS = ("tmm", "transformer", "hyena", "mamba2")
LR = 0.1


def autocast_registered(device_type: str) -> bool:
    """Whether tmm::causal_toeplitz has a kernel for this device's autocast key."""
    key = {"cuda": "AutocastCUDA", "cpu": "AutocastCPU"}[device_type]
    return torch._C._dispatch_has_kernel_for_dispatch_key("tmm::causal_toeplitz", key)


def _build(arch: str):
    import tmm.models

    torch.manual_seed(0)  # the same initial weights for every run of this arch
    return tmm.models.build(f"{arch}-tiny")


@contextlib.contextmanager
def _no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _step(arch: str, device: str, autocast: bool) -> Dict[str, Any]:
    """Loss, gradients (float32, on the CPU) and the loss after one SGD step."""
    model = _build(arch).to(device)
    model.train()
    cfg = model.config
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg["vocab_size"], (2, min(32, cfg["max_len"])), generator=gen).to(device)
    dev_type = torch.device(device).type
    amp = torch.autocast(dev_type, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    with _no_tf32():
        with amp:
            loss = model(ids, labels=ids).loss
        loss.backward()
        grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
        opt.step()
        with torch.no_grad(), amp:
            after = model(ids, labels=ids).loss
    return {"loss": loss.detach().float().cpu(), "after": after.float().cpu(), "grads": grads}


def _compare(arch: str, mode: str, got: Dict[str, Any], want: Dict[str, Any]) -> Dict[str, Any]:
    rec: Dict[str, Any] = dict(arch=arch, mode=mode, loss=got["loss"].item(), loss_cpu=want["loss"].item())
    rec["err_loss"] = testing.rel_err(got["loss"], want["loss"])
    rec["err_loss_after"] = testing.rel_err(got["after"], want["after"])
    missing = sorted(set(want["grads"]) - set(got["grads"]))
    errs = {n: testing.rel_err(g, want["grads"][n]) for n, g in got["grads"].items() if n in want["grads"]}
    worst = max(errs, key=errs.get) if errs else None
    rec.update(err_grad_max=errs[worst] if worst else 0.0, worst_grad=worst, n_grads=len(errs))
    if mode == "float32":
        tol = testing.tolerance(torch.float32)
        rec["ok"] = not missing and max(rec["err_loss"], rec["err_loss_after"], rec["err_grad_max"]) <= tol
    else:
        tol = testing.tolerance(torch.bfloat16)
        rec["ok"] = (not missing and max(rec["err_loss"], rec["err_loss_after"]) <= tol
                     and all(math.isfinite(e) for e in errs.values()))
    rec["tol"] = tol
    if missing:
        rec["error"] = f"no gradient for {missing[:5]}"
    return rec


def zoo_steps(device: str, deadline: float, archs: Sequence[str] = ARCHS) -> List[Dict[str, Any]]:
    """One record per (arch, mode): mode "float32" or "bf16 autocast"."""
    dev_type = torch.device(device).type
    registered = autocast_registered(dev_type)
    out = []
    for arch in archs:
        try:
            want = _step(arch, "cpu", autocast=False)
        except Exception as e:  # noqa: BLE001
            out.append(dict(arch=arch, mode="cpu reference", ok=False, error=f"{type(e).__name__}: {e}"[:1000]))
            continue
        for mode in ("float32", "bf16 autocast"):
            if time.time() > deadline:
                out.append(dict(arch=arch, mode=mode, ok=None, skipped="deadline"))
                continue
            try:
                rec = _compare(arch, mode, _step(arch, device, autocast=mode != "float32"), want)
            except Exception as e:  # noqa: BLE001 - a record, not a crash of the check
                rec = dict(arch=arch, mode=mode, ok=False, error=f"{type(e).__name__}: {e}"[:1000],
                           trace=traceback.format_exc()[-1500:])
            if mode != "float32" and not rec["ok"] and not registered and "causal_toeplitz" in rec.get("error", ""):
                rec["gap"] = (f"autocast not registered: tmm::causal_toeplitz has no Autocast{dev_type.upper()} "
                              "kernel (csrc/ops/causal_toeplitz_autocast.cpp)")
            out.append(rec)
    return out
