#include "text/pipeline_json.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "text/json_reading.h"

namespace tmm::text::detail {
namespace {

constexpr int kMaxNesting = 16;  // Sequences inside Sequences

// The members of v, with nested Sequences (list under `list_key`) flattened:
// (value, key) pairs in order.
void flatten(const json& v, const std::string& key, const char* list_key, int depth,
             std::vector<std::pair<const json*, std::string>>& out) {
  if (type_of(v, key) != "Sequence") {
    out.emplace_back(&v, key);
    return;
  }
  if (depth > kMaxNesting) fail(key, "Sequences nested deeper than " + std::to_string(kMaxNesting));
  const json* list = member(v, list_key);
  const std::string list_key_path = key + "." + list_key;
  if (list == nullptr || !list->is_array()) expected(list_key_path, "a list", list ? *list : json());
  for (size_t i = 0; i < list->size(); ++i)
    flatten((*list)[i], list_key_path + "[" + std::to_string(i) + "]", list_key, depth + 1, out);
}

const std::string& get_string(const json& obj, const char* key, const std::string& path) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_string()) expected(path + "." + key, "a string", v ? *v : json());
  return v->get_ref<const std::string&>();
}

SplitPreTokenizer read_split(const json& v, const std::string& key) {
  const json* pattern = member(v, "pattern");
  const std::string pattern_key = key + ".pattern";
  if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1 ||
      !(pattern->contains("Regex") || pattern->contains("String")) || !pattern->begin()->is_string())
    expected(pattern_key, "{\"Regex\": \"...\"} or {\"String\": \"...\"}", pattern ? *pattern : json());
  const bool is_regex = pattern->contains("Regex");
  const std::string& text = pattern->begin()->get_ref<const std::string&>();
  std::optional<Regex> regex;
  try {
    regex = is_regex ? Regex(text) : Regex::literal(text);
  } catch (const std::invalid_argument& e) {
    fail(pattern_key + (is_regex ? ".Regex" : ".String"), e.what());
  }
  static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous},
  };
  const json* behavior = member(v, "behavior");
  for (const auto& [name, value] : kBehaviors)
    if (behavior != nullptr && *behavior == name) return SplitPreTokenizer(std::move(*regex), value, get_bool(v, "invert", key, false));
  expected(key + ".behavior", "\"Removed\", \"Isolated\", \"MergedWithPrevious\", \"MergedWithNext\" or \"Contiguous\"",
           behavior ? *behavior : json());
}

// Appends the ids of a special token of a template (`name` in special_tokens).
void template_token(const json& specials, const std::string& name, const std::string& key,
                    const std::function<bool(uint32_t)>& is_token, std::vector<int64_t>& out) {
  const json* entry = specials.is_object() ? member(specials, name.c_str()) : nullptr;
  if (entry == nullptr || !entry->is_object())
    fail(key, "the special token " + show(json(name)) + " is not in the post-processor's special_tokens");
  const json* ids = member(*entry, "ids");
  const std::string ids_key = key + " (special_tokens[" + show(json(name)) + "].ids)";
  if (ids == nullptr || !ids->is_array()) expected(ids_key, "a list of ids", ids ? *ids : json());
  for (const json& id_json : *ids) {
    const uint32_t id = get_id(id_json, ids_key);
    if (!is_token(id)) fail(ids_key, "the id " + std::to_string(id) + " is not a token of the vocabulary");
    out.push_back(id);
  }
}

void read_template(const json& v, const std::string& key, const std::function<bool(uint32_t)>& is_token,
                   SpecialTokensAround& out) {
  const json* single = member(v, "single");
  const std::string single_key = key + ".single";
  if (single == nullptr || !single->is_array()) expected(single_key, "a list of pieces", single ? *single : json());
  const json* specials = member(v, "special_tokens");
  const json no_specials = json::object();
  int sequences = 0;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& piece = (*single)[i];
    const std::string piece_key = single_key + "[" + std::to_string(i) + "]";
    if (!piece.is_object() || piece.size() != 1 || !(piece.contains("Sequence") || piece.contains("SpecialToken")))
      expected(piece_key, "{\"Sequence\": {...}} or {\"SpecialToken\": {...}}", piece);
    const json& body = *piece.begin();
    if (!body.is_object()) expected(piece_key, "an object", body);
    if (piece.contains("Sequence")) {
      const std::string& id = get_string(body, "id", piece_key + ".Sequence");
      if (id != "A") fail(piece_key, "a single-sequence template holds sequence A only, found " + show(json(id)));
      ++sequences;
      continue;
    }
    const std::string& name = get_string(body, "id", piece_key + ".SpecialToken");
    template_token(specials ? *specials : no_specials, name, piece_key, is_token, sequences ? out.suffix : out.prefix);
  }
  if (sequences != 1)
    fail(single_key, "expected the sequence A exactly once, found it " + std::to_string(sequences) + " times");
}

