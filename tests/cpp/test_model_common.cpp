// The skeleton every model shares (tmm/models/language_model.h, config.h):
// the common config keys read and written once, the same for every
// architecture; the embedding, blocks, final norm and the optionally tied
// head; the parameter order; option names parsed once into enums.
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include "models/layers.h"  // RMSNormImpl, to apply a final norm by hand
#include "tmm/models.h"

namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace tmm::models;

// One small config per architecture, with only its required own keys.
std::vector<json> configs() {
  const json common = {{"vocab_size", 23}, {"d_model", 8}, {"n_layers", 2}, {"max_len", 16}};
  std::vector<json> out = {json{{"arch", "tmm"}},
                           json{{"arch", "transformer"}, {"n_heads", 2}},
                           json{{"arch", "hyena"}, {"filter_order", 4}},
                           json{{"arch", "mamba2"}, {"headdim", 4}, {"d_state", 4}}};
  for (auto& c : out) c.update(common);
  return out;
}

// The typed parser of `arch`, text in, text out.
std::string parse_as(const std::string& arch, const std::string& text) {
  if (arch == "tmm") return TMMConfig::from_json_text(text).to_json_text();
  if (arch == "transformer") return TransformerConfig::from_json_text(text).to_json_text();
  if (arch == "hyena") return HyenaConfig::from_json_text(text).to_json_text();
  REQUIRE(arch == "mamba2");
  return Mamba2Config::from_json_text(text).to_json_text();
}

std::string typed_round_trip(const json& config) {
  return parse_as(config.at("arch").get<std::string>(), config.dump());
}

// The final norm's module name, where the architecture has one.
std::string final_norm_name(const std::string& arch) {
  if (arch == "transformer" || arch == "mamba2") return "norm";
  return "";  // TMM and Hyena (the authors' HyenaModel): none unless "final_norm"
}

}  // namespace

TEST_CASE("common config: every architecture reads and writes the same keys the same way", "[models][common]") {
  for (auto config : configs()) {
    INFO(config.dump());
    config["dropout"] = 0.25;
    config["tie_embeddings"] = true;
    auto model = build_model(config.dump());
    const CommonConfig& c = model->common_config();
    CHECK(c.vocab_size == 23);
    CHECK(c.d_model == 8);
    CHECK(c.n_layers == 2);
    CHECK(c.max_len == 16);
    CHECK(c.dropout == 0.25);
    CHECK(c.tie_embeddings);
    CHECK(model->arch() == config["arch"].get<std::string>());
    CHECK(model->vocab_size() == 23);
    CHECK(model->max_len() == 16);

    const json written = json::parse(model->config_json());
    for (const char* key : {"arch", "vocab_size", "d_model", "n_layers", "max_len", "dropout", "tie_embeddings"})
      CHECK(written.at(key) == config.at(key));
    // The typed config says the same as the model, and reads back what it writes.
    CHECK(typed_round_trip(config) == model->config_json());
    CHECK(typed_round_trip(written) == model->config_json());
    CHECK(build_model(model->config_json())->config_json() == model->config_json());

    // Defaults of the optional common keys: no dropout, an untied head.
    json minimal = config;
    minimal.erase("dropout");
    minimal.erase("tie_embeddings");
    const json defaults = json::parse(build_model(minimal.dump())->config_json());
    CHECK(defaults.at("dropout") == 0.0);
    CHECK(defaults.at("tie_embeddings") == false);
  }
}

