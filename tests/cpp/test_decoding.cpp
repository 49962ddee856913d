// Incremental decoding (tmm/models/decoding.h): for every architecture and
// TMM variant, the logits of a prefill followed by single steps equal the
// full forward's at every position, for every decode method the model has
// (the methods each model must have are stated here, not asked of it); what
// method "auto" picks (the table in docs/cpp.md) at each capacity boundary;
// generation (tmm/models/generation.h) against greedy argmax over forward().
#include <algorithm>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include "tmm/models/generation.h"
#include "tmm/models/language_model.h"
#include "tmm/models/mamba2.h"
#include "tmm/models/transformer.h"

namespace {

using Catch::Matchers::Contains;
using tmm::models::DecodeMethod;

std::string tmm_config(const std::string& extra) {
  return R"({"arch": "tmm", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80)" + extra + "}";
}

constexpr DecodeMethod kRecompute = DecodeMethod::Recompute, kCached = DecodeMethod::Cached,
                        kFast = DecodeMethod::Fast;

struct DecodeCase {
  std::string config;
  std::vector<DecodeMethod> methods;  // what the model must have (docs/cpp.md), in this order
};

// Configs covering every decode path: TMM variants, Hyena, Transformer, Mamba2.
std::vector<DecodeCase> decode_cases() {
  const std::vector<DecodeMethod> long_conv{kRecompute, kCached, kFast}, other{kRecompute, kCached};
  return {
      {tmm_config(""), long_conv},
      {tmm_config(R"(, "heads": 4, "kernel": 3)"), long_conv},
      {tmm_config(R"(, "mixer": "expanded", "heads": 2)"), long_conv},
      {tmm_config(R"(, "mixer": "frozen", "block_order": "mixer_first", "norm": "rmsnorm")"), long_conv},
      {tmm_config(R"(, "mixer": "masked", "heads": 2, "tie_embeddings": true)"), other},  // no Toeplitz vector
      {R"({"arch": "hyena", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "filter_order": 16})",
       long_conv},
      {R"({"arch": "hyena", "vocab_size": 37, "d_model": 8, "n_layers": 1, "max_len": 80, "short_filter": 1, "modulate": false})",
       long_conv},
      {R"({"arch": "transformer", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "n_heads": 2})", other},
      {R"({"arch": "transformer", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "n_heads": 4, "window": 5})",
       other},
      // window 40: prompts shorter than the window, steps past it; no layers: embedding and norm only.
      {R"({"arch": "transformer", "vocab_size": 37, "d_model": 8, "n_layers": 1, "max_len": 80, "n_heads": 1, "window": 40, "tie_embeddings": true})",
       other},
      {R"({"arch": "transformer", "vocab_size": 37, "d_model": 8, "n_layers": 0, "max_len": 80, "n_heads": 2})", other},
      {R"({"arch": "mamba2", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "d_state": 8, "headdim": 8, "chunk_size": 8})",
       other},
      // groups of B and C shared by 4 heads, a short conv, the gated MLP, a chunk size no prompt is a multiple of.
      {R"({"arch": "mamba2", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "d_state": 4, "headdim": 4,)"
       R"( "ngroups": 2, "d_conv": 2, "d_intermediate": 24, "chunk_size": 7, "tie_embeddings": true})",
       other},
  };
}

// The methods the model accepts, asked of it: checked against the stated list.
std::vector<DecodeMethod> accepted_methods(tmm::models::LanguageModel& model) {
  std::vector<DecodeMethod> out;
  for (DecodeMethod m : {kRecompute, kCached, kFast}) {
    DecodeMethod resolved = DecodeMethod::Auto;
    try {
      resolved = model.resolve_decode_method(m, 64);
    } catch (const c10::Error&) {
      continue;
    }
    CHECK(resolved == m);  // an explicit request is kept
    out.push_back(m);
  }
  return out;
}

std::string names(const std::vector<DecodeMethod>& methods) {
  std::string out;
  for (DecodeMethod m : methods) out += (out.empty() ? "" : ",") + tmm::models::to_string(m);
  return out;
}

// Prefill P tokens, then one step at a time up to L; the logits at every
// position against forward() on all L tokens.
void check_against_forward(tmm::models::LanguageModel& model, DecodeMethod method, int64_t P, int64_t L,
                           double tol) {
  const at::Tensor ids = at::randint(model.vocab_size(), {3, L}, at::kLong);
  const at::Tensor expected = model.forward(ids);
  auto state = model.start_decoding(3, L, method);
  std::vector<at::Tensor> got{model.decode(*state, ids.narrow(1, 0, P))};
  for (int64_t t = P; t < L; ++t) got.push_back(model.decode(*state, ids.narrow(1, t, 1)));
  const at::Tensor logits = at::cat(got, 1);
  const double scale = expected.abs().max().item<double>();
  const double err = (logits - expected).abs().max().item<double>();
  INFO("method " << tmm::models::to_string(method) << ", prompt " << P << ", length " << L << ": max error " << err
                 << " at scale " << scale);
  CHECK(err <= tol * scale);
  CHECK(state->position() == L);
}

}  // namespace