// RobertaProcessing / BertProcessing: "cls" and "sep" as [token, id].
int64_t processing_token(const json& v, const char* name, const std::string& key,
                         const std::function<bool(uint32_t)>& is_token) {
  const json* pair = member(v, name);
  const std::string pair_key = key + "." + name;
  if (pair == nullptr || !pair->is_array() || pair->size() != 2 || !(*pair)[0].is_string())
    expected(pair_key, "[token, id]", pair ? *pair : json());
  const uint32_t id = get_id((*pair)[1], pair_key + "[1]");
  if (!is_token(id)) fail(pair_key, "the id " + std::to_string(id) + " is not a token of the vocabulary");
  return id;
}

}  // namespace

std::vector<NormalForm> read_normalizer(const json& root) {
  std::vector<NormalForm> out;
  const json* v = member(root, "normalizer");
  if (is_null(v)) return out;
  std::vector<std::pair<const json*, std::string>> items;
  flatten(*v, "normalizer", "normalizers", 0, items);
  for (const auto& [item, key] : items) {
    const std::string& type = type_of(*item, key);
    if (type == "NFC") out.push_back(NormalForm::kNFC);
    else if (type == "NFD") out.push_back(NormalForm::kNFD);
    else expected(key + ".type", "\"NFC\", \"NFD\" or a Sequence of them (tmm supports no other normalizer)", json(type));
  }
  return out;
}

PreTokenizer read_pre_tokenizer(const json& root) {
  const json* pre = member(root, "pre_tokenizer");
  if (is_null(pre)) expected("pre_tokenizer", "ByteLevel (alone, or last in a Sequence)", json());
  std::vector<std::pair<const json*, std::string>> items;
  flatten(*pre, "pre_tokenizer", "pretokenizers", 0, items);
  PreTokenizer out;
  bool byte_level = false;
  for (const auto& [item, key] : items) {
    const std::string& type = type_of(*item, key);
    if (byte_level)
      fail(key, "a " + show(json(type)) + " pre-tokenizer after ByteLevel (tmm needs ByteLevel last)");
    if (type == "ByteLevel") {
      byte_level = true;
      out.add_prefix_space = get_bool(*item, "add_prefix_space", key, true);
      out.use_regex = get_bool(*item, "use_regex", key, true);
    } else if (type == "Split") {
      out.splits.push_back(read_split(*item, key));
    } else if (type == "Digits") {  // the Rust library splits on char::is_numeric: \p{N}
      const bool individual = get_bool(*item, "individual_digits", key, false);
      out.splits.emplace_back(Regex("\\p{N}"), individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                              false);
    } else {
      expected(key + ".type",
               "\"ByteLevel\", \"Split\", \"Digits\" or a Sequence of them (tmm reads byte-level BPE tokenizers)",
               json(type));
    }
  }
  if (!byte_level)
    fail("pre_tokenizer", "no ByteLevel pre-tokenizer (a byte-level BPE needs one, alone or last in a Sequence)");
  return out;
}

void check_decoder(const json& root) {
  const json* dec = member(root, "decoder");
  if (is_null(dec)) expected("decoder", "ByteLevel (or a Sequence of one ByteLevel)", json());
  const std::string& type = type_of(*dec, "decoder");
  if (type == "ByteLevel") return;
  if (type != "Sequence") expected("decoder.type", "\"ByteLevel\" (or a Sequence of one ByteLevel)", json(type));
  const json* list = member(*dec, "decoders");
  if (list == nullptr || !list->is_array() || list->size() != 1)
    expected("decoder.decoders", "a list of one ByteLevel", list ? *list : json());
  if (type_of((*list)[0], "decoder.decoders[0]") != "ByteLevel")
    expected("decoder.decoders[0].type", "\"ByteLevel\"", (*list)[0]["type"]);
}

SpecialTokensAround read_post_processor(const json& root, const std::function<bool(uint32_t)>& is_token) {
  SpecialTokensAround out;
  const json* v = member(root, "post_processor");
  if (is_null(v)) return out;
  std::vector<std::pair<const json*, std::string>> items;
  flatten(*v, "post_processor", "processors", 0, items);
  std::string adder;  // the key of the one that adds tokens
  for (const auto& [item, key] : items) {
    const std::string& type = type_of(*item, key);
    if (type == "ByteLevel") continue;  // offsets only
    if (type != "TemplateProcessing" && type != "RobertaProcessing" && type != "BertProcessing")
      expected(key + ".type",
               "\"ByteLevel\", \"TemplateProcessing\", \"RobertaProcessing\", \"BertProcessing\" or a Sequence of them",
               json(type));
    if (!adder.empty()) fail(key, "a second post-processor that adds special tokens (after " + adder + ")");
    adder = key;
    if (type == "TemplateProcessing") {
      read_template(*item, key, is_token, out);
    } else {
      out.prefix = {processing_token(*item, "cls", key, is_token)};
      out.suffix = {processing_token(*item, "sep", key, is_token)};
    }
  }
  return out;
}

}  // namespace tmm::text::detail
