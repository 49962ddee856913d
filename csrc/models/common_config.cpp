// The keys every model's config shares (tmm/models/config.h), read and
// written here once for all models.
#include <string>

#include "models/config_reader.h"
#include "models/option_names.h"
#include "tmm/models/config.h"

namespace tmm::models {

nlohmann::json parse_config_text(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK(false, what, ": not valid JSON: ", e.what());
  }
  return {};  // not reached
}

void read_common(ConfigReader& r, const std::string& arch, CommonConfig& c, int64_t min_layers) {
  const auto got = r.required<std::string>("arch");
  r.check(got == arch, "arch", "must be \"" + arch + "\", got \"" + got + "\"");
  c.vocab_size = r.required<int64_t>("vocab_size");
  c.d_model = r.required<int64_t>("d_model");
  c.n_layers = r.required<int64_t>("n_layers");
  c.max_len = r.required<int64_t>("max_len");
  c.dropout = r.optional<double>("dropout", c.dropout);
  c.tie_embeddings = r.optional<bool>("tie_embeddings", c.tie_embeddings);
  r.at_least("vocab_size", c.vocab_size, 1);
  r.at_least("d_model", c.d_model, 1);
  r.at_least("n_layers", c.n_layers, min_layers);
  r.at_least("max_len", c.max_len, 1);
  r.check(c.dropout >= 0.0 && c.dropout < 1.0, "dropout", "must be in [0, 1), got " + std::to_string(c.dropout));
}

nlohmann::json write_common(const std::string& arch, const CommonConfig& c) {
  return {{"arch", arch},         {"vocab_size", c.vocab_size}, {"d_model", c.d_model},
          {"n_layers", c.n_layers}, {"max_len", c.max_len},     {"dropout", c.dropout},
          {"tie_embeddings", c.tie_embeddings}};
}

std::string to_string(NormKind kind) { return option_name(kNormNames, kind); }
std::string to_string(Activation kind) { return option_name(kActivationNames, kind); }

}  // namespace tmm::models