TEST_CASE("decode: prefill + steps equal the full forward, every model and method", "[decoding]") {
  torch::NoGradGuard no_grad;
  for (const auto& [config, methods] : decode_cases()) {
    INFO(config);
    at::manual_seed(7);
    auto model = tmm::models::build_model(config);
    model->eval();
    // A method wrongly rejected (or wrongly accepted) fails here rather than
    // dropping out of the loop below.
    CHECK(names(accepted_methods(*model)) == names(methods));
    for (DecodeMethod method : methods) {
      // float64: the methods are exact up to rounding.
      model->to(at::kDouble);
      for (int64_t P : {1, 5, 32}) check_against_forward(*model, method, P, 67, 1e-10);
      // float32: the tolerance a user sees.
      model->to(at::kFloat);
      check_against_forward(*model, method, 3, 50, 2e-4);
    }
  }
}

TEST_CASE("decode: several tokens after the prefill are fed as steps", "[decoding]") {
  torch::NoGradGuard no_grad;
  at::manual_seed(3);
  auto model = tmm::models::build_model(tmm_config(R"(, "heads": 2)"));
  model->eval();
  model->to(at::kDouble);
  const at::Tensor ids = at::randint(37, {2, 40}, at::kLong);
  auto state = model->start_decoding(2, 40, DecodeMethod::Fast);
  const at::Tensor a = model->decode(*state, ids.narrow(1, 0, 10));
  const at::Tensor b = model->decode(*state, ids.narrow(1, 10, 30));
  CHECK(at::allclose(at::cat({a, b}, 1), model->forward(ids), 1e-9, 1e-9));
}

TEST_CASE("decode: a Mamba2 step's state has a fixed size, whatever the position", "[decoding]") {
  torch::NoGradGuard no_grad;
  auto model = tmm::models::build_model(
      R"({"arch": "mamba2", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "d_state": 8, "headdim": 8})");
  model->eval();
  auto state = model->start_decoding(2, 80);
  auto* s = dynamic_cast<tmm::models::LayerwiseDecodeState*>(state.get());
  REQUIRE(s != nullptr);
  REQUIRE(s->layers.size() == 2);
  // d_inner 32 = 4 heads of 8; the conv runs over x, B and C: 32 + 2 * 8 channels.
  const std::vector<int64_t> conv{2, 3, 48}, ssm{2, 4, 8, 8};
  auto check_sizes = [&] {
    for (size_t i = 0; i < s->layers.size(); ++i) {
      const auto& layer = s->layer<tmm::models::Mamba2MixerDecodeState>(i);
      CHECK(layer.conv_inputs.sizes().vec() == conv);
      CHECK(layer.ssm.sizes().vec() == ssm);
    }
  };
  check_sizes();
  model->decode(*state, at::randint(37, {2, 20}, at::kLong));
  check_sizes();
  // A step reads and writes only these: its cost does not depend on the position.
  for (int t = 20; t < 80; ++t) model->decode(*state, at::randint(37, {2, 1}, at::kLong));
  check_sizes();
}

