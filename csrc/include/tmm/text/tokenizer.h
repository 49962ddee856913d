// tmm::text::Tokenizer: text <-> token ids for the language models, torch-free.
//
// Two kinds:
//  * "byte" (Tokenizer::byte_level(), tmm's default): the ids are the UTF-8
//    bytes of the text, 0..255.
//  * "bpe": a byte-level BPE tokenizer.json as written by the Python
//    `tokenizers` package (GPT-2, GPT-NeoX and Llama-3 style: NFC
//    normalizer, Split and ByteLevel pre-tokenizers, BPE model, added and
//    special tokens, template post-processor, ByteLevel decoder). encode
//    gives the ids that package gives; decode matches its
//    decode(ids, skip_special_tokens=False).
//
// Any byte string can be encoded (ill-formed UTF-8 included: its bytes are
// kept). decode returns valid UTF-8: each ill-formed part of the decoded bytes
// becomes U+FFFD, as bytes.decode("utf-8", "replace") does; token_bytes gives
// one token's raw bytes for streaming output. Copies share the loaded tables;
// all methods are const and thread-safe. See docs/tokenizers.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmm::text {

namespace detail {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // ids 0..255 are the bytes of the UTF-8 text; vocab_size() is 256.
  static Tokenizer byte_level();
  // A byte-level BPE tokenizer.json. Throws std::runtime_error when the file
  // cannot be read and std::invalid_argument (naming the JSON key and what
  // was found) when its content is not a supported tokenizer.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json_text(const std::string& text);

  // The ids of `text`, with the special tokens the post-processor puts
  // around them (e.g. Llama 3's <|begin_of_text|> before) unless
  // add_special_tokens is false, as the Python package's
  // encode(text, add_special_tokens=...).
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The pieces the model encodes one at a time, as raw bytes: the text cut
  // at its added tokens (each a piece), the rest normalized and
  // pre-tokenized (with any prefix space). "byte": the text in one piece.
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  // Throws std::out_of_range naming an id outside [0, vocab_size()) or one
  // with no token.
  std::string decode(const std::vector<int64_t>& ids) const;
  // The raw bytes of one token (possibly part of a UTF-8 character).
  std::string token_bytes(int64_t id) const;

  // One more than the largest id.
  int64_t vocab_size() const;
  // A token as written in the vocabulary (for "bpe", byte-level text such as
  // "Ġthe", or an added token's content; for "byte", a string of one byte).
  std::optional<int64_t> token_to_id(const std::string& token) const;
  // "byte" or "bpe".
  std::string kind() const;

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerImpl> impl);
  std::shared_ptr<const detail::TokenizerImpl> impl_;
};

}  // namespace tmm::text
