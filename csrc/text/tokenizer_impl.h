// The state behind tmm::text::Tokenizer, shared by tokenizer.cpp (the
// methods) and tokenizer_json.cpp (which builds it from a tokenizer.json).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "text/added_tokens.h"
#include "text/bpe.h"

namespace tmm::text::detail {

struct TokenizerImpl {
  bool byte_level = false;  // kind "byte"; the fields below are for "bpe"
  int64_t vocab_size = 0;

  std::unique_ptr<Bpe> bpe;
  std::unique_ptr<AddedTokens> added;
  bool add_prefix_space = false;  // ByteLevel pre-tokenizer: " " before each text part not starting with one
  bool use_regex = true;          // ... and the GPT-2 split
  std::unordered_map<int64_t, std::string> id_bytes;            // every id's decoded bytes
  std::unordered_map<std::string, int64_t> added_ids;           // added token content -> id
};

// Throws std::invalid_argument "<key>: <what is wrong>".
std::shared_ptr<const TokenizerImpl> parse_tokenizer_json(const std::string& text);

}  // namespace tmm::text::detail
