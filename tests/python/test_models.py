"""tmm.models: the zoo's models as plain nn.Module trees (their values the
C++ models', their decoding, generation and checkpoints the C++ library's
through a C++ model that borrows their tensors), and their checkpoints.
Every test runs for every models/*-tiny.json."""
import copy
import io
import json
import pickle
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tmm.models
from tmm.io.safetensors import load_file, save_file

from cpp_twin import CppTwin

MODELS = Path(__file__).resolve().parents[2] / "models"
TINY = sorted(p.stem for p in MODELS.glob("*-tiny.json"))
B, L = 2, 16


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(params=TINY)
def name(request):
    return request.param


def config_of(name, **changes):
    c = json.loads((MODELS / f"{name}.json").read_text())
    c.update(changes)
    return c


def ids_for(model, b=B, n=L, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config["vocab_size"], (b, n), generator=g)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_zoo_has_tiny_configs():
    assert "tmm-tiny" in TINY
    assert set(TINY) <= set(tmm.models.list_configs())
    assert {n.rsplit("-", 1)[0] for n in TINY} <= set(tmm.models.architectures()) == set(tmm.models.ARCHITECTURES)


# --- building and running ---------------------------------------------------


def test_build_by_name_path_dict_and_text(name, tmp_path):
    c = config_of(name)
    a = tmm.models.build(name)
    assert type(a) is tmm.models.ARCHITECTURES[c["arch"]] and isinstance(a, tmm.nn.LanguageModel)
    full = a.config
    assert full["arch"] == c["arch"] and all(full[k] == v for k, v in c.items())
    for src in (str(MODELS / f"{name}.json"), MODELS / f"{name}.json", c, json.dumps(c), full):
        assert tmm.models.build(src).config == full
    assert a.arch == c["arch"]


def test_a_plain_module_tree(name):
    """Every parameter and buffer is Python's own (no C++ model holds it),
    every submodule is callable, and the tree computes what C++ computes."""
    model = tmm.models.build(name).eval()
    assert model._engine is None
    assert all(type(p) is nn.Parameter and not p.is_meta for p in model.parameters())
    ids = ids_for(model)
    h = model.embed(ids)
    for block in model.blocks:  # a block alone
        h = block(h)
    norm = model.final_norm_module()
    with torch.no_grad():
        assert torch.equal(model.hidden_states(ids), norm(h) if norm is not None else h)
        assert torch.equal(model(ids), CppTwin(model)(ids))
    assert "blocks" in repr(model) and len(model.blocks) == model.config["n_layers"]


def test_forward_shapes(name):
    model = tmm.models.build(name)
    c, ids = model.config, ids_for(model)
    logits = model(ids)
    assert logits.shape == (B, L, c["vocab_size"]) and logits.dtype == torch.float32
    out = model(ids, return_hidden=True)
    assert isinstance(out, tmm.models.LMOutput) and out.loss is None
    assert out.hidden.shape == (B, L, c["d_model"])
    torch.testing.assert_close(out.logits, logits)
    torch.testing.assert_close(model.hidden_states(ids), out.hidden)
    out = model(ids, labels=ids)  # next-token prediction, as transformers
    assert out.hidden is None and out.loss.shape == ()
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, expected)
    own = model(ids, labels=ids, shift_labels=False).loss  # each position's own target
    torch.testing.assert_close(own, F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids.reshape(-1)))


def test_causality(name):
    model = tmm.models.build(name).eval()
    ids = ids_for(model, n=24)
    t = 13
    changed = ids.clone()
    changed[:, t] = (changed[:, t] + 1) % model.config["vocab_size"]
    with torch.no_grad():
        a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :t], b[:, :t], rtol=0, atol=1e-5)
    assert not torch.allclose(a[:, t:], b[:, t:])


