// libFuzzer target: the tokenizer.json reader (tmm::text::Tokenizer::
// from_json_text) on arbitrary text, then encode/decode on what loads; the
// input also as a Split regex pattern and as text to normalize.
//
// Contract under test:
//  * any text either loads or raises std::invalid_argument;
//  * a tokenizer that loads encodes any bytes (the input itself, pieces of
//    it and fixed multilingual probes, ill-formed UTF-8 included) into ids in
//    [0, vocab_size()), and decodes them to valid UTF-8 equal to the lossy
//    decoding of the tokens' bytes;
//  * encode(text) is encode(text, false) with the same special tokens around
//    it as encode("") has;
//  * when every byte has a token and there are no added tokens, no
//    normalizer, no add_prefix_space, no Split that removes text and no
//    unk_token, the tokens' bytes are the input's;
//  * the byte-level tokenizer round-trips the input;
//  * the input as a regex either compiles or raises std::invalid_argument,
//    and its matches (on the input and the probes) are ordered, disjoint and
//    on character boundaries;
//  * NFC and NFD of the input are idempotent and agree with each other
//    (NFC(NFD(x)) == NFC(x), NFD(NFC(x)) == NFD(x)).
// Anything else (another exception, a crash, a sanitizer report, a hang) is a
// bug.
//
// Built and run by tests/fuzz/run.sh.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <tmm/text/tokenizer.h>

#include "text/byte_level.h"
#include "text/normalize.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace {

using tmm::text::Tokenizer;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what.c_str());
  std::abort();
}

const char* const kProbes[] = {
    "",
    " ",
    "Hello world, it's 3.14 o'clock!\n\n\tdon't",
    "h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 \xD0\x9C\xD0\xB8\xD1\x80",
    "<|endoftext|>x<|endoftext|> ",
    "  \xC2\xA0\xE3\x80\x80 a\xE2\x80\xA8",
    "\xFF\xC3\xE4\xBD \xED\xA0\x80\xF4\x90\x80\x80",
};

// Whether the tokens' bytes must be exactly the text's: decided from the JSON
// (the fuzzer's own reading, independent of the code under test).
bool lossless(const Tokenizer& tok, const nlohmann::json& j) {
  const auto is_set = [](const nlohmann::json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) && !obj[key].is_null() && obj[key] != false &&
           !(obj[key].is_array() && obj[key].empty());
  };
  if (is_set(j, "added_tokens") || is_set(j, "normalizer") || !j.contains("model") || is_set(j["model"], "unk_token"))
    return false;
  // Only ByteLevel (add_prefix_space false), with no Split or Digits before it:
  // Removed and invert may drop text, and nested Sequences are not worth reading here.
  const nlohmann::json& pre = j["pre_tokenizer"];
  if (pre.contains("pretokenizers") && pre["pretokenizers"].size() != 1) return false;
  const nlohmann::json& bl = pre.contains("pretokenizers") ? pre["pretokenizers"][0] : pre;
  if (bl.value("type", "") != "ByteLevel" || !bl.contains("add_prefix_space") || bl["add_prefix_space"] != false)
    return false;
  for (int b = 0; b < 256; ++b)
    if (!tok.token_to_id(tmm::text::detail::byte_char(uint8_t(b)))) return false;
  return true;
}

