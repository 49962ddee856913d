// libFuzzer target: the tokenizer.json reader (tmm::text::Tokenizer::
// from_json_text) on arbitrary text, then encode/decode on what loads.
//
// Contract under test:
//  * any text either loads or raises std::invalid_argument;
//  * a tokenizer that loads encodes any bytes (the input itself, pieces of
//    it and fixed multilingual probes, ill-formed UTF-8 included) into ids in
//    [0, vocab_size()), and decodes them to valid UTF-8 equal to the lossy
//    decoding of the tokens' bytes;
//  * when every byte has a token and there are no added tokens, no
//    add_prefix_space and no unk_token, the tokens' bytes are the input's;
//  * the byte-level tokenizer round-trips the input.
// Anything else (another exception, a crash, a sanitizer report, a hang) is a
// bug.
//
// Build and run: tests/fuzz/build.sh (see its header).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <tmm/text/tokenizer.h>

#include "text/byte_level.h"
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
  if (is_set(j, "added_tokens") || !j.contains("model") || is_set(j["model"], "unk_token")) return false;
  const nlohmann::json& pre = j["pre_tokenizer"];
  const nlohmann::json& bl = pre.contains("pretokenizers") ? pre["pretokenizers"][0] : pre;
  if (!bl.contains("add_prefix_space") || bl["add_prefix_space"] != false) return false;
  for (int b = 0; b < 256; ++b)
    if (!tok.token_to_id(tmm::text::detail::byte_char(uint8_t(b)))) return false;
  return true;
}

void check_encode(const Tokenizer& tok, std::string_view text, bool exact) {
  const std::vector<int64_t> ids = tok.encode(text);
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  const Tokenizer byte = Tokenizer::byte_level();
  const std::vector<int64_t> byte_ids = byte.encode(text);
  std::string back;
  for (const int64_t id : byte_ids) back += byte.token_bytes(id);
  if (back != text) fail("byte-level tokens do not round-trip");
  if (byte.decode(byte_ids) != tmm::text::detail::to_valid_utf8(text)) fail("byte-level decode");

  std::optional<Tokenizer> tok;
  try {
    tok = Tokenizer::from_json_text(text);
  } catch (const std::invalid_argument&) {
    return 0;  // a clean error
  }
  // It loaded, so it is a JSON object the reader accepted.
  const bool exact = lossless(*tok, nlohmann::json::parse(text));
  for (const char* probe : kProbes) check_encode(*tok, probe, exact);
  check_encode(*tok, text, exact);
  for (size_t i = 0; i < text.size(); i += 97) check_encode(*tok, std::string_view(text).substr(i, 131), exact);
  return 0;
}
