"""Generation through the C++ generator (tmm/models/generation.h) from
Python: greedy equals an argmax loop over the full forward, every decode
method gives the same tokens, batched prompts of different lengths equal
one-at-a-time generation, sampling is seeded, stop tokens and errors,
and a model in training mode (fresh from build or load) needs no eval()."""
import copy

import pytest
import torch

import tmm.models as M

ARCHS = ["tmm", "hyena", "transformer", "mamba2"]


def _model(arch):
    torch.manual_seed(0)
    m = M.build(f"{arch}-tiny")
    m.eval()
    return m


def _methods(m):
    return ["recompute", "cached"] + (["fast"] if m.arch in ("tmm", "hyena") else [])


def _argmax_loop(m, prompt, n):
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            seq.append(int(m(torch.tensor([seq])).argmax(-1)[0, -1]))
    return seq[len(prompt):]


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_equals_argmax_loop_for_every_method(arch):
    m = _model(arch)
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11]]
    expected = [_argmax_loop(m, p, 12) for p in prompts]
    for method in _methods(m):
        out = m.generate(prompts, 12, temperature=0, method=method)
        assert out["method"] == method
        assert out["tokens"] == expected, method
        assert out["finish_reasons"] == ["length"] * 3


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_prompts_equal_single_generation(arch):
    m = _model(arch)
    prompts = [[5, 6], [7, 8, 9, 10, 11], [1, 2, 3]]
    batched = m.generate(prompts, 8, temperature=0.9, top_k=20, seed=5)
    for i, p in enumerate(prompts):
        # Sequence i draws from the generator stream i: generate it alone as the i-th of a batch of copies.
        alone = m.generate([p] * (i + 1), 8, temperature=0.9, top_k=20, seed=5)
        assert alone["tokens"][i] == batched["tokens"][i]


def test_sampling_is_seeded_and_top_k_1_is_greedy():
    m = _model("tmm")
    a = m.generate([1, 2, 3], 20, temperature=1.0, seed=1)
    b = m.generate([1, 2, 3], 20, temperature=1.0, seed=1)
    c = m.generate([1, 2, 3], 20, temperature=1.0, seed=2)
    assert a["tokens"] == b["tokens"] and a["tokens"] != c["tokens"]
    greedy = m.generate([1, 2, 3], 20, temperature=0)["tokens"]
    assert m.generate([1, 2, 3], 20, temperature=1.5, top_k=1, seed=9)["tokens"] == greedy
    assert m.generate([1, 2, 3], 20, temperature=1.5, top_p=1e-9, seed=9)["tokens"] == greedy


def test_prompts_as_tensors():
    m = _model("tmm")
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    expected = m.generate([[1, 2, 3], [4, 5, 6]], 5, temperature=0)["tokens"]
    assert m.generate(ids, 5, temperature=0)["tokens"] == expected
    assert m.generate(ids[1], 5, temperature=0)["tokens"] == expected[1]


def test_stop_tokens_and_callback():
    m = _model("tmm")
    greedy = m.generate([1, 2, 3], 10, temperature=0)["tokens"]
    stop = greedy[3]
    out = m.generate([1, 2, 3], 10, temperature=0, stop_tokens=[stop])
    assert out["tokens"] == greedy[: greedy.index(stop) + 1] and out["finish_reasons"] == "stop"
    seen = []
    out = m.generate([[1, 2], [3, 4, 5, 6]], 10, temperature=0, on_tokens=lambda t: seen.append(t) or len(seen) < 3)
    assert out["finish_reasons"] == ["callback", "callback"]
    # The second sequence reads its prompt (positions 2, 3) before generating.
    assert seen[0][1] == -1 and seen[1][1] == -1 and seen[2][1] >= 0
    assert [s[0] for s in seen] == out["tokens"][0]


def test_decode_state_api_matches_forward():
    m = _model("hyena")
    ids = torch.randint(0, m.config["vocab_size"], (2, 20))
    state = m.start_decoding(2, 20, "fast")
    got = torch.cat([m.decode(state, ids[:, :7])] + [m.decode(state, ids[:, t:t + 1]) for t in range(7, 20)], 1)
    assert state.position == 20 and state.method == "fast"
    torch.testing.assert_close(got, m(ids), rtol=2e-4, atol=2e-4)


def test_clear_errors():
    m = _model("tmm")
    max_len = m.config["max_len"]
    with pytest.raises(RuntimeError, match="max_new_tokens: expected >= 1, got 0"):
        m.generate([1], 0)
    with pytest.raises(RuntimeError, match="prompt 1 is empty"):
        m.generate([[1], []], 3)
    with pytest.raises(RuntimeError, match="prompt 0 has token id 999"):
        m.generate([1, 999], 3)
    with pytest.raises(RuntimeError, match="more than the model's max_len"):
        m.generate([1] * max_len, 2)
    with pytest.raises(RuntimeError, match="temperature: expected a finite value >= 0, got -1"):
        m.generate([1], 2, temperature=-1)
    with pytest.raises(RuntimeError, match=r"top_p: expected a value in \(0, 1\], got 0"):
        m.generate([1], 2, top_p=0)
    with pytest.raises(RuntimeError, match='decode method: expected auto, recompute, cached, fast or distilled, got "slow"'):
        m.generate([1], 2, method="slow")
    with pytest.raises(RuntimeError, match='"fast" is for the long-convolution models'):
        _model("transformer").generate([1], 2, method="fast")
    m.train()  # decoding is inference in any mode: dropout off
    with torch.no_grad():
        assert torch.equal(m.decode(m.start_decoding(1, 4), torch.tensor([[1]])), m.eval()(torch.tensor([[1]])))


def _modes(m):
    """Each module's train/eval flag."""
    return {n: x.training for n, x in m.named_modules()}


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_from_a_fresh_model_needs_no_eval_and_restores_every_mode(arch, tmp_path):
    """build() and load() give a model in training mode. generate runs with
    dropout off by itself (the tokens of the same model in eval mode) and
    leaves each module's flag as it was, a mixed tree included."""
    torch.manual_seed(0)
    m = M.build(dict(M.build(f"{arch}-tiny").config, dropout=0.5))
    assert m.training
    reference = copy.deepcopy(m).eval().generate([1, 2, 3], 6, temperature=0)["tokens"]
    assert m.generate([1, 2, 3], 6, temperature=0)["tokens"] == reference
    assert all(_modes(m).values())

    list(m.children())[-1].eval()  # a mixed tree: one branch in eval mode, the rest training
    before = _modes(m)
    assert len({v for v in before.values()}) == 2
    assert m.generate([1, 2, 3], 6, temperature=0)["tokens"] == reference
    assert _modes(m) == before

    m.train()
    m.save(tmp_path)
    loaded = M.load(tmp_path)
    assert loaded.training
    assert loaded.generate([1, 2, 3], 6, temperature=0)["tokens"] == reference
    assert loaded.training
