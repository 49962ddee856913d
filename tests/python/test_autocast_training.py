"""A training step of every zoo model and every drop-in layer under CPU torch.autocast, bfloat16 and
float16, against the same step in float32: the loss and each gradient,
every one against its own scale (tmm.testing.grad_errors: a small bias,
norm or filter gradient cannot hide behind a large one), within the table's
autocast-step row; float32 gradients on the float32 parameters, an optimizer
step that moves them; and torch.amp.GradScaler("cpu") with float16:
unscaled gradients as close, and a step whose gradients overflow skipped
with the scale lowered.

The bound is not the one-op row of the dtype: a step chains many roundings
(embedding, projections, norms, the mix, the head, then all of that
backwards), so tmm/tolerances.json holds a row per autocast dtype for a
whole step ("_autocast_step_<dtype>", tmm.testing.step_tolerance)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import tmm.models
from tmm.nn import (CausalToeplitz, HyenaFilter, HyenaOperator, Mamba2Mixer, MixerBlock, RMSNorm, SequenceModel,
                    ShortConv, ToeplitzMixer)
from tmm.testing import assert_grads_close, rel_err, step_tolerance

DTYPES = [torch.bfloat16, torch.float16]

pytestmark = pytest.mark.usefixtures("one_thread")


MODELS = {  # tiny configs: every zoo architecture, and a SequenceModel around Mamba2's mixer
    "tmm": lambda: tmm.models.build("tmm-tiny"),
    "transformer": lambda: tmm.models.build("transformer-tiny"),
    "hyena": lambda: tmm.models.build("hyena-tiny"),
    "mamba2": lambda: tmm.models.build("mamba2-tiny"),
    "nn-mamba2": lambda: SequenceModel(Mamba2Mixer, 64, 32, 2, 64, final_norm=True,
                                       mixer_kwargs={"d_state": 8, "headdim": 8, "ngroups": 2, "chunk_size": 8}),
}

LAYERS = {  # every drop-in layer (d 8, length 11), each ToeplitzMixer variant
    "causal_toeplitz": lambda: CausalToeplitz(8, 12, groups=2, kernel=2),
    "toeplitz_flat": lambda: ToeplitzMixer(8, 12),
    "toeplitz_heads_kernel": lambda: ToeplitzMixer(8, 12, heads=2, kernel=2),
    "toeplitz_expanded": lambda: ToeplitzMixer(8, 12, heads=2, expanded=True, mixer_dropout=0.0),
    "toeplitz_frozen": lambda: ToeplitzMixer(8, 12, heads=2, frozen=True),
    "toeplitz_masked": lambda: ToeplitzMixer(8, 12, heads=2, masked=True),
    "tmm_block": lambda: MixerBlock(8, 12, heads=2),
    "tmm_block_rmsnorm": lambda: MixerBlock(8, 12, heads=2, norm="rmsnorm"),
    "hyena": lambda: HyenaOperator(8, 12, filter_order=8),
    "hyena_no_modulation": lambda: HyenaOperator(8, 12, filter_order=8, modulate=False),
    "hyena_filter": lambda: HyenaFilter(8, 12, filter_order=8),
    "short_conv": lambda: ShortConv(8, 3),
    "mamba2": lambda: Mamba2Mixer(8, d_state=4, headdim=4, ngroups=2, chunk_size=5),
    "rmsnorm": lambda: RMSNorm(8),
}


def _grads(module):
    return {n: p.grad for n, p in module.named_parameters() if p.requires_grad}


def _model_step(model, ids, dtype):
    """Loss and gradients of one next-token step; dtype None = float32."""
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
    return logits, loss


def _layer_step(layer, x, target, dtype):
    x = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        y = layer(x)
    loss = F.mse_loss(y.float(), target)
    return y, loss, x


def _check_params(model, before):
    for (name, p), old in zip(model.named_parameters(), before):
        assert p.dtype == torch.float32 and torch.isfinite(p).all(), name
        if p.requires_grad:
            assert not torch.equal(p, old), f"{name} did not move"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_training_step_under_autocast(name, dtype):
    torch.manual_seed(0)
    ref = MODELS[name]().train()
    model = copy.deepcopy(ref)
    ids = torch.randint(0, 64, (2, 25), generator=torch.Generator().manual_seed(1))
    _, loss32 = _model_step(ref, ids, None)
    loss32.backward()
    logits, loss = _model_step(model, ids, dtype)
    loss.backward()
    assert logits.dtype == dtype
    for n, p in model.named_parameters():
        assert p.grad is None or p.grad.dtype == torch.float32, n
    tol = step_tolerance(dtype)
    assert rel_err(loss, loss32) <= tol, f"loss: {rel_err(loss, loss32):.3g} > {tol}"
    assert_grads_close(_grads(model), _grads(ref), tol)
    before = [p.detach().clone() for p in model.parameters()]
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    _check_params(model, before)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_training_step_under_autocast(name, dtype):
    torch.manual_seed(0)
    ref = LAYERS[name]().train()
    layer = copy.deepcopy(ref)
    x = torch.randn(2, 11, 8, generator=torch.Generator().manual_seed(3))
    target = torch.randn(2, 11, 8, generator=torch.Generator().manual_seed(4))
    _, loss32, x32 = _layer_step(ref, x, target, None)
    loss32.backward()
    y, loss, xa = _layer_step(layer, x, target, dtype)
    loss.backward()
    tol = step_tolerance(dtype)
    assert rel_err(loss, loss32) <= tol, f"loss: {rel_err(loss, loss32):.3g} > {tol}"
    assert xa.grad.dtype == torch.float32
    assert_grads_close({"input": xa.grad, **_grads(layer)}, {"input": x32.grad, **_grads(ref)}, tol)
    if any(p.requires_grad for p in layer.parameters()):
        before = [p.detach().clone() for p in layer.parameters()]
        torch.optim.AdamW(layer.parameters(), lr=1e-3).step()
        _check_params(layer, before)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_grad_scaler_float16(name):
    """torch.amp.GradScaler("cpu"): the unscaled gradients are the float32
    step's within the float16 row; a scale so large that the float16
    backward overflows skips the step and halves the scale."""
    torch.manual_seed(0)
    ref = MODELS[name]().train()
    ids = torch.randint(0, 64, (2, 25), generator=torch.Generator().manual_seed(1))
    _, loss32 = _model_step(ref, ids, None)
    loss32.backward()

    model = copy.deepcopy(ref)
    model.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    _, loss = _model_step(model, ids, torch.float16)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    assert_grads_close(_grads(model), _grads(ref), step_tolerance(torch.float16), "unscaled gradients")
    before = [p.detach().clone() for p in model.parameters()]
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 10  # no inf/nan found
    _check_params(model, before)

    overflow = copy.deepcopy(ref)
    overflow.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(overflow.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 60)
    _, loss = _model_step(overflow, ids, torch.float16)
    scaler.scale(loss).backward()
    before = [p.detach().clone() for p in overflow.parameters()]
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 59
    assert all(torch.equal(a, p) for a, p in zip(before, overflow.parameters())), "the overflowed step was applied"
