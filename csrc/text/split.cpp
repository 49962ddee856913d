#include "text/split.h"

#include <algorithm>
#include <utility>

namespace tmm::text::detail {
namespace {

struct Part {
  size_t begin, end;
  bool flag;  // from the pattern: a match; after the behaviour: to be removed
};

}  // namespace

// The Rust library's NormalizedString::split: the parts (matches and the text
// between them, covering the text), then the behaviour's fold over them.
void SplitPreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  std::vector<std::pair<size_t, size_t>> matches;
  pattern_.find_all(text, matches);
  std::vector<Part> parts;
  size_t prev = 0;
  for (const auto& [s, e] : matches) {
    if (prev != s) parts.push_back({prev, s, false});
    parts.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size()) parts.push_back({prev, text.size(), false});
  if (invert_)
    for (Part& p : parts) p.flag = !p.flag;

  std::vector<Part> pieces;
  bool previous_match = false;
  switch (behavior_) {
    case SplitBehavior::kRemoved:
      pieces = std::move(parts);
      break;
    case SplitBehavior::kIsolated:
      for (const Part& p : parts) pieces.push_back({p.begin, p.end, false});
      break;
    case SplitBehavior::kContiguous:  // runs of matches (and of non-matches) merge
      for (const Part& p : parts) {
        if (p.flag == previous_match && !pieces.empty()) pieces.back().end = p.end;
        else pieces.push_back({p.begin, p.end, false});
        previous_match = p.flag;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.flag && !previous_match && !pieces.empty()) pieces.back().end = p.end;
        else pieces.push_back({p.begin, p.end, false});
        previous_match = p.flag;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->flag && !previous_match && !pieces.empty()) pieces.back().begin = it->begin;
        else pieces.push_back({it->begin, it->end, false});
        previous_match = it->flag;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
  }
  for (const Part& p : pieces)
    if (!p.flag && p.end > p.begin) out.push_back(text.substr(p.begin, p.end - p.begin));
}

}  // namespace tmm::text::detail
