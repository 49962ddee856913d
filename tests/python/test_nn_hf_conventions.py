"""HF-style conventions of the zoo's LMs: LMOutput by name
and as a mapping, shift_labels, transformers.Trainer, hooks on every part
and on the whole model, the config's keys as attributes."""
import copy
import pickle

import pytest
import torch
from torch.nn import functional as F

import tmm


def tiny(arch="tmm"):
    torch.manual_seed(0)
    return tmm.models.build(f"{arch}-tiny")


def test_lm_output_by_name_and_as_mapping():
    model = tiny()
    ids = torch.randint(0, 64, (2, 9))
    out = model(ids, labels=ids, return_hidden=True)
    assert isinstance(out, tmm.models.LMOutput) and isinstance(out, dict)
    assert list(out) == ["loss", "logits", "hidden"]
    assert out["loss"] is out.loss and out["logits"] is out.logits and out["hidden"] is out.hidden
    assert out[0] is out.loss and out[1] is out.logits and out.to_tuple()[2] is out.hidden
    assert dict(out).keys() == {"loss", "logits", "hidden"}
    bare = model(ids, return_hidden=True)
    assert bare.loss is None and "loss" not in bare and list(bare) == ["logits", "hidden"]
    assert bare[0] is bare.logits
    assert "LMOutput(logits=<tensor (2, 9, 64)" in repr(bare)
    again = pickle.loads(pickle.dumps(out))
    assert torch.equal(again.logits, out.logits) and again.loss.item() == out.loss.item()


@pytest.mark.parametrize("arch", ["tmm", "transformer", "hyena", "mamba2"])
def test_shift_labels_is_next_token_prediction(arch):
    model = tiny(arch)
    ids = torch.randint(0, 64, (2, 9))
    ids[0, 4] = 5
    labels = ids.clone()
    labels[1, 3] = -100  # ignored positions stay ignored after the shift
    logits = model(ids)
    want = F.cross_entropy(logits[:, :-1].reshape(-1, 64), labels[:, 1:].reshape(-1), ignore_index=-100)
    assert torch.allclose(model(ids, labels=labels).loss, want, rtol=1e-6, atol=1e-7)  # the default, as transformers
    unshifted = F.cross_entropy(logits.reshape(-1, 64), labels.reshape(-1), ignore_index=-100)
    assert torch.allclose(model(ids, labels=labels, shift_labels=False).loss, unshifted, rtol=1e-6, atol=1e-7)
    model.shift_labels = False  # the model-wide setting: labels are each position's own target
    assert torch.allclose(model(ids, labels=labels).loss, unshifted, rtol=1e-6, atol=1e-7)
    assert torch.allclose(model(ids, labels=labels, shift_labels=True).loss, want, rtol=1e-6, atol=1e-7)
    assert copy.deepcopy(model).shift_labels is False


def test_transformers_trainer_trains_a_tmm_model(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    model = tiny()  # labels = input_ids, as transformers' causal LMs take them
    g = torch.Generator().manual_seed(1)
    pattern = torch.arange(32) % 8  # a learnable sequence: next token = previous + 1 (mod 8)
    rows = [{"input_ids": (pattern + int(torch.randint(0, 8, (1,), generator=g))) % 8} for _ in range(32)]
    data = [{"input_ids": r["input_ids"], "labels": r["input_ids"].clone()} for r in rows]
    ids = torch.stack([r["input_ids"] for r in rows[:8]])
    before = model(ids, labels=ids).loss.item()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=12, per_device_train_batch_size=8, learning_rate=1e-2,
        logging_steps=4, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    result = trainer.train()
    assert result.global_step == 12
    after = model(ids, labels=ids).loss.item()
    assert after < before - 0.3, (before, after)
    assert all("loss" in log for log in trainer.state.log_history if "train_runtime" not in log)


def test_hooks_on_every_part_fire():
    model = tiny()
    seen = []
    handles = [part.register_forward_hook(lambda m, args, out, name=name: seen.append(name))
               for name, part in (("block", model.blocks[0]), ("mixer", model.blocks[0].mixer), ("embed", model.embed))]
    model(torch.randint(0, 64, (1, 4))).sum().backward()
    for h in handles:
        h.remove()
    assert seen == ["embed", "mixer", "block"]


def test_hooks_on_the_whole_model_still_fire():
    model = tiny()
    seen = []
    handle = model.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    model(torch.randint(0, 64, (1, 4)))
    handle.remove()
    assert seen == [(1, 4, 64)]


def test_config_reads_keys_as_attributes_and_num_parameters_takes_hf_arguments():
    model = tiny()
    cfg = model.config
    assert isinstance(cfg, dict) and cfg.d_model == cfg["d_model"] == 32 and cfg.arch == "tmm"
    with pytest.raises(AttributeError, match="no key 'use_cache'"):
        cfg.use_cache
    cfg.use_cache = False  # what transformers.Trainer does: a copy, the model is unchanged
    assert "use_cache" not in model.config
    n_embed = model.embed.weight.numel()
    assert model.num_parameters(exclude_embeddings=True) == model.num_parameters() - n_embed
    model.embed.weight.requires_grad_(False)
    assert model.num_parameters(only_trainable=True) == model.num_parameters(trainable_only=True)
    assert model.num_parameters(trainable_only=True) == model.num_parameters() - n_embed