def test_every_parameter_gets_a_gradient_from_a_python_loss(name):
    model = tmm.models.build(name)
    ids = ids_for(model)
    logits = model(ids)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
    loss.backward()
    for n, p in model.named_parameters():
        assert p.grad is not None, n
        assert torch.isfinite(p.grad).all() and p.grad.abs().max() > 0, n


def test_twenty_adamw_steps_lower_the_loss_and_reach_generation(name):
    torch.manual_seed(0)
    model = tmm.models.build(name)
    ids = ids_for(model, b=4, n=32)
    before = snapshot(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        final = model(ids, labels=ids).loss.item()
        assert final < 0.9 * losses[0], (losses, final)
        assert torch.equal(CppTwin(model)(ids), model(ids))  # C++ computes with the trained tensors
    after = model.state_dict()
    for n, _ in model.named_parameters():
        assert not torch.equal(after[n], before[n]), f"{n} did not change"
    greedy = model.generate(ids[0, :5].tolist(), max_new_tokens=3, temperature=0)["tokens"]
    step = ids[:1, :5]
    for token in greedy:  # C++ generation agrees with the Python forward
        with torch.no_grad():
            assert int(model(step)[0, -1].argmax()) == token
        step = torch.cat([step, torch.tensor([[token]])], 1)


def test_requires_grad(name):
    model = tmm.models.build(name)
    model.requires_grad_(False)
    assert model.num_parameters(trainable_only=True) == 0
    model.get_submodule("blocks.0").requires_grad_(True)
    out = model(ids_for(model), labels=ids_for(model))
    out.loss.backward()
    for n, p in model.named_parameters():
        assert (p.grad is not None) == n.startswith("blocks.0."), n


def test_to_float64_and_back(name):
    model = tmm.models.build(name).eval()
    ids = ids_for(model)
    with torch.no_grad():
        ref = model(ids)
        model.generate([1, 2], max_new_tokens=1)  # an engine bound to the float32 tensors
        assert model.double() is model and model._engine is None  # let go of them
        got = model(ids)
        assert got.dtype == torch.float64 and torch.equal(got, CppTwin(model)(ids))
        torch.testing.assert_close(got.float(), ref, rtol=1e-4, atol=1e-4)
        model.to(dtype=torch.float32)
        torch.testing.assert_close(model(ids), ref, rtol=1e-5, atol=1e-5)


def test_bad_input_ids_are_clear_errors(name):
    model = tmm.models.build(name)
    c = model.config
    with pytest.raises(ValueError, match=r"input_ids: expected token ids in \[0, \d+\)"):
        model(torch.full((1, 4), c["vocab_size"]))
    with pytest.raises(ValueError, match="input_ids: sequence length"):
        model(torch.zeros(1, c["max_len"] + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids: expected a B x L int64 tensor"):
        model(torch.zeros(1, 4, dtype=torch.int32))


def test_train_and_eval(name):
    model = tmm.models.build(config_of(name, dropout=0.5))
    ids = ids_for(model)
    assert model.training
    with torch.no_grad():
        assert not torch.equal(model(ids), model(ids))  # dropout on
        model.eval()
        assert not any(m.training for m in model.modules())
        assert torch.equal(model(ids), model(ids))
        model.train()
        model.get_submodule("blocks.0").eval()  # only that block
        assert not model.get_submodule("blocks.0").training and model.blocks[1].training and model.training


# --- state_dict, replaced tensors, pickling, copies ---------------------------


def test_load_state_dict(name):
    a, b = tmm.models.build(name).eval(), tmm.models.build(name).eval()
    ids = ids_for(a)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert torch.equal(a(ids), b(ids))
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    c = tmm.models.build(name).eval()
    c.load_state_dict(torch.load(buf, weights_only=True), assign=True)
    with torch.no_grad():
        assert torch.equal(a(ids), c(ids)) and torch.equal(CppTwin(c)(ids), a(ids))


def test_failed_load_state_dict_loads_nothing(name):
    model = tmm.models.build(name)
    before = snapshot(model)
    good = tmm.models.build(name).state_dict()
    first, last = next(iter(good)), list(good)[-1]
    wrong_shape = dict(good)
    wrong_shape[last] = torch.zeros(3, 3)
    with pytest.raises(RuntimeError, match=f"(?s)nothing was loaded.*size mismatch for \"{re.escape(last)}\""):
        model.load_state_dict(wrong_shape)
    missing = dict(good)
    del missing[last]
    with pytest.raises(RuntimeError, match=f"missing key \"{last}\""):
        model.load_state_dict(missing)
    with pytest.raises(RuntimeError, match="unexpected key \"extra.weight\""):
        model.load_state_dict(good | {"extra.weight": torch.zeros(1)})
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    model.load_state_dict(missing, strict=False)  # the rest is copied
    after = model.state_dict()
    assert torch.equal(after[first], good[first]) and torch.equal(after[last], before[last])


def test_replaced_tensors_are_what_everything_computes_with(name):
    """A new Parameter object, functional_call, load_state_dict(assign=True):
    the forward and the C++ generation and checkpoint use them."""
    model = tmm.models.build(name).eval()
    ids = ids_for(model)
    model.embed.weight = nn.Parameter(torch.randn_like(model.embed.weight))
    with torch.no_grad():
        assert torch.equal(model(ids), CppTwin(model)(ids))
        doubled = {k: 2 * v for k, v in model.state_dict().items()}
        y = torch.func.functional_call(model, doubled, (ids,))
        model.load_state_dict(doubled, assign=True)
        assert torch.equal(y, model(ids)) and torch.equal(y, CppTwin(model)(ids))


def test_pickle_deepcopy_and_torch_save(name):
    model = tmm.models.build(name).eval()
    model.generate([1, 2], max_new_tokens=1)  # it has an engine now
    model.get_submodule("embed").requires_grad_(False)
    ids = ids_for(model)
    with torch.no_grad():
        ref = model(ids)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model)), torch.load(buf, weights_only=False)]
    for c in copies:
        assert type(c) is type(model) and c.config == model.config and not c.training
        frozen = {n for n, p in c.named_parameters() if not p.requires_grad}
        assert frozen == {n for n, p in model.named_parameters() if not p.requires_grad}
        with torch.no_grad():
            assert torch.equal(c(ids), ref) and torch.equal(CppTwin(c)(ids), ref)
    with torch.no_grad():
        for p in copies[0].parameters():
            p.add_(1.0)
        assert torch.equal(model(ids), ref)


