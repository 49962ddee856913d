// The Split pre-tokenizer of tokenizer.json (and Digits, which is a Split on
// \p{N}): the text cut at the matches of a pattern, each match then kept,
// dropped or merged with its neighbour as the Rust `tokenizers` library's
// SplitDelimiterBehavior says, with `invert` swapping matches and the text
// between them. E.g. the pattern "-" on "the-final--countdown":
//   Removed            the | final | countdown
//   Isolated           the | - | final | - | - | countdown
//   MergedWithPrevious the- | final- | - | countdown
//   MergedWithNext     the | -final | - | -countdown
//   Contiguous         the | - | final | -- | countdown
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "text/regex.h"

namespace tmm::text::detail {

enum class SplitBehavior : uint8_t { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class SplitPreTokenizer {
 public:
  SplitPreTokenizer(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  // Appends the non-empty pieces of `text`, in order (views into it).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

}  // namespace tmm::text::detail