TEST_CASE("common config: one message per mistake, whatever the architecture", "[models][common]") {
  for (const auto& config : configs()) {
    INFO(config.dump());
    auto with = [&](const char* key, const json& value) {
      json c = config;
      c[key] = value;
      return c.dump();
    };
    CHECK_THROWS_WITH(build_model(with("vocab_size", 0)), Contains("key \"vocab_size\" must be >= 1, got 0"));
    CHECK_THROWS_WITH(build_model(with("d_model", 0)), Contains("key \"d_model\" must be >= 1, got 0"));
    CHECK_THROWS_WITH(build_model(with("max_len", 0)), Contains("key \"max_len\" must be >= 1, got 0"));
    CHECK_THROWS_WITH(build_model(with("n_layers", -1)), Contains("key \"n_layers\" must be >= "));
    CHECK_THROWS_WITH(build_model(with("dropout", 1.0)), Contains("key \"dropout\" must be in [0, 1)"));
    CHECK_THROWS_WITH(build_model(with("tie_embeddings", 1)), Contains("key \"tie_embeddings\" must be a boolean"));
    CHECK_THROWS_WITH(build_model(with("max_len", "long")), Contains("key \"max_len\" must be an integer"));
    json missing = config;
    missing.erase("vocab_size");
    CHECK_THROWS_WITH(build_model(missing.dump()), Contains("missing key \"vocab_size\""));
    // A typed parser checks "arch" itself.
    for (const char* arch : {"tmm", "transformer", "hyena", "mamba2"}) {
      if (config["arch"] == arch) continue;
      CHECK_THROWS_WITH(parse_as(arch, config.dump()),
                        Contains("key \"arch\" must be \"" + std::string(arch) + "\", got \""));
    }
  }
  // ... and takes only JSON text, with a c10::Error otherwise.
  CHECK_THROWS_WITH(TMMConfig::from_json_text("{\"arch\": "), Contains("TMM config: not valid JSON"));
  CHECK_THROWS_WITH(TransformerConfig::from_json_text("[1"), Contains("Transformer config: not valid JSON"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(""), Contains("Hyena config: not valid JSON"));
  CHECK_THROWS_WITH(Mamba2Config::from_json_text("nope"), Contains("mamba2 config: not valid JSON"));
}

TEST_CASE("skeleton: hidden states are the final norm of the blocks over the embedding", "[models][common]") {
  for (const auto& config : configs()) {
    INFO(config.dump());
    at::manual_seed(1);
    auto model = build_model(config.dump());
    const auto modules = model->named_modules();
    REQUIRE(model->blocks().size() == 2);
    for (size_t i = 0; i < model->blocks().size(); ++i) {  // the typed list is the module tree's
      const auto* in_tree = modules.find("blocks." + std::to_string(i));
      REQUIRE(in_tree != nullptr);
      CHECK(in_tree->get() == static_cast<torch::nn::Module*>(model->blocks()[i].get()));
    }
    CHECK(modules["embed"].get() == model->embedding().ptr().get());

    const at::Tensor ids = at::randint(23, {2, 11}, at::kLong);
    at::Tensor h = model->embedding()->forward(ids);
    for (const auto& block : model->blocks()) h = block->forward(h);
    const std::string norm = final_norm_name(config["arch"].get<std::string>());
    if (norm.empty()) {
      CHECK_FALSE(modules.contains("norm"));
      CHECK_FALSE(modules.contains("final_norm"));
    } else if (auto* rms = dynamic_cast<RMSNormImpl*>(modules[norm].get())) {
      h = rms->forward(h);
    } else {
      auto* layer_norm = dynamic_cast<torch::nn::LayerNormImpl*>(modules[norm].get());
      REQUIRE(layer_norm != nullptr);
      h = layer_norm->forward(h);
    }
    CHECK(at::equal(model->hidden_states(ids), h));
    CHECK(at::equal(model->forward(ids), model->head(h)));
    const auto out = model->forward_with(ids, std::nullopt, /*return_hidden=*/true);
    CHECK(at::equal(out.hidden, h));
    CHECK(at::equal(out.logits, model->head(h)));
  }
}

TEST_CASE("skeleton: parameters in the order embed, blocks, final norm, head", "[models][common]") {
  for (const auto& config : configs()) {
    INFO(config.dump());
    auto model = build_model(config.dump());
    std::vector<std::string> names;
    for (const auto& p : model->named_parameters()) names.push_back(p.key());
    REQUIRE(names.size() > 3);
    CHECK(names.front() == "embed.weight");
    CHECK(names.back() == "head.weight");
    // Then every block's, in block order, then the final norm's.
    size_t i = 1;
    for (int64_t b = 0; b < 2; ++b) {
      const std::string prefix = "blocks." + std::to_string(b) + ".";
      CHECK(names[i].rfind(prefix, 0) == 0);
      while (i < names.size() && names[i].rfind(prefix, 0) == 0) ++i;
    }
    const std::string norm = final_norm_name(config["arch"].get<std::string>());
    if (!norm.empty()) {
      CHECK(names[i] == norm + ".weight");
      while (i < names.size() && names[i].rfind(norm + ".", 0) == 0) ++i;
    }
    CHECK(i == names.size() - 1);
  }
}

TEST_CASE("skeleton: a tied head is the embedding matrix; tying changes no other initial value", "[models][common]") {
  for (const auto& config : configs()) {
    INFO(config.dump());
    json tied_config = config;
    tied_config["tie_embeddings"] = true;
    at::manual_seed(2);
    auto untied = build_model(config.dump());
    at::manual_seed(2);
    auto tied = build_model(tied_config.dump());
    const int64_t V = 23, d = 8;

    auto params = tied->named_parameters();
    CHECK_FALSE(params.contains("head.weight"));
    CHECK(untied->named_parameters().contains("head.weight"));
    CHECK(tied->parameter_count() == untied->parameter_count() - V * d);
    // The head is made last, so every other tensor got the same random draws;
    // but TMM re-initialises a tied embedding N(0, 2/d), as the authors' tie_io.
    for (const auto& p : params) {
      INFO(p.key());
      if (config["arch"] == "tmm" && p.key() == "embed.weight") continue;
      CHECK(at::equal(p.value(), untied->named_parameters()[p.key()]));
    }

    const at::Tensor ids = at::randint(10, {2, 9}, at::kLong);  // tokens 10 .. 22 never appear
    const at::Tensor h = tied->hidden_states(ids);
    const at::Tensor& embed = tied->embedding()->weight;
    CHECK(at::equal(tied->head(h), at::linear(h, embed)));
    const at::Tensor uh = untied->hidden_states(ids);
    CHECK(at::equal(untied->head(uh), at::linear(uh, untied->named_parameters()["head.weight"])));

    // Gradients: a token that never appears reaches the embedding only through a tied head.
    const at::Tensor labels = at::randint(10, {2, 9}, at::kLong);
    tied->forward_with(ids, labels).loss.backward();
    untied->forward_with(ids, labels).loss.backward();
    CHECK(embed.grad().narrow(0, 10, V - 10).abs().min().item<double>() > 0.0);
    CHECK(untied->embedding()->weight.grad().narrow(0, 10, V - 10).abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("skeleton: each model's block(i) is its own block type", "[models][common]") {
  const auto c = configs();
  auto tmm = build_model(c[0].dump());
  auto transformer = build_model(c[1].dump());
  auto hyena = build_model(c[2].dump());
  auto mamba2 = build_model(c[3].dump());
  CHECK(dynamic_cast<TMMModel&>(*tmm).block(1).ptr().get() == tmm->blocks()[1].get());
  CHECK(dynamic_cast<TransformerModel&>(*transformer).block(1).ptr().get() == transformer->blocks()[1].get());
  CHECK(dynamic_cast<HyenaModel&>(*hyena).block(1).ptr().get() == hyena->blocks()[1].get());
  CHECK(dynamic_cast<Mamba2Model&>(*mamba2).block(1).ptr().get() == mamba2->blocks()[1].get());
  CHECK(dynamic_cast<TMMModel&>(*tmm).config().d_model == 8);
  CHECK(dynamic_cast<Mamba2Model&>(*mamba2).config().headdim == 4);
  CHECK_THROWS(dynamic_cast<TMMModel&>(*tmm).block(2));

  // A decode state's layers, typed; another type or layer is a clear error.
  transformer->eval();
  auto state = transformer->start_decoding(1, 4);
  auto& layers = dynamic_cast<LayerwiseDecodeState&>(*state);
  CHECK(layers.layer<TransformerKVCache>(1).keys.size(2) == 4);
  CHECK_THROWS_WITH(layers.layer<Mamba2MixerDecodeState>(0), Contains("layer 0 holds another type of state"));
  CHECK_THROWS_WITH(layers.layer<TransformerKVCache>(2), Contains("no layer 2 (it has 2)"));
}

TEST_CASE("TMM options: each name is read once into its enum and written back the same", "[models][common][tmm]") {
  const json base = configs()[0];
  auto parse = [&](const char* key, const char* name) {
    json c = base;
    c[key] = name;
    return TMMConfig::from_json_text(c.dump());
  };
  auto written = [&](const char* key, const char* name) {
    return json::parse(parse(key, name).to_json_text()).at(key).get<std::string>();
  };
  const std::vector<std::pair<const char*, TMMMixerKind>> mixers = {{"toeplitz", TMMMixerKind::Toeplitz},
                                                                     {"expanded", TMMMixerKind::Expanded},
                                                                     {"frozen", TMMMixerKind::Frozen},
                                                                     {"masked", TMMMixerKind::Masked}};
  for (const auto& [name, kind] : mixers) {
    CHECK(parse("mixer", name).mixer == kind);
    CHECK(to_string(kind) == name);
    CHECK(written("mixer", name) == name);
  }
  CHECK(parse("block_order", "ffn_first").block_order == TMMBlockOrder::FfnFirst);
  CHECK(parse("block_order", "mixer_first").block_order == TMMBlockOrder::MixerFirst);
  CHECK(written("block_order", "mixer_first") == "mixer_first");
  CHECK(parse("norm", "layernorm").norm == NormKind::LayerNorm);
  CHECK(parse("norm", "rmsnorm").norm == NormKind::RMSNorm);
  CHECK(written("norm", "rmsnorm") == "rmsnorm");
  CHECK(parse("activation", "silu").activation == Activation::SiLU);
  CHECK(parse("activation", "gelu").activation == Activation::GELU);
  CHECK(parse("activation", "relu").activation == Activation::ReLU);
  CHECK(written("activation", "relu") == "relu");
  // The defaults: the authors' block.
  const TMMConfig d = TMMConfig::from_json_text(base.dump());
  CHECK(d.mixer == TMMMixerKind::Toeplitz);
  CHECK(d.block_order == TMMBlockOrder::FfnFirst);
  CHECK(d.norm == NormKind::LayerNorm);
  CHECK(d.activation == Activation::SiLU);

  CHECK_THROWS_WITH(parse("mixer", "attention"),
                    Contains("key \"mixer\" must be toeplitz, expanded, frozen or masked, got \"attention\""));
  CHECK_THROWS_WITH(parse("block_order", "both"), Contains("key \"block_order\" must be ffn_first or mixer_first"));
  CHECK_THROWS_WITH(parse("norm", "batchnorm"),
                    Contains("key \"norm\" must be layernorm or rmsnorm, got \"batchnorm\""));
  CHECK_THROWS_WITH(parse("activation", "tanh"),
                    Contains("key \"activation\" must be silu, gelu or relu, got \"tanh\""));
  json numeric = base;
  numeric["norm"] = 1;
  CHECK_THROWS_WITH(TMMConfig::from_json_text(numeric.dump()), Contains("key \"norm\" must be a string, got 1"));
}

TEST_CASE("typed constructors: a config set in code is validated as its JSON would be", "[models][common]") {
  TMMConfig tmm = TMMConfig::from_json_text(configs()[0].dump());
  tmm.heads = 2;
  tmm.mixer = TMMMixerKind::Expanded;
  auto model = std::make_shared<TMMModel>(tmm);
  CHECK(model->config_json() == tmm.to_json_text());
  CHECK(model->named_parameters().contains("blocks.0.mixer.in_proj.weight"));
  CHECK(model->named_parameters().contains("blocks.0.mixer.weight2"));
  tmm.heads = 3;  // 8 channels do not split into 3 heads
  CHECK_THROWS_WITH(TMMModel(tmm), Contains("key \"heads\""));

  TransformerConfig transformer = TransformerConfig::from_json_text(configs()[1].dump());
  transformer.n_heads = 3;  // 8 channels do not split into 3 heads
  transformer.n_kv_heads = 3;
  transformer.head_dim = 0;  // derived, d_model / n_heads
  CHECK_THROWS_WITH(TransformerModel(transformer), Contains("key \"n_heads\""));
  HyenaConfig hyena = HyenaConfig::from_json_text(configs()[2].dump());
  hyena.vocab_size = 0;
  CHECK_THROWS_WITH(HyenaModel(hyena), Contains("key \"vocab_size\" must be >= 1, got 0"));
  Mamba2Config mamba2 = Mamba2Config::from_json_text(configs()[3].dump());
  mamba2.n_layers = 0;  // Mamba2 needs a block
  CHECK_THROWS_WITH(Mamba2Model(mamba2), Contains("key \"n_layers\" must be >= 1, got 0"));
}
