"""What a PyTorch user expects of a module, on every zoo model: torch.compile
with fullgraph=True (forward and backward as eager), torch.export.export
(the ops' fake kernels), torch.func (functional_call, grad), hooks on every
submodule a forward calls (a mixer's inner layers hold tensors its one op
takes), and activation checkpointing (the same gradients)."""
import pytest
import torch

import tmm.models

ARCHS = ("tmm", "transformer", "hyena", "mamba2")


def built(arch):
    torch.manual_seed(0)
    return tmm.models.build(f"{arch}-tiny")


def ids_for(model, seed=1):
    return torch.randint(0, model.config["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(seed))


@pytest.mark.compile
@pytest.mark.parametrize("arch", ARCHS)
def test_compile_fullgraph_forward_and_backward(arch):
    eager, model = built(arch), built(arch)
    ids = ids_for(model)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    loss_c, loss_e = compiled(ids, labels=ids).loss, eager(ids, labels=ids).loss
    assert torch.allclose(loss_c, loss_e, rtol=1e-6)
    loss_c.backward()
    loss_e.backward()
    grads = dict(eager.named_parameters())
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, grads[name].grad, rtol=1e-5, atol=1e-7), name


@pytest.mark.compile
@pytest.mark.parametrize("arch", ARCHS)
def test_export(arch):
    model = built(arch).eval()
    ids = ids_for(model)
    program = torch.export.export(model, (ids,))
    other = ids_for(model, seed=2)
    with torch.no_grad():
        assert torch.allclose(program.module()(other), model(other), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_torch_func(arch):
    model = built(arch)
    ids = ids_for(model)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p):
        return torch.func.functional_call(model, p, (ids,), {"labels": ids}).loss

    grads = torch.func.grad(loss)(params)
    model(ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        assert torch.allclose(grads[name], p.grad, rtol=1e-5, atol=1e-7), name
    doubled = {k: 2 * v for k, v in params.items()}
    with torch.no_grad():
        y = torch.func.functional_call(model, doubled, (ids,))
        model.load_state_dict(doubled, strict=False)
        assert torch.equal(y, model(ids))


@pytest.mark.parametrize("arch", ARCHS)
def test_hooks_fire_on_every_submodule(arch):
    model = built(arch)
    seen = []
    handles = [m.register_forward_hook(lambda mod, args, out, name=name: seen.append(name))
               for name, m in model.named_modules() if name]
    model(ids_for(model)).sum().backward()
    for h in handles:
        h.remove()
    inside_an_op = (".mixer.", ".attn.")  # the mixers' and attention's own layers: their op takes the tensors
    called = {name for name, _ in model.named_modules() if name not in ("", "blocks") and
              not any(part in name for part in inside_an_op)}
    assert called == set(seen)


@pytest.mark.parametrize("arch", ARCHS)
def test_activation_checkpointing_gives_the_same_gradients(arch):
    plain, ckpt = built(arch), built(arch)
    ckpt.activation_checkpointing = True
    ids = ids_for(plain)
    plain(ids, labels=ids).loss.backward()
    ckpt(ids, labels=ids).loss.backward()
    grads = dict(plain.named_parameters())
    for name, p in ckpt.named_parameters():
        assert torch.equal(p.grad, grads[name].grad), name
