#include "text/gpt2_split.h"

#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

// The end of the match that starts at `i`.
size_t match_end(std::string_view s, size_t i) {
  const size_t n = s.size();
  // 's 't 're 've 'm 'll 'd (case-sensitive, as in GPT-2)
  if (s[i] == '\'' && i + 1 < n) {
    const char a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 < n) {
      const char b = s[i + 2];
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
  }
  size_t len;
  CharClass cls = class_at(s, i, &len);
  size_t j = i;
  // ` ?X+` for X in L, N, other: an optional U+0020 before a run of one class.
  if (s[i] == ' ' && i + 1 < n) {
    size_t next_len;
    const CharClass next = class_at(s, i + 1, &next_len);
    if (next != CharClass::kSpace) cls = next, j = i + 1, len = next_len;
  }
  if (cls != CharClass::kSpace) {
    j += len;
    while (j < n && class_at(s, j, &len) == cls) j += len;
    return j;
  }
  // Whitespace at i. \s+(?!\S): the whole run when it ends the text, else the
  // run less its last unit (which then starts the next piece), if that leaves
  // any; otherwise \s+ takes the single unit.
  size_t last = i;
  j = i;
  while (j < n && class_at(s, j, &len) == CharClass::kSpace) last = j, j += len;
  if (j == n) return j;
  return last > i ? last : j;
}

}  // namespace

void gpt2_split(std::string_view text, std::vector<std::string_view>& out) {
  for (size_t i = 0; i < text.size();) {
    const size_t end = match_end(text, i);
    out.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace tmm::text::detail
