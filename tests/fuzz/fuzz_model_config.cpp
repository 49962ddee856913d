// libFuzzer target: model configurations, i.e. tmm::models::build_model on
// arbitrary text, and each architecture's config parser on any JSON object.
//
// Contract under test:
//  * a config either builds or raises c10::Error, whatever the text;
//  * each parser (TMM, Transformer, Hyena, Mamba2) either accepts a JSON
//    object or raises c10::Error: the object is tried under every "arch", so
//    the fuzzer reaches all four validators from one input;
//  * a config that builds runs: a forward pass on a few tokens succeeds and
//    gives finite-shaped logits, and config_json() rebuilds to the same model.
// Anything else (another exception, a crash, a sanitizer report, a hang) is a
// bug. A valid config may describe a huge model: build_model is only called
// on a valid config when a generous upper estimate of its parameter count
// (from the parsed config) is below kMaxParams; invalid ones are always fed
// to it, since they must be rejected before anything is allocated.
//
// Built and run by tests/fuzz/run.sh.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <tmm/models.h>

#include "model_size.h"

namespace {

using nlohmann::json;
using namespace tmm::models;
using tmm_fuzz::estimate;
using tmm_fuzz::kMaxParams;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_model_config: %s\n", what.c_str());
  std::abort();
}

// Runs `parse` on `j` with "arch" set to `arch`; the estimate when it accepts.
template <class Parse>
std::optional<double> try_parser(json j, const char* arch, Parse parse) {
  j["arch"] = arch;
  try {
    return estimate(parse(j));
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

void check_model(const std::string& text) {
  std::shared_ptr<LanguageModel> m;
  try {
    m = build_model(text);
  } catch (const c10::Error& e) {
    fail(std::string("a config its parser accepts does not build: ") + e.what_without_backtrace());
  }
  const json cfg = json::parse(m->config_json());
  const int64_t V = cfg.at("vocab_size").get<int64_t>();
  const int64_t L = std::min<int64_t>(cfg.at("max_len").get<int64_t>(), 5);
  m->eval();
  try {
    at::NoGradGuard no_grad;
    const at::Tensor ids = at::arange(L, at::kLong).remainder(V).unsqueeze(0);
    const at::Tensor logits = m->forward(ids);
    if (logits.dim() != 3 || logits.size(0) != 1 || logits.size(1) != L || logits.size(2) != V)
      fail("logits of shape " + c10::str(logits.sizes()) + " for input 1 x " + std::to_string(L));
  } catch (const c10::Error& e) {
    fail(std::string("a model that builds cannot run: ") + e.what_without_backtrace());
  }
  try {
    if (build_model(m->config_json())->config_json() != m->config_json()) fail("config_json() does not round-trip");
  } catch (const c10::Error& e) {
    fail(std::string("config_json() does not rebuild: ") + e.what_without_backtrace());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);

  std::optional<double> own;  // the estimate under the config's own arch, when valid
  if (j.is_object()) {
    const std::string arch = j.contains("arch") && j["arch"].is_string() ? j["arch"].get<std::string>() : "";
    auto tmm = try_parser(j, "tmm", [](const json& x) { return TMMConfig::from_json_text(x.dump()); });
    auto tr = try_parser(j, "transformer", [](const json& x) { return TransformerConfig::from_json_text(x.dump()); });
    auto hy = try_parser(j, "hyena", [](const json& x) { return HyenaConfig::from_json_text(x.dump()); });
    auto ma = try_parser(j, "mamba2", [](const json& x) { return Mamba2Config::from_json_text(x.dump()); });
    if (arch == "tmm") own = tmm;
    if (arch == "transformer") own = tr;
    if (arch == "hyena") own = hy;
    if (arch == "mamba2") own = ma;
  }

  if (own) {
    if (*own <= kMaxParams) check_model(text);
    return 0;
  }
  // Invalid text or config: a clean error, before anything large is allocated.
  try {
    build_model(text);
  } catch (const c10::Error&) {
    return 0;
  }
  fail("build_model accepted a config its parser rejects");
}
