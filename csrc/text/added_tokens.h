// The added tokens of a tokenizer.json (special tokens such as
// "<|endoftext|>" and user-added ones): found in the text before
// pre-tokenization, as the Rust `tokenizers` library does: leftmost-longest,
// first the tokens with "normalized": false on the raw text, then those with
// "normalized": true in each part left once normalized (their own content
// normalized too), honouring lstrip / rstrip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tmm::text::detail {

struct AddedToken {
  std::string content;  // non-empty UTF-8; for a normalized token, as the normalizer leaves it
  uint32_t id = 0;
  bool lstrip = false;  // the match takes the whitespace before it
  bool rstrip = false;  // ... and after it
  bool normalized = false;
};

// A part of the text: an added token (id >= 0) or text to pre-tokenize (id < 0).
struct Segment {
  size_t begin, end;  // byte offsets into the text
  int64_t id;
};

class AddedTokens {
 public:
  explicit AddedTokens(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  bool has_normalized() const { return has_normalized_; }

  // The text cut into the tokens with normalized == `normalized` and the text
  // between them, in order; empty text parts are left out.
  std::vector<Segment> split(std::string_view text, bool normalized) const;

 private:
  // A byte trie of token contents; node 0 is the root.
  struct Trie {
    std::unordered_map<uint64_t, int32_t> children;  // node << 8 | byte -> node
    std::vector<int32_t> token;                      // per node: index into tokens_, or -1
  };
  void insert(Trie& trie, size_t index);
  void find(const Trie& trie, std::string_view text, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, normalized_;
  bool has_raw_ = false, has_normalized_ = false;
};

}  // namespace tmm::text::detail