void check_encode(const Tokenizer& tok, std::string_view text, bool exact, const std::vector<int64_t>& specials) {
  const std::vector<int64_t> ids = tok.encode(text, false);
  const std::vector<int64_t> with = tok.encode(text);
  bool around = with.size() == ids.size() + specials.size();  // with == specials[:k] + ids + specials[k:]
  for (size_t k = 0; around && k <= specials.size(); ++k) {
    if (std::equal(specials.begin(), specials.begin() + k, with.begin()) &&
        std::equal(ids.begin(), ids.end(), with.begin() + k) &&
        std::equal(specials.begin() + k, specials.end(), with.begin() + k + ids.size()))
      break;
    if (k == specials.size()) around = false;
  }
  if (!around) fail("encode(text) is not encode(text, false) with the special tokens of encode(\"\") around it");
  std::string bytes;
  for (const int64_t id : ids) {
    if (id < 0 || id >= tok.vocab_size())
      fail("id " + std::to_string(id) + " outside [0, " + std::to_string(tok.vocab_size()) + ")");
    bytes += tok.token_bytes(id);
  }
  const std::string decoded = tok.decode(ids);
  if (decoded != tmm::text::detail::to_valid_utf8(bytes)) fail("decode differs from the tokens' bytes");
  if (tmm::text::detail::to_valid_utf8(decoded) != decoded) fail("decode returned ill-formed UTF-8");
  if (exact && bytes != text) fail("the tokens' bytes are not the text's");
}

// The input as a Split pattern.
void check_regex(const std::string& pattern, const std::string& text) {
  std::optional<tmm::text::detail::Regex> regex;
  try {
    regex.emplace(pattern);
  } catch (const std::invalid_argument&) {
    return;  // a clean refusal
  }
  for (const std::string_view subject : {std::string_view(text), std::string_view(kProbes[2]),
                                         std::string_view(kProbes[3]), std::string_view(kProbes[6])}) {
    std::vector<bool> boundary(subject.size() + 1, false);  // where a UTF-8 unit starts, and the end
    for (size_t i = 0; i < subject.size(); i += tmm::text::detail::decode_utf8(subject, i).len) boundary[i] = true;
    boundary[subject.size()] = true;
    std::vector<std::pair<size_t, size_t>> found;
    regex->find_all(subject, found);
    size_t last = 0;
    for (const auto& [b, e] : found) {
      if (b < last || b > e || e > subject.size()) fail("regex matches out of order or out of range");
      if (!boundary[b] || !boundary[e]) fail("a regex match boundary inside a character");
      last = e;
    }
  }
}

void check_normalizers(const std::string& text) {
  using tmm::text::detail::NormalForm;
  using tmm::text::detail::normalize;
  const std::string nfc = normalize(text, NormalForm::kNFC), nfd = normalize(text, NormalForm::kNFD);
  if (normalize(nfc, NormalForm::kNFC) != nfc) fail("NFC is not idempotent");
  if (normalize(nfd, NormalForm::kNFD) != nfd) fail("NFD is not idempotent");
  if (normalize(nfd, NormalForm::kNFC) != nfc) fail("NFC(NFD(x)) != NFC(x)");
  if (normalize(nfc, NormalForm::kNFD) != nfd) fail("NFD(NFC(x)) != NFD(x)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  const Tokenizer byte = Tokenizer::byte_level();
  const std::vector<int64_t> byte_ids = byte.encode(text);
  std::string back;
  for (const int64_t id : byte_ids) back += byte.token_bytes(id);
  if (back != text) fail("byte-level tokens do not round-trip");
  if (byte.decode(byte_ids) != tmm::text::detail::to_valid_utf8(text)) fail("byte-level decode");

  check_regex(text, text);
  check_normalizers(text);

  std::optional<Tokenizer> tok;
  try {
    tok = Tokenizer::from_json_text(text);
  } catch (const std::invalid_argument&) {
    return 0;  // a clean error
  }
  // It loaded, so it is a JSON object the reader accepted.
  const bool exact = lossless(*tok, nlohmann::json::parse(text));
  const std::vector<int64_t> specials = tok->encode("");
  for (const char* probe : kProbes) check_encode(*tok, probe, exact, specials);
  check_encode(*tok, text, exact, specials);
  for (size_t i = 0; i < text.size(); i += 97)
    check_encode(*tok, std::string_view(text).substr(i, 131), exact, specials);
  for (const std::string& piece : tok->pre_tokenize(text))
    if (piece.empty()) fail("pre_tokenize gave an empty piece");
  return 0;
}
