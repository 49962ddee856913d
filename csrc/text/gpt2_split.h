// The GPT-2 pre-tokenizer regex of byte-level BPE, as a scanner:
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// with the first-alternative-wins semantics of the Oniguruma regex the Rust
// `tokenizers` library runs. Every unit matches one alternative, so the pieces
// cover the text; ill-formed UTF-8 units count as "other" (unicode.h).
#pragma once

#include <string_view>
#include <vector>

namespace tmm::text::detail {

// Appends the pieces of `text`, in order, to `out` (views into `text`).
void gpt2_split(std::string_view text, std::vector<std::string_view>& out);

}  // namespace tmm::text::detail
