// Reads a byte-level BPE tokenizer.json (the Python `tokenizers` package's
// format) into a TokenizerImpl: the BPE model and the added tokens here, the
// components around them in pipeline_json.cpp. Everything that would change
// the ids and that tmm does not implement is refused with the key and the
// value found, rather than silently tokenizing differently from that package.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/json_reading.h"
#include "text/pipeline_json.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

void require_null(const json& root, const char* key, const char* why) {
  const json* v = member(root, key);
  if (!is_null(v)) expected(key, std::string("null (") + why + ")", *v);
}

std::vector<std::pair<std::string, std::string>> read_merges(const json* merges) {
  std::vector<std::pair<std::string, std::string>> out;
  if (is_null(merges)) return out;
  if (!merges->is_array()) expected("model.merges", "a list", *merges);
  out.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {  // "a b": exactly one space, as in the Rust library
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        expected(key, "\"<token> <token>\" (two tokens, one space)", m);
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      expected(key, "\"<token> <token>\" or [\"<token>\", \"<token>\"]", m);
    }
  }
  return out;
}

std::unique_ptr<Bpe> read_model(const json& root) {
  const json* model = member(root, "model");
  if (model == nullptr || !model->is_object()) expected("model", "an object", model ? *model : json());
  if (const json* t = member(*model, "type"); t != nullptr && *t != "BPE")
    expected("model.type", "\"BPE\" (tmm reads byte-level BPE tokenizers)", *t);
  if (const json* d = member(*model, "dropout"); !is_null(d) && !(d->is_number() && d->get<double>() == 0.0))
    expected("model.dropout", "null (BPE dropout is random, for training only)", *d);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* v = member(*model, key); !is_null(v) && *v != "")
      expected(std::string("model.") + key, "null (not used by byte-level BPE; not supported)", *v);

  BpeOptions options;
  if (const json* unk = member(*model, "unk_token"); !is_null(unk)) {
    if (!unk->is_string()) expected("model.unk_token", "null or a string", *unk);
    options.unk_token = unk->get<std::string>();
  }
  options.fuse_unk = get_bool(*model, "fuse_unk", "model", false);
  options.byte_fallback = get_bool(*model, "byte_fallback", "model", false);
  options.ignore_merges = get_bool(*model, "ignore_merges", "model", false);

  const json* vocab = member(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object())
    expected("model.vocab", "an object {token: id}", vocab ? *vocab : json());
  std::unordered_map<std::string, uint32_t> tokens;
  std::unordered_map<uint32_t, const std::string*> owner;  // id -> token, to refuse shared ids
  tokens.reserve(vocab->size());
  for (const auto& [token, id_json] : vocab->items()) {
    const uint32_t id = get_id(id_json, "model.vocab[" + show(json(token)) + "]");
    const auto [it, fresh] = owner.emplace(id, &token);
    if (!fresh)
      fail("model.vocab", "the id " + std::to_string(id) + " is given to both " + show(json(*it->second)) + " and " +
                              show(json(token)));
    tokens.emplace(token, id);
  }
  return std::make_unique<Bpe>(std::move(tokens), read_merges(member(*model, "merges")), std::move(options));
}

std::vector<AddedToken> read_added_tokens(const json& root, const Bpe& bpe) {
  std::vector<AddedToken> out;
  const json* list = member(root, "added_tokens");
  if (is_null(list)) return out;
  if (!list->is_array()) expected("added_tokens", "a list", *list);
  std::unordered_map<uint32_t, std::string> by_id;
  std::unordered_map<std::string, uint32_t> by_content;
  std::unordered_map<uint32_t, const std::string*> vocab_ids;
  if (!list->empty())
    for (const auto& [token, id] : bpe.vocab()) vocab_ids.emplace(id, &token);
  for (size_t i = 0; i < list->size(); ++i) {
    const json& t = (*list)[i];
    const std::string key = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) expected(key, "an object", t);
    AddedToken a;
    const json* content = member(t, "content");
    if (content == nullptr || !content->is_string() || content->get_ref<const std::string&>().empty())
      expected(key + ".content", "a non-empty string", content ? *content : json());
    a.content = content->get<std::string>();
    const json* id = member(t, "id");
    if (id == nullptr) fail(key + ".id", "missing");
    a.id = get_id(*id, key + ".id");
    if (get_bool(t, "single_word", key, false))
      expected(key + ".single_word", "false (single_word tokens are not supported)", t["single_word"]);
    const bool special = get_bool(t, "special", key, false);
    a.lstrip = get_bool(t, "lstrip", key, false);
    a.rstrip = get_bool(t, "rstrip", key, false);
    a.normalized = get_bool(t, "normalized", key, !special);
    // The Python package gives a token that is also in the vocabulary the
    // vocabulary's id; a file it wrote always agrees, so a mismatch is an error.
    if (const auto it = bpe.vocab().find(a.content); it != bpe.vocab().end() && it->second != a.id)
      fail(key, excerpt(a.content) + " has id " + std::to_string(a.id) + " but model.vocab gives it " +
                    std::to_string(it->second));
    else if (it == bpe.vocab().end() && vocab_ids.count(a.id))
      fail(key, "the id " + std::to_string(a.id) + " of " + excerpt(a.content) + " is the id of " +
                    excerpt(*vocab_ids.at(a.id)) + " in model.vocab");
    if (!by_content.emplace(a.content, a.id).second) fail(key, excerpt(a.content) + " is listed twice");
    if (const auto [it, fresh] = by_id.emplace(a.id, a.content); !fresh)
      fail(key, "the id " + std::to_string(a.id) + " of " + excerpt(a.content) + " is also the id of " +
                    excerpt(it->second));
    out.push_back(std::move(a));
  }
  return out;
}

std::string apply_normalizers(std::string text, const std::vector<NormalForm>& normalizers) {
  for (const NormalForm form : normalizers) text = normalize(text, form);
  return text;
}

}  // namespace

std::shared_ptr<const TokenizerImpl> parse_tokenizer_json(const std::string& text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    fail("(document)", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) expected("(document)", "a JSON object", root);
  require_null(root, "truncation", "truncation is not supported");
  require_null(root, "padding", "padding is not supported");

  auto impl = std::make_shared<TokenizerImpl>();
  impl->normalizers = read_normalizer(root);
  impl->pre_tokenizer = read_pre_tokenizer(root);
  check_decoder(root);
  impl->bpe = read_model(root);
  std::vector<AddedToken> added = read_added_tokens(root, *impl->bpe);

  int64_t max_id = -1;
  for (const auto& [token, id] : impl->bpe->vocab()) {
    impl->id_bytes.emplace(id, token_to_bytes(token));
    max_id = std::max<int64_t>(max_id, id);
  }
  for (AddedToken& a : added) {  // the added token wins an id, as in the Python package
    impl->added_ids.emplace(a.content, a.id);
    // A normalized token is matched, and decoded, as the normalizer leaves it.
    if (a.normalized) a.content = apply_normalizers(std::move(a.content), impl->normalizers);
    impl->id_bytes[a.id] = token_to_bytes(a.content);
    max_id = std::max<int64_t>(max_id, a.id);
  }
  const SpecialTokensAround around =
      read_post_processor(root, [&](uint32_t id) { return impl->id_bytes.count(id) > 0; });
  impl->prefix_ids = around.prefix;
  impl->suffix_ids = around.suffix;
  impl->vocab_size = max_id + 1;
  impl->added = std::make_unique<AddedTokens>(std::move(added));
  return impl;
}

}  // namespace tmm::text::detail