# --- checkpoints ----------------------------------------------------------------


def trained(name, steps=2):
    torch.manual_seed(0)
    model = tmm.models.build(name)
    ids = ids_for(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):  # so that no tensor keeps its initial value
        opt.zero_grad()
        model(ids, labels=ids).loss.backward()
        opt.step()
    return model.eval()


def test_save_load_identical_logits(name, tmp_path):
    model = trained(name)
    ids = ids_for(model)
    model.save(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["config.json", "model.safetensors"]
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text()) == model.config
    loaded = tmm.models.load(tmp_path / "ckpt").eval()
    assert type(loaded) is type(model) and loaded.config == model.config
    with torch.no_grad():
        assert torch.equal(loaded(ids), model(ids))
    sd, lsd = model.state_dict(), loaded.state_dict()
    assert sd.keys() == lsd.keys() and all(torch.equal(sd[k], lsd[k]) for k in sd)
    model.save(tmp_path / "ckpt")  # overwrites
    as64 = tmm.models.load(tmp_path / "ckpt", dtype=torch.float64)
    assert as64.get_submodule("embed").weight.dtype == torch.float64


def test_load_device_and_dtype(name, tmp_path):
    """load(device=, dtype=) (docs/models.md): every tensor where asked, the
    same logits."""
    model = trained(name)
    ids = ids_for(model)
    model.save(tmp_path / "ckpt")
    with torch.no_grad():
        expected = model(ids)
        for device in ("cpu", torch.device("cpu")):
            loaded = tmm.models.load(tmp_path / "ckpt", device=device).eval()
            assert {t.device.type for t in loaded.state_dict().values()} == {"cpu"}
            assert torch.equal(loaded(ids), expected)
        both = tmm.models.load(tmp_path / "ckpt", device="cpu", dtype=torch.float64).eval()
        assert {t.dtype for t in both.state_dict().values() if t.is_floating_point()} == {torch.float64}
        assert torch.allclose(both(ids).float(), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="nowhere"):
        tmm.models.load(tmp_path / "ckpt", device="nowhere")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="load(device='cuda') needs a CUDA device")