TEST_CASE("decode: a windowed Transformer keeps at most `window` positions per layer", "[decoding]") {
  torch::NoGradGuard no_grad;
  auto slots_of = [](tmm::models::DecodeState& state) {
    auto& s = dynamic_cast<tmm::models::LayerwiseDecodeState&>(state);
    std::vector<int64_t> slots;
    for (size_t i = 0; i < s.layers.size(); ++i) {
      const auto& layer = s.layer<tmm::models::TransformerKVCache>(i);
      CHECK(layer.keys.sizes() == layer.values.sizes());
      slots.push_back(layer.keys.size(2));
    }
    return slots;
  };
  const std::string base =
      R"({"arch": "transformer", "vocab_size": 37, "d_model": 16, "n_layers": 2, "max_len": 80, "n_heads": 4)";
  auto windowed = tmm::models::build_model(base + R"(, "window": 5})");
  windowed->eval();
  auto state = windowed->start_decoding(1, 60);
  CHECK(slots_of(*state) == std::vector<int64_t>{5, 5});
  windowed->decode(*state, at::randint(37, {1, 12}, at::kLong));  // a prompt longer than the window
  for (int t = 12; t < 60; ++t) windowed->decode(*state, at::randint(37, {1, 1}, at::kLong));
  CHECK(slots_of(*state) == std::vector<int64_t>{5, 5});
  // A window past the capacity, or none: one slot per position.
  CHECK(slots_of(*windowed->start_decoding(1, 3)) == std::vector<int64_t>{3, 3});
  auto full = tmm::models::build_model(base + "}");
  CHECK(slots_of(*full->start_decoding(1, 60)) == std::vector<int64_t>{60, 60});
}

TEST_CASE("decode: clear errors", "[decoding]") {
  auto model = tmm::models::build_model(tmm_config(""));
  auto other = tmm::models::build_model(tmm_config(""));
  model->eval();
  const at::Tensor ids = at::zeros({2, 4}, at::kLong);
  CHECK_THROWS_WITH(model->start_decoding(2, 81), Contains("capacity 81 exceeds the model's max_len 80"));
  CHECK_THROWS_WITH(model->start_decoding(0, 8), Contains("batch must be >= 1, got 0"));
  auto state = model->start_decoding(2, 6);
  CHECK_THROWS_WITH(other->decode(*state, ids), Contains("made by another model"));
  CHECK_THROWS_WITH(model->decode(*state, at::zeros({3, 4}, at::kLong)), Contains("B = 2"));
  CHECK_THROWS_WITH(model->decode(*state, at::full({2, 4}, 99, at::kLong)), Contains("[0, 37)"));
  model->decode(*state, ids);
  CHECK_THROWS_WITH(model->decode(*state, ids), Contains("exceed the state's capacity 6"));
  model->train();
  auto fresh = model->start_decoding(2, 6);
  CHECK_THROWS_WITH(model->decode(*fresh, ids), Contains("call eval() first"));
  auto masked = tmm::models::build_model(tmm_config(R"(, "mixer": "masked")"));
  CHECK_THROWS_WITH(masked->start_decoding(1, 8, DecodeMethod::Fast), Contains("long-convolution models (tmm's Toeplitz mixers"));
  CHECK_THROWS_WITH(tmm::models::parse_decode_method("quick"), Contains("got \"quick\""));
}

