// The fuzzers' guard against configs of huge models: a generous upper
// estimate of a model's parameter and buffer count from its parsed config
// (fuzz_model_config, fuzz_checkpoint build a model only below kMaxParams).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <tmm/models.h>

namespace tmm_fuzz {

constexpr double kMaxParams = 2e6;

inline double d(int64_t v) { return double(v); }

inline double estimate(const tmm::models::TMMConfig& c) {
  const double D = d(c.d_model), N = d(c.max_len), G = c.heads == 0 ? 1.0 : d(c.heads);
  const double mixer = c.mixer == tmm::models::TMMMixerKind::Masked ? G * N * N : 2 * G * d(c.kernel) * N + G * N;
  const double layer = 1000 + 2 * D * D + 3 * D * D * d(c.ffn_mult) + 2 * mixer + 8 * D;
  return d(c.n_layers) * layer + 2 * d(c.vocab_size) * D + N * D;
}
inline double estimate(const tmm::models::TransformerConfig& c) {
  const double D = d(c.d_model);
  const double layer = 1000 + 4 * D * D + 3 * D * d(c.ffn_hidden) + 4 * D;
  return d(c.n_layers) * layer + 2 * d(c.vocab_size) * D + d(c.max_len) * D;
}
inline double estimate(const tmm::models::HyenaConfig& c) {
  const double D = d(c.d_model), F = d(c.filter_order), N = d(c.max_len), E = d(c.emb_dim);
  const double layer = 1000 + 4 * D * D + 3 * D * d(c.short_filter) + E * F + 2 * F * F + 2 * F * D +
                       N * (E + 2 * D) + 3 * D * D * d(c.ffn_mult) + 8 * D;
  return d(c.n_layers) * layer + 2 * d(c.vocab_size) * D + N * D;
}
inline double estimate(const tmm::models::Mamba2Config& c) {
  const double D = d(c.d_model), DI = d(c.expand) * D, GS = d(c.ngroups) * d(c.d_state),
               H = DI / d(c.headdim);
  const double layer = 1000 + D * (2 * DI + 2 * GS + H) + (DI + 2 * GS) * d(c.d_conv) + DI * D +
                       3 * D * d(c.d_intermediate) + 4 * H + 2 * DI + 4 * D;
  return d(c.n_layers) * layer + 2 * d(c.vocab_size) * D + d(c.max_len) * D;
}

// The estimate of the model `text` configures under its own "arch", or
// nullopt when that parser rejects it (or it names no known arch).
inline std::optional<double> own_estimate(const std::string& text) {
  using namespace tmm::models;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("arch") || !j["arch"].is_string()) return std::nullopt;
  const std::string arch = j["arch"].get<std::string>();
  try {
    if (arch == "tmm") return estimate(TMMConfig::from_json_text(text));
    if (arch == "transformer") return estimate(TransformerConfig::from_json_text(text));
    if (arch == "hyena") return estimate(HyenaConfig::from_json_text(text));
    if (arch == "mamba2") return estimate(Mamba2Config::from_json_text(text));
  } catch (const c10::Error&) {
  }
  return std::nullopt;
}

// A fuzz input holding two files: the text before the first NUL byte (a JSON
// file cannot hold one) and the bytes after it.
inline std::pair<std::string, std::string> split_at_nul(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string::npos) return {all, std::string()};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

}  // namespace tmm_fuzz