def test_load_to_cuda(name, tmp_path):
    model = trained(name)
    ids = ids_for(model)
    model.save(tmp_path / "ckpt")
    loaded = tmm.models.load(tmp_path / "ckpt", device="cuda").eval()
    assert {t.device.type for t in loaded.state_dict().values()} == {"cuda"}
    with torch.no_grad():
        got = loaded(ids.cuda()).cpu()
        expected = model(ids)
    assert (got - expected).abs().max() <= 1e-4 * expected.abs().max()


def test_checkpoint_dtype_converts_on_load(name, tmp_path):
    model = trained(name)
    model.double().save(tmp_path)
    loaded = tmm.models.load(tmp_path)  # float64 file into the float32 model
    for n, t in loaded.state_dict().items():
        if t.is_floating_point():
            assert t.dtype == torch.float32 and torch.equal(t, model.state_dict()[n].float()), n


def test_checkpoint_is_a_safetensors_file(name, tmp_path):
    st = pytest.importorskip("safetensors.torch")
    from safetensors import safe_open

    model = trained(name)
    model.save(tmp_path)
    got = st.load_file(str(tmp_path / "model.safetensors"))
    sd = model.state_dict()
    assert got.keys() == sd.keys()
    assert all(torch.equal(got[k], sd[k]) for k in sd)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        meta = f.metadata()
    assert meta["format"] == "pt" and meta["arch"] == model.arch and meta["tmm_version"] == tmm.__version__
    # and the other way: a file written by the safetensors package loads
    other = trained(name, steps=3)
    st.save_file({k: v.contiguous() for k, v in other.state_dict().items()}, str(tmp_path / "model.safetensors"))
    loaded = tmm.models.load(tmp_path).eval()
    ids = ids_for(model)
    with torch.no_grad():
        assert torch.equal(loaded(ids), other(ids))


@pytest.fixture
def checkpoint(tmp_path):
    """A saved tmm-tiny checkpoint: (dir, {name: tensor}, metadata)."""
    tmm.models.build("tmm-tiny").save(tmp_path)
    tensors, meta = load_file(tmp_path / "model.safetensors")
    return tmp_path, tensors, meta


def rewrite(ckpt, tensors, meta):
    save_file(tensors, ckpt / "model.safetensors", meta)


def test_checkpoint_missing_tensor(checkpoint):
    ckpt, tensors, meta = checkpoint
    del tensors["blocks.1.mixer.weight"]
    rewrite(ckpt, tensors, meta)
    with pytest.raises(RuntimeError, match=r"model\.safetensors.*missing tensor 'blocks\.1\.mixer\.weight'"):
        tmm.models.load(ckpt)


def test_checkpoint_unexpected_tensor(checkpoint):
    ckpt, tensors, meta = checkpoint
    tensors["blocks.7.extra"] = torch.zeros(2)
    rewrite(ckpt, tensors, meta)
    with pytest.raises(RuntimeError, match=r"model\.safetensors.*unexpected tensor 'blocks\.7\.extra'"):
        tmm.models.load(ckpt)


