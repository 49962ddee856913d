// TMM variants (docs/models.md): flat, heads, kernel, expanded, frozen, masked,
// block order, norm, tied embeddings.
#include <string>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tmm/models/tmm.h"

namespace {

nlohmann::json base_config() {
  return {{"arch", "tmm"}, {"vocab_size", 50}, {"d_model", 16}, {"n_layers", 2}, {"max_len", 40}};
}

void check_causal(tmm::models::LanguageModel& model, int64_t V, int64_t L) {
  model.eval();  // the expanded mixer's dropout would differ between the two forwards
  const at::Tensor ids = at::randint(V, {2, L}, at::kLong);
  at::Tensor ids2 = ids.clone();
  ids2.select(1, L - 3).copy_((ids.select(1, L - 3) + 1) % V);
  const at::Tensor a = model.forward(ids), b = model.forward(ids2);
  const double before = (a - b).narrow(1, 0, L - 3).abs().max().item<double>();
  CHECK(before <= 1e-5 * a.abs().max().item<double>());  // float32 rounding of the FFT only
}

}  // namespace

TEST_CASE("TMM variants build, run and stay causal", "[tmm]") {
  at::manual_seed(0);
  const std::vector<nlohmann::json> variants = {
      nlohmann::json::object(),
      {{"heads", 4}},
      {{"kernel", 3}},
      {{"heads", 2}, {"kernel", 4}},
      {{"mixer", "expanded"}},
      {{"mixer", "frozen"}},
      {{"mixer", "masked"}, {"heads", 2}},
      {{"block_order", "mixer_first"}},
      {{"norm", "rmsnorm"}, {"activation", "gelu"}},
      {{"tie_embeddings", true}},
  };
  for (const auto& extra : variants) {
    auto config = base_config();
    config.update(extra);
    INFO("variant " << extra.dump());
    auto model = tmm::models::build_model(config.dump());
    check_causal(*model, 50, 33);
  }
}

TEST_CASE("TMM parameters: names, shapes, frozen and masked mixers, tying", "[tmm]") {
  const int64_t V = 50, d = 16, layers = 2, N = 40;
  auto flat = tmm::models::build_model(base_config().dump());
  auto params = flat->named_parameters();
  CHECK(params["blocks.0.mixer.weight"].sizes() == at::IntArrayRef{1, 1, N});
  CHECK(params["blocks.1.mixer.bias"].sizes() == at::IntArrayRef{1, N});
  CHECK(params["embed.weight"].sizes() == at::IntArrayRef{V, d});
  CHECK(params["head.weight"].sizes() == at::IntArrayRef{V, d});
  // Per block: two LayerNorms (2d each), FFN d->4d->d with biases, Toeplitz vector and bias.
  const int64_t per_block = 2 * 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d) + 2 * N;
  CHECK(flat->parameter_count() == 2 * V * d + layers * per_block);
  // Toeplitz vectors ~ N(0, 2/N), biases zero (the authors' init).
  CHECK(params["blocks.0.mixer.bias"].abs().max().item<double>() == 0.0);

  auto config = base_config();
  config["mixer"] = "frozen";
  auto frozen = tmm::models::build_model(config.dump());
  CHECK_FALSE(frozen->named_parameters().contains("blocks.0.mixer.weight"));
  CHECK(frozen->named_buffers().contains("blocks.0.mixer.weight"));

  config = base_config();
  config["mixer"] = "masked";
  config["heads"] = 2;
  auto masked = tmm::models::build_model(config.dump());
  CHECK(masked->named_parameters()["blocks.0.mixer.weight"].sizes() == at::IntArrayRef{2, N, N});

  config = base_config();
  config["tie_embeddings"] = true;
  auto tied = tmm::models::build_model(config.dump());
  CHECK_FALSE(tied->named_parameters().contains("head.weight"));
  CHECK(tied->parameter_count() == flat->parameter_count() - V * d);
}

TEST_CASE("TMM config errors name the key", "[tmm]") {
  using Catch::Matchers::Contains;
  auto bad = [](nlohmann::json extra) {
    auto c = base_config();
    c.update(extra);
    return c.dump();
  };
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"heads", 3}})), Contains("heads"));
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"kernel", 17}})), Contains("kernel"));
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"mixer", "attention"}})), Contains("mixer"));
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"dropout", 1.5}})), Contains("dropout"));
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"norm", "batchnorm"}})), Contains("norm"));
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"block_order", "both"}})), Contains("block_order"));
  CHECK_THROWS_WITH(tmm::models::build_model(bad({{"tie_embeddings", 1}})), Contains("tie_embeddings"));
}
