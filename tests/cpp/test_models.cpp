// Every model of the zoo, through its tiny config in models/: the contract
// of tmm::models::LanguageModel (shapes, causality, gradients, config
// round trip, config validation).
#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include "models/registry.h"
#include "repo_paths.h"
#include "tmm/models/language_model.h"

namespace {

using Catch::Matchers::Contains;
using tmm::models::build_model;

// POSIX directory listing: libtorch exports its own std::filesystem symbols,
// which can shadow libstdc++'s and crash (seen with remove_all).
std::vector<std::string> tiny_configs() {
  std::vector<std::string> paths;
  DIR* dir = opendir(tmm_test::models_dir().c_str());
  REQUIRE(dir != nullptr);
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() > 10 && name.substr(name.size() - 10) == "-tiny.json")
      paths.push_back(tmm_test::models_dir() + "/" + name);
  }
  closedir(dir);
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("every architecture has a tiny config", "[models]") {
  const auto configs = tiny_configs();
  for (const auto& arch : tmm::models::architectures()) {
    const bool found = std::any_of(configs.begin(), configs.end(), [&](const std::string& p) {
      return nlohmann::json::parse(read_file(p))["arch"] == arch;
    });
    INFO("arch " << arch);
    CHECK(found);
  }
}

TEST_CASE("tiny models: shapes, causality, gradients, config round trip", "[models]") {
  for (const auto& path : tiny_configs()) {
    INFO("config " << path);
    at::manual_seed(0);
    const auto config = nlohmann::json::parse(read_file(path));
    auto model = build_model(config.dump());
    const int64_t V = config["vocab_size"], B = 2, L = std::min<int64_t>(config["max_len"].get<int64_t>(), 37);
    const at::Tensor ids = at::randint(V, {B, L}, at::kLong);

    const at::Tensor logits = model->forward(ids);
    CHECK(logits.sizes() == at::IntArrayRef{B, L, V});
    CHECK(at::isfinite(logits).all().item<bool>());

    // Causality: changing token t leaves the logits before t unchanged, up
    // to float32 rounding (an FFT spreads its rounding over all positions).
    const int64_t t = L / 2;
    at::Tensor ids2 = ids.clone();
    ids2.select(1, t).copy_((ids.select(1, t) + 1) % V);
    const at::Tensor logits2 = model->forward(ids2);
    const double scale = logits.abs().max().item<double>();
    const double before = (logits - logits2).narrow(1, 0, t).abs().max().item<double>();
    const double after = (logits - logits2).narrow(1, t, L - t).abs().max().item<double>();
    CHECK(before <= 1e-5 * scale);
    CHECK(after > 1e-3 * scale);

    // Loss and gradients: every trainable parameter gets a finite gradient.
    at::Tensor labels = at::randint(V, {B, L}, at::kLong);
    labels.select(1, 0).fill_(-100);
    auto out = model->forward_with(ids, labels, /*return_hidden=*/true);
    CHECK(out.hidden.size(0) == B);
    CHECK(out.hidden.size(1) == L);
    out.loss.backward();
    for (const auto& p : model->named_parameters()) {
      if (!p.value().requires_grad()) continue;
      INFO("parameter " << p.key());
      REQUIRE(p.value().grad().defined());
      CHECK(at::isfinite(p.value().grad()).all().item<bool>());
    }
    CHECK(model->parameter_count() > 0);

    // The config round trip: what config_json() says builds the same model shape.
    auto again = build_model(model->config_json());
    CHECK(again->config_json() == model->config_json());
    CHECK(again->parameter_count() == model->parameter_count());
  }
}