def test_checkpoint_wrong_shape(checkpoint):
    ckpt, tensors, meta = checkpoint
    tensors["embed.weight"] = torch.zeros(3, 4)
    rewrite(ckpt, tensors, meta)
    with pytest.raises(RuntimeError, match=r"model\.safetensors.*'embed\.weight' has shape \[3, 4\]"):
        tmm.models.load(ckpt)


def test_checkpoint_wrong_dtype_kind(checkpoint):
    ckpt, tensors, meta = checkpoint
    tensors["embed.weight"] = tensors["embed.weight"].long()
    rewrite(ckpt, tensors, meta)
    with pytest.raises(RuntimeError, match=r"'embed\.weight' is Long"):
        tmm.models.load(ckpt)


def test_checkpoint_bf16_loads_converted(checkpoint):
    ckpt, tensors, meta = checkpoint
    rewrite(ckpt, {k: v.bfloat16() for k, v in tensors.items()}, meta)
    loaded = tmm.models.load(ckpt)
    assert all(torch.equal(loaded.state_dict()[k], v.bfloat16().float()) for k, v in tensors.items())


def test_checkpoint_arch_mismatch(checkpoint):
    ckpt, tensors, meta = checkpoint
    rewrite(ckpt, tensors, meta | {"arch": "transformer"})
    with pytest.raises(RuntimeError, match="written by a \"transformer\" model"):
        tmm.models.load(ckpt)


def test_checkpoint_bad_config(checkpoint):
    ckpt, _, _ = checkpoint
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text("{not json")
    with pytest.raises(RuntimeError, match=r"config\.json.*not valid JSON"):
        tmm.models.load(ckpt)
    (ckpt / "config.json").write_text(json.dumps(config | {"colour": "red"}))
    with pytest.raises(RuntimeError, match=r"config\.json.*unknown key \"colour\""):
        tmm.models.load(ckpt)
    (ckpt / "config.json").write_text(json.dumps(config | {"d_model": 48}))  # valid, but not these weights
    with pytest.raises(RuntimeError, match="has shape"):
        tmm.models.load(ckpt)
    (ckpt / "config.json").unlink()
    with pytest.raises(RuntimeError, match=r"config\.json' does not exist"):
        tmm.models.load(ckpt)


def test_checkpoint_missing_or_truncated_weights(checkpoint):
    ckpt, _, _ = checkpoint
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[:-10])
    with pytest.raises(RuntimeError, match=r"model\.safetensors"):
        tmm.models.load(ckpt)
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(RuntimeError, match=r"model\.safetensors.*cannot open"):
        tmm.models.load(ckpt)
    with pytest.raises(RuntimeError, match="not a directory"):
        tmm.models.load(ckpt / "nowhere")


# --- build errors ---------------------------------------------------------------


def test_build_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config named 'tmm-huge'.*tmm-tiny"):
        tmm.models.build("tmm-huge")
    with pytest.raises(FileNotFoundError, match="no such config file"):
        tmm.models.build(tmp_path / "none.json")
    with pytest.raises(RuntimeError, match="unknown key \"colour\""):
        tmm.models.build(config_of("tmm-tiny", colour="red"))
    with pytest.raises(RuntimeError, match="unknown \"arch\" \"gpt\""):
        tmm.models.build({"arch": "gpt"})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(config_of("tmm-tiny", d_model="wide")))
    with pytest.raises(RuntimeError, match=r"bad\.json.*\"d_model\""):
        tmm.models.build(bad)
    with pytest.raises(TypeError):
        tmm.models.build(3)


@pytest.mark.parametrize("config", sorted(p.name for p in MODELS.glob("*.json")))
def test_every_zoo_config_builds(config):
    """Every config in models/ builds; the small ones also run a forward."""
    model = tmm.models.build(str(MODELS / config))
    assert model.num_parameters() > 0
    if "paper" not in config:
        ids = torch.randint(model.config["vocab_size"], (1, 16))
        assert model(ids).shape == (1, 16, model.config["vocab_size"])
