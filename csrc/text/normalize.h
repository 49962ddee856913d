// Unicode canonical normalization (UAX #15): the NFC and NFD normalizers of
// tokenizer.json, with utf8proc's data and composition (normalize.cpp).
//
// Any byte string is accepted: each ill-formed UTF-8 unit is kept as it is and
// acts as a starter that composes with nothing, so the well-formed text
// between two of them is normalized on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tmm::text::detail {

enum class NormalForm : uint8_t {
  kNFD,  // canonical decomposition, then the canonical ordering of combining marks
  kNFC,  // NFD, then canonical composition
};

// `text` in the normal form (`text` itself when it already is).
std::string normalize(std::string_view text, NormalForm form);

}  // namespace tmm::text::detail
