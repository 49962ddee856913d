#include "text/pre_tokenizer.h"

#include <string>
#include <utility>

#include "text/gpt2_split.h"

namespace tmm::text::detail {

void PreTokenizer::run(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text}, next;
  for (const SplitPreTokenizer& split : splits) {
    next.clear();
    for (const std::string_view p : pieces) split.split(p, next);
    std::swap(pieces, next);
  }
  std::string prefixed;
  std::vector<std::string_view> words;
  for (std::string_view p : pieces) {
    if (add_prefix_space && p[0] != ' ') {
      prefixed.assign(1, ' ');
      prefixed.append(p);
      p = prefixed;
    }
    if (!use_regex) {
      piece(p);
      continue;
    }
    words.clear();
    gpt2_split(p, words);
    for (const std::string_view w : words) piece(w);
  }
}

}  // namespace tmm::text::detail
