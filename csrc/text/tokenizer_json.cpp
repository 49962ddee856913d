// Reads a byte-level BPE tokenizer.json (the Python `tokenizers` package's
// format) into a TokenizerImpl. Everything that would change the ids and that
// tmm does not implement is refused with the key and the value found, rather
// than silently tokenizing differently from that package.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

using nlohmann::json;

// A value for an error message: its JSON, cut at 80 bytes on a character boundary.
std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() <= 80) return s;
  size_t cut = 77;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw std::invalid_argument(key + ": " + what);
}

[[noreturn]] void expected(const std::string& key, const std::string& what, const json& found) {
  fail(key, "expected " + what + ", found " + show(found));
}

const json* member(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool is_null(const json* v) { return v == nullptr || v->is_null(); }

bool get_bool(const json& obj, const char* key, const std::string& path, bool fallback) {
  const json* v = member(obj, key);
  if (is_null(v)) return fallback;
  if (!v->is_boolean()) expected(path + "." + key, "true or false", *v);
  return v->get<bool>();
}

uint32_t get_id(const json& v, const std::string& key) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0) ||
      v.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
    expected(key, "an id (an integer in [0, 2^32))", v);
  return uint32_t(v.get<uint64_t>());
}

const std::string& type_of(const json& v, const std::string& key) {
  if (!v.is_object()) expected(key, "an object", v);
  const json* t = member(v, "type");
  if (t == nullptr || !t->is_string()) expected(key + ".type", "a string", t ? *t : json());
  return t->get_ref<const std::string&>();
}

// A component that must be one ByteLevel, alone or as the only element of a
// Sequence (whose list is under `list_key`); returns the ByteLevel object.
const json& byte_level_component(const json& v, const std::string& key, const char* list_key) {
  const std::string& type = type_of(v, key);
  if (type == "ByteLevel") return v;
  if (type != "Sequence") expected(key + ".type", "\"ByteLevel\" (or a Sequence of one ByteLevel)", json(type));
  const json* list = member(v, list_key);
  const std::string list_path = key + "." + list_key;
  if (list == nullptr || !list->is_array() || list->size() != 1)
    expected(list_path, "a list of one ByteLevel", list ? *list : json());
  const std::string item = list_path + "[0]";
  if (type_of((*list)[0], item) != "ByteLevel") expected(item + ".type", "\"ByteLevel\"", (*list)[0]["type"]);
  return (*list)[0];
}

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

}  // namespace

std::shared_ptr<const TokenizerImpl> parse_tokenizer_json(const std::string& text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    fail("(document)", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) expected("(document)", "a JSON object", root);
  require_null(root, "normalizer", "tmm supports no normalizer");
  require_null(root, "truncation", "truncation is not supported");
  require_null(root, "padding", "padding is not supported");
  if (const json* post = member(root, "post_processor");
      !is_null(post) && type_of(*post, "post_processor") != "ByteLevel")
    expected("post_processor", "null or ByteLevel (others add tokens; not supported)", *post);

  auto impl = std::make_shared<TokenizerImpl>();
  const json* pre = member(root, "pre_tokenizer");
  if (pre == nullptr || pre->is_null()) expected("pre_tokenizer", "ByteLevel (or a Sequence of one ByteLevel)", json());
  const json& bl = byte_level_component(*pre, "pre_tokenizer", "pretokenizers");
  const std::string bl_key = &bl == pre ? "pre_tokenizer" : "pre_tokenizer.pretokenizers[0]";
  impl->add_prefix_space = get_bool(bl, "add_prefix_space", bl_key, true);
  impl->use_regex = get_bool(bl, "use_regex", bl_key, true);
  const json* dec = member(root, "decoder");
  if (dec == nullptr || dec->is_null()) expected("decoder", "ByteLevel (or a Sequence of one ByteLevel)", json());
  byte_level_component(*dec, "decoder", "decoders");

  impl->bpe = read_model(root);
  std::vector<AddedToken> added = read_added_tokens(root, *impl->bpe);

  int64_t max_id = -1;
  for (const auto& [token, id] : impl->bpe->vocab()) {
    impl->id_bytes.emplace(id, token_to_bytes(token));
    max_id = std::max<int64_t>(max_id, id);
  }
  for (const AddedToken& a : added) {  // the added token wins an id, as in the Python package
    impl->id_bytes[a.id] = token_to_bytes(a.content);
    impl->added_ids.emplace(a.content, a.id);
    max_id = std::max<int64_t>(max_id, a.id);
  }
  impl->vocab_size = max_id + 1;
  impl->added = std::make_unique<AddedTokens>(std::move(added));
  return impl;
}

}  // namespace tmm::text::detail
