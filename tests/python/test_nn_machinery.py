"""Every drop-in layer works with the PyTorch machinery a plain module must
support: device=/dtype= factory arguments, torch.func.functional_call,
forward hooks, torch.utils.checkpoint and torch.compile(fullgraph=True)
(forward and backward equal to eager)."""
import copy

import pytest
import torch

from tmm.nn import HyenaOperator, Mamba2Mixer, MixerBlock, SequenceModel, ToeplitzMixer
from tmm.testing import rel_err, tolerance

LAYERS = {
    "toeplitz_flat": lambda **kw: ToeplitzMixer(8, 12, **kw),
    "toeplitz_heads_kernel": lambda **kw: ToeplitzMixer(8, 12, heads=2, kernel=2, **kw),
    # mixer_dropout 0: these tests compare two runs in training mode (the dropout: test_nn_toeplitz_mixer.py)
    "toeplitz_expanded": lambda **kw: ToeplitzMixer(8, 12, heads=2, expanded=True, mixer_dropout=0.0, **kw),
    # with heads: a flat frozen mixer has no parameters to differentiate
    "toeplitz_frozen": lambda **kw: ToeplitzMixer(8, 12, heads=2, frozen=True, **kw),
    "toeplitz_masked": lambda **kw: ToeplitzMixer(8, 12, heads=2, masked=True, **kw),
    "tmm_block": lambda **kw: MixerBlock(8, 12, heads=2, norm="rmsnorm", **kw),
    "hyena": lambda **kw: HyenaOperator(8, 12, filter_order=8, **kw),
    "mamba2": lambda **kw: Mamba2Mixer(8, d_state=4, headdim=4, ngroups=2, chunk_size=5, **kw),
}


def inputs(dtype=torch.float64):
    return torch.randn(2, 11, 8, dtype=dtype, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_factory_arguments(name):
    layer = LAYERS[name](device="cpu", dtype=torch.float64)
    assert all(t.dtype == torch.float64 and t.device.type == "cpu"
               for t in list(layer.parameters()) + list(layer.buffers()))
    assert layer(inputs()).dtype == torch.float64


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_functional_call_hooks_checkpoint(name):
    torch.manual_seed(0)
    layer = LAYERS[name](dtype=torch.float64)
    x = inputs()
    halved = {n: 0.5 * p.detach() for n, p in layer.named_parameters()}
    twin = copy.deepcopy(layer)
    with torch.no_grad():
        for n, p in twin.named_parameters():
            p.copy_(halved[n])
    assert rel_err(torch.func.functional_call(layer, halved, (x,)), twin(x)) == 0
    seen = []
    handle = layer.register_forward_hook(lambda m, args, out: seen.append(tuple(out.shape)))
    y = layer(x)
    handle.remove()
    assert seen == [tuple(x.shape)]
    y.square().sum().backward()
    eager = {n: p.grad.clone() for n, p in layer.named_parameters()}
    layer.zero_grad()
    torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False).square().sum().backward()
    for n, p in layer.named_parameters():
        assert rel_err(p.grad, eager[n]) <= 1e-12, n


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_compile_fullgraph_forward_backward(name):
    torch.manual_seed(0)
    torch._dynamo.reset()
    layer = LAYERS[name]()
    x = inputs(torch.float32).requires_grad_()
    y = layer(x)
    y.square().sum().backward()
    eager = {n: p.grad.clone() for n, p in layer.named_parameters()}
    gx = x.grad.clone()
    layer.zero_grad()
    x.grad = None
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    yc = compiled(x)
    assert rel_err(yc, y) <= 1e-6
    yc.square().sum().backward()
    assert rel_err(x.grad, gx) <= 1e-6
    for n, p in layer.named_parameters():
        assert rel_err(p.grad, eager[n]) <= 1e-6, n


@pytest.mark.timeout(600)
def test_inductor_compiles_a_small_model():
    """The default backend (Inductor) over a whole SequenceModel: one graph."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = SequenceModel(ToeplitzMixer, 17, 8, 2, 12, mixer_kwargs={"heads": 2})
    ids = torch.randint(0, 17, (2, 12))
    compiled = torch.compile(model, fullgraph=True)
    eager = model(ids)
    y = compiled(ids)
    assert rel_err(y, eager) <= 1e-5
    y.square().mean().backward()
    g = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    eager.square().mean().backward()
    for n, p in model.named_parameters():
        assert rel_err(g[n], p.grad) <= 1e-5, n


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_autocast_forward_backward(name, dtype):
    """Under CPU autocast each layer runs (the op's autocast registration
    brings its inputs to one dtype) close to float32: within twice the
    table's tolerance of one op, as a layer chains several low-precision
    roundings (projections, the mix, products; measured: up to 1.3e-2 in
    bfloat16, 1.1e-3 in float16)."""
    torch.manual_seed(0)
    layer = LAYERS[name]()
    x = torch.randn(2, 11, 8, generator=torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=dtype):
        y = layer(x)
    y.float().square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())
    with torch.no_grad():
        assert rel_err(y.float(), layer(x)) <= 2 * tolerance(dtype)