TEST_CASE("model configs are validated", "[models]") {
  for (const auto& path : tiny_configs()) {
    INFO("config " << path);
    const auto config = nlohmann::json::parse(read_file(path));
    auto unknown = config;
    unknown["bogus_key"] = 1;
    CHECK_THROWS_WITH(build_model(unknown.dump()), Contains("bogus_key"));
    auto missing = config;
    missing.erase("d_model");
    CHECK_THROWS_WITH(build_model(missing.dump()), Contains("d_model"));
    auto mistyped = config;
    mistyped["vocab_size"] = "many";
    CHECK_THROWS_WITH(build_model(mistyped.dump()), Contains("vocab_size"));
    auto impossible = config;
    impossible["d_model"] = -4;
    CHECK_THROWS_WITH(build_model(impossible.dump()), Contains("d_model"));
  }
  CHECK_THROWS_WITH(build_model("{\"arch\": \"nope\"}"), Contains("nope"));
  CHECK_THROWS_WITH(build_model("{\"d_model\": 4}"), Contains("arch"));
  CHECK_THROWS_WITH(build_model("not json"), Contains("JSON"));
}

TEST_CASE("resolve_config spells out the config build_model uses; build_part builds a part alone", "[models]") {
  for (const auto& path : tiny_configs()) {
    INFO("config " << path);
    const std::string text = read_file(path);
    auto model = build_model(text);
    CHECK(nlohmann::json::parse(tmm::models::resolve_config(text)) == nlohmann::json::parse(model->config_json()));
    auto unknown = nlohmann::json::parse(text);
    unknown["bogus_key"] = 1;
    CHECK_THROWS_WITH(tmm::models::resolve_config(unknown.dump()), Contains("bogus_key"));
    CHECK_THROWS_WITH(tmm::models::build_part(text, "no_such_part"), Contains("no_such_part"));
    CHECK(tmm::models::build_part(text, "model")->parameters().size() == model->parameters().size());
    const auto arch = nlohmann::json::parse(text)["arch"].get<std::string>();
    if (arch == "transformer") continue;  // no parts: tmm.nn has no Transformer
    // The mixer built alone has the names and shapes of the model's blocks.0.mixer.
    const auto mixer = tmm::models::build_part(text, "mixer");
    std::vector<std::string> in_model, alone;
    for (const auto& item : model->named_parameters())
      if (item.key().rfind("blocks.0.mixer.", 0) == 0)
        in_model.push_back(item.key().substr(15) + " " + c10::str(item.value().sizes()));
    for (const auto& item : mixer->named_parameters())
      alone.push_back(item.key() + " " + c10::str(item.value().sizes()));
    CHECK(alone == in_model);
  }
}

TEST_CASE("bad input ids are clear errors", "[models]") {
  for (const auto& path : tiny_configs()) {
    INFO("config " << path);
    const auto config = nlohmann::json::parse(read_file(path));
    auto model = build_model(config.dump());
    const int64_t V = config["vocab_size"], max_len = config["max_len"];
    CHECK_THROWS_WITH(model->forward(at::zeros({2, 3}, at::kFloat)), Contains("int64"));
    CHECK_THROWS_WITH(model->forward(at::zeros({3}, at::kLong)), Contains("B x L"));
    CHECK_THROWS_WITH(model->forward(at::full({1, 3}, V, at::kLong)), Contains("token ids"));
    CHECK_THROWS_WITH(model->forward(at::zeros({1, max_len + 1}, at::kLong)), Contains("exceeds"));
  }
}

TEST_CASE("tiny models train from C++: twenty AdamW steps lower the loss", "[models]") {
  for (const auto& path : tiny_configs()) {
    INFO("config " << path);
    at::manual_seed(0);
    const auto config = nlohmann::json::parse(read_file(path));
    auto model = build_model(config.dump());
    const int64_t V = config["vocab_size"];
    const at::Tensor ids = at::randint(V, {4, 32}, at::kLong);
    const at::Tensor labels = ids.roll({-1}, {1});
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-3));
    double first = 0, last = 0;
    for (int step = 0; step < 20; ++step) {
      opt.zero_grad();
      at::Tensor loss = model->forward_with(ids, labels).loss;
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    CHECK(last < 0.9 * first);
  }
}