TEST_CASE("decode: auto picks what docs/cpp.md says, on both sides of each capacity boundary", "[decoding]") {
  torch::NoGradGuard no_grad;
  // docs/cpp.md: TMM's Toeplitz mixers and Hyena decode "fast" from a
  // capacity of 1024 tokens and "cached" below; the masked mixer, the
  // Transformer and Mamba2 always "cached".
  const std::string common = R"("vocab_size": 11, "d_model": 4, "n_layers": 1, "max_len": 1100)";
  struct AutoCase {
    std::string config;
    std::vector<std::pair<int64_t, DecodeMethod>> choices;  // capacity, what auto picks
  };
  const std::vector<std::pair<int64_t, DecodeMethod>> long_conv{{1, kCached}, {1023, kCached}, {1024, kFast},
                                                                {1100, kFast}};
  const std::vector<std::pair<int64_t, DecodeMethod>> always_cached{{1, kCached}, {1023, kCached}, {1024, kCached},
                                                                    {1100, kCached}};
  const std::vector<AutoCase> cases = {
      {R"({"arch": "tmm", )" + common + "}", long_conv},
      {R"({"arch": "tmm", "heads": 2, "mixer": "expanded", )" + common + "}", long_conv},
      {R"({"arch": "tmm", "mixer": "frozen", "kernel": 2, )" + common + "}", long_conv},
      {R"({"arch": "tmm", "mixer": "masked", )" + common + "}", always_cached},
      {R"({"arch": "hyena", "filter_order": 4, )" + common + "}", long_conv},
      {R"({"arch": "transformer", "n_heads": 2, )" + common + "}", always_cached},
      {R"({"arch": "transformer", "n_heads": 2, "window": 16, )" + common + "}", always_cached},
      {R"({"arch": "mamba2", "headdim": 4, "d_state": 4, )" + common + "}", always_cached},
  };
  for (const auto& c : cases) {
    INFO(c.config);
    auto model = tmm::models::build_model(c.config);
    model->eval();
    for (const auto& [capacity, expected] : c.choices) {
      INFO("capacity " << capacity);
      CHECK(model->resolve_decode_method(DecodeMethod::Auto, capacity) == expected);
      CHECK(model->start_decoding(1, capacity)->method() == expected);  // Auto is the default
      // An explicit request is kept whatever the capacity.
      CHECK(model->start_decoding(1, capacity, kCached)->method() == kCached);
      CHECK(model->start_decoding(1, capacity, kRecompute)->method() == kRecompute);
      if (c.choices == long_conv) CHECK(model->start_decoding(1, capacity, kFast)->method() == kFast);
    }
  }
}

TEST_CASE("generate: greedy tokens are forward's argmax, prompts of different lengths, stop tokens", "[decoding]") {
  torch::NoGradGuard no_grad;
  for (const auto& [config, methods] : decode_cases()) {
    INFO(config);
    at::manual_seed(11);
    auto model = tmm::models::build_model(config);
    model->eval();  // as generate() runs it: no dropout
    model->to(at::kDouble);
    const std::vector<std::vector<int64_t>> prompts{{3, 1, 4, 1, 5}, {9, 2}, {6, 5, 3, 5, 8, 9, 7}};
    tmm::models::GenerateOptions options;
    options.max_new_tokens = 9;
    options.sampling.temperature = 0;  // greedy
    for (DecodeMethod method : methods) {
      options.method = method;
      const auto result = tmm::models::generate(*model, prompts, options);
      REQUIRE(result.tokens.size() == prompts.size());
      for (size_t b = 0; b < prompts.size(); ++b) {
        // The same tokens, one at a time: argmax of forward() over the sequence so far.
        std::vector<int64_t> seq = prompts[b], expected;
        for (int64_t i = 0; i < options.max_new_tokens; ++i) {
          const at::Tensor logits = model->forward(at::tensor(seq, at::kLong).unsqueeze(0));
          expected.push_back(logits.select(1, int64_t(seq.size()) - 1).argmax(-1).item<int64_t>());
          seq.push_back(expected.back());
        }
        INFO("method " << tmm::models::to_string(method) << ", prompt " << b);
        CHECK(result.tokens[b] == expected);
        CHECK(result.finish_reasons[b] == "length");
      }
      // A stop token ends its sequence at its first occurrence, kept.
      options.stop_tokens = {result.tokens[0][2]};
      const auto stopped = tmm::models::generate(*model, prompts, options);
      const auto first = std::find(result.tokens[0].begin(), result.tokens[0].end(), result.tokens[0][2]);
      CHECK(stopped.tokens[0] == std::vector<int64_t>(result.tokens[0].begin(), first + 1));
      CHECK(stopped.finish_reasons[0] == "stop");
      options.stop_tokens.clear();
    }
  }
}
