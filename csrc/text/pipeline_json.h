// The components of a tokenizer.json around its BPE model, read into the
// forms tokenizer.cpp runs: the normalizer, the pre-tokenizer, the
// post-processor's special tokens and the (checked) decoder. Anything that
// would change the ids and that tmm does not implement is refused, naming
// the key and the value found (json_reading.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/normalize.h"
#include "text/pre_tokenizer.h"

namespace tmm::text::detail {

// root["normalizer"]: null, NFC, NFD or a Sequence of them, in order.
std::vector<NormalForm> read_normalizer(const nlohmann::json& root);

// root["pre_tokenizer"]: ByteLevel alone, or last in a Sequence after Split
// and Digits pre-tokenizers (nested Sequences are flattened).
PreTokenizer read_pre_tokenizer(const nlohmann::json& root);

// root["decoder"]: ByteLevel, alone or in a one-element Sequence.
void check_decoder(const nlohmann::json& root);

// The ids root["post_processor"] puts before and after a text's ids when
// special tokens are added: null and ByteLevel add none; TemplateProcessing
// (its single template, which must hold $A once), RobertaProcessing and
// BertProcessing add theirs; a Sequence may hold one of these three besides
// ByteLevel. `is_token` says whether an id has a token.
struct SpecialTokensAround {
  std::vector<int64_t> prefix, suffix;
};
SpecialTokensAround read_post_processor(const nlohmann::json& root, const std::function<bool(uint32_t)>& is_token);

}  // namespace tmm::text::detail
