"""One training step of each zoo model (the tiny configs in models/) on the
check's device, in float32 and under bf16 autocast, against the same step
in float32 on the CPU.

A step: forward on a fixed batch, the loss, backward, one SGD step (lr 0.1),
and the loss again after it. float32: the loss before and after and every
gradient within the float32 tolerance (tmm.testing) of the CPU's; TF32 is
off for the comparison. bf16 autocast: the losses within the bfloat16
tolerance and every gradient within the table's whole-step row
(tmm.testing.step_tolerance: bf16 rounding through all the layers, not one
op's), each gradient against its own scale (tmm.testing.grad_errors). A step that raises (e.g. an op without its
autocast kernel, csrc/ops/causal_toeplitz_autocast.cpp, meeting mixed
dtypes) is a failure like any other.
"""
from __future__ import annotations

import contextlib
import time
import traceback
from typing import Any, Dict, List, Sequence

import torch

from tmm import testing

__all__ = ["ARCHS", "zoo_steps"]

ARCHS = ("tmm", "transformer", "hyena", "mamba2")
LR = 0.1


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
    missing = sorted(set(want["grads"]) ^ set(got["grads"]))
    tol_loss = testing.tolerance(torch.float32 if mode == "float32" else torch.bfloat16)
    tol = tol_loss if mode == "float32" else testing.step_tolerance(torch.bfloat16)
    common = sorted(set(want["grads"]) & set(got["grads"]))
    if mode == "float32":
        errs = {n: testing.rel_err(got["grads"][n], want["grads"][n]) for n in common}
    else:
        errs = testing.grad_errors({n: got["grads"][n] for n in common}, {n: want["grads"][n] for n in common}, tol)
    worst = max(errs, key=errs.get) if errs else None
    rec.update(err_grad_max=errs[worst] if worst else 0.0, worst_grad=worst, n_grads=len(errs))
    rec["ok"] = not missing and max(rec["err_loss"], rec["err_loss_after"]) <= tol_loss and rec["err_grad_max"] <= tol
    rec.update(tol=tol, tol_loss=tol_loss)
    if missing:
        rec["error"] = f"gradients on one side only: {missing[:5]}"
    return rec


def zoo_steps(device: str, deadline: float, archs: Sequence[str] = ARCHS) -> List[Dict[str, Any]]:
    """One record per (arch, mode): mode "float32" or "bf16 autocast"."""
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
            except Exception as e:  # noqa: BLE001 - a record (a failure), not a crash of the check
                rec = dict(arch=arch, mode=mode, ok=False, error=f"{type(e).__name__}: {e}"[:1000],
                           trace=traceback.format_exc()[-1500:])
            out.append(rec)
    return out
