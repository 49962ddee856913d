#include "text/added_tokens.h"

#include <algorithm>
#include <utility>

#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

bool is_space_at(std::string_view s, size_t i, size_t* len) { return class_at(s, i, len) == CharClass::kSpace; }

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  raw_.token = {-1};
  normalized_.token = {-1};
  for (size_t i = 0; i < tokens_.size(); ++i) {
    insert(tokens_[i].normalized ? normalized_ : raw_, i);
    (tokens_[i].normalized ? has_normalized_ : has_raw_) = true;
  }
}

void AddedTokens::insert(Trie& trie, size_t index) {
  int32_t node = 0;
  for (const char c : tokens_[index].content) {
    const uint64_t key = (uint64_t(node) << 8) | static_cast<unsigned char>(c);
    auto it = trie.children.find(key);
    if (it == trie.children.end()) {
      it = trie.children.emplace(key, int32_t(trie.token.size())).first;
      trie.token.push_back(-1);
    }
    node = it->second;
  }
  trie.token[size_t(node)] = int32_t(index);
}

// The Rust library's AddedVocabulary::find_matches: after a match the search resumes at its end, before
// rstrip widened it (so, as there, a token starting with whitespace after an
// rstrip token can overlap it).
void AddedTokens::find(const Trie& trie, std::string_view text, std::vector<Segment>& out) const {
  const size_t n = text.size();
  size_t start_offset = 0;
  for (size_t i = 0; i < n;) {
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < n; ++k) {
      const auto it = trie.children.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[k]));
      if (it == trie.children.end()) break;
      node = it->second;
      if (trie.token[size_t(node)] >= 0) best = trie.token[size_t(node)], best_end = k + 1;
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[size_t(best)];
    size_t start = i, stop = best_end, len;
    if (tok.lstrip) {  // back to just after the last non-space unit since start_offset
      size_t after_text = start_offset;
      for (size_t k = start_offset; k < start; k += len)
        if (!is_space_at(text.substr(0, start), k, &len)) after_text = k + len;
      // (an lstrip token inside the previous one's rstrip whitespace: the
      // Rust library panics there; here it is an empty match)
      start = std::min(std::max(after_text, start_offset), stop);
    }
    if (tok.rstrip)
      while (stop < n && is_space_at(text, stop, &len)) stop += len;
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, int64_t(tok.id)});
    start_offset = stop;
    i = best_end;
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

std::vector<Segment> AddedTokens::split(std::string_view text, bool normalized) const {
  std::vector<Segment> out;
  if (text.empty()) return out;
  if (!(normalized ? has_normalized_ : has_raw_)) out.push_back({0, text.size(), -1});
  else find(normalized ? normalized_ : raw_, text, out);
  return out;
}

}  // namespace tmm::text::detail
