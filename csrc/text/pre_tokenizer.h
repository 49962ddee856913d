// The pre-tokenizer of a byte-level BPE tokenizer.json: any Split (and
// Digits) stages, in order, then the ByteLevel pre-tokenizer (an optional
// space before each piece, and the GPT-2 split unless use_regex is false).
// Each stage cuts every piece of the one before, as a Sequence does in the
// Rust `tokenizers` library.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "text/split.h"

namespace tmm::text::detail {

struct PreTokenizer {
  std::vector<SplitPreTokenizer> splits;
  bool add_prefix_space = false;  // ByteLevel: " " before each piece not starting with one
  bool use_regex = true;          // ByteLevel: the GPT-2 split

  // Calls piece(bytes) for each piece of `text` that the BPE model encodes on
  // its own, in order. A piece may live in a buffer that is valid only
  // during the call.
  void run(std::string_view text, const std::function<void(std::string_view)>& piece) const;
};

}  // namespace tmm::text::detail
