// The state behind tmm::text::Tokenizer, shared by tokenizer.cpp (the
// methods) and tokenizer_json.cpp (which builds it from a tokenizer.json).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/normalize.h"
#include "text/pre_tokenizer.h"

namespace tmm::text::detail {

struct TokenizerImpl {
  bool byte_level = false;  // kind "byte"; the fields below are for "bpe"
  int64_t vocab_size = 0;

  std::unique_ptr<Bpe> bpe;
  std::unique_ptr<AddedTokens> added;
  std::vector<NormalForm> normalizers;  // applied in order to the text between added tokens
  PreTokenizer pre_tokenizer;
  std::vector<int64_t> prefix_ids, suffix_ids;              // the post-processor's special tokens around a text
  std::unordered_map<int64_t, std::string> id_bytes;        // every id's decoded bytes
  std::unordered_map<std::string, int64_t> added_ids;       // added token content -> id
};

// Throws std::invalid_argument "<key>: <what is wrong>".
std::shared_ptr<const TokenizerImpl> parse_tokenizer_json(const std::string& text);

}  // namespace tmm::text::detail
