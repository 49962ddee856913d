// The names config JSON gives an option enum's values: one table per enum,
// read by ConfigReader::choice and written back by option_name, so a name is
// spelled in one place and compared once, when the config is read.
#pragma once

#include <cstddef>
#include <string>

#include <c10/util/Exception.h>

#include "tmm/models/config.h"

namespace tmm::models {

template <class E>
struct OptionName {
  const char* name;
  E value;
};

template <class E, size_t N>
std::string option_name(const OptionName<E> (&names)[N], E value) {
  for (const auto& n : names)
    if (n.value == value) return n.name;
  TORCH_INTERNAL_ASSERT(false, "an option value without a name: ", static_cast<int>(value));
  return {};
}

// "a, b or c": the names, for an error message.
template <class E, size_t N>
std::string option_list(const OptionName<E> (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i].name);
  return out;
}

inline constexpr OptionName<NormKind> kNormNames[] = {{"layernorm", NormKind::LayerNorm},
                                                      {"rmsnorm", NormKind::RMSNorm}};
inline constexpr OptionName<Activation> kActivationNames[] = {
    {"silu", Activation::SiLU}, {"gelu", Activation::GELU}, {"relu", Activation::ReLU}};
// The table of an enum's names, found by argument-dependent lookup (read_config,
// write_config); each model's own enums have theirs beside their tables.
constexpr const auto& option_names(NormKind) { return kNormNames; }
constexpr const auto& option_names(Activation) { return kActivationNames; }

}  // namespace tmm::models
