// tmm::text::Tokenizer: the byte-level default, small handcrafted byte-level
// BPE tokenizer.json files (GPT-2 and Llama-3 style; ids worked out by hand),
// the GPT-2 split, and the errors. The regex, Split and NFC pieces are in
// test_tokenizer_regex.cpp; parity with the Python `tokenizers` package on
// trained tokenizers in tests/python/test_text.py and
// tests/python/test_tokenizer_parity.py.
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <tmm/text/tokenizer.h>

#include "text/gpt2_split.h"
#include "text/unicode.h"

using tmm::text::Tokenizer;
using Ids = std::vector<int64_t>;

namespace {

// "Ġ" (U+0120) is the byte-level character of the space.
nlohmann::json small_bpe(bool add_prefix_space = false, bool string_merges = true) {
  nlohmann::json merges = nlohmann::json::array();
  for (const char* m : {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or"}) {
    const std::string s = m;
    const size_t space = s.find(' ');
    if (string_merges)
      merges.push_back(s);
    else
      merges.push_back({s.substr(0, space), s.substr(space + 1)});
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 15},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"vocab",
         {{"h", 0},
          {"e", 1},
          {"l", 2},
          {"o", 3},
          {"\xC4\xA0", 4},
          {"w", 5},
          {"r", 6},
          {"d", 7},
          {"he", 8},
          {"ll", 9},
          {"hell", 10},
          {"hello", 11},
          {"\xC4\xA0w", 12},
          {"or", 13},
          {"\xC4\xA0wor", 14},
          {"<|endoftext|>", 15}}},
        {"merges", merges}}},
  };
}

// Llama 3's shape: NFC, the Split regex then ByteLevel without its own
// regex, <|begin_of_text|> put before each text by a TemplateProcessing,
// ignore_merges. "Ã©" (U+00C3 U+00A9) is the byte-level form of "é".
nlohmann::json llama3_style_bpe() {
  const char* pattern =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  nlohmann::json j = small_bpe();
  int id = 16;  // after small_bpe's 0..15
  for (const char* token : {"'", "s", "'s", "\xC3\x83", "\xC2\xA9", "\xC3\x83\xC2\xA9", "1", "11", "111"})
    j["model"]["vocab"][token] = id++;
  j["model"]["vocab"]["<|begin_of_text|>"] = 25;
  j["model"]["ignore_merges"] = true;
  for (const char* m : {"' s", "\xC3\x83 \xC2\xA9", "1 1", "11 1"}) j["model"]["merges"].push_back(m);
  j["added_tokens"].push_back({{"id", 25},
                               {"content", "<|begin_of_text|>"},
                               {"single_word", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"normalized", false},
                               {"special", true}});
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  j["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [25], "tokens": ["<|begin_of_text|>"]}}}]})");
  return j;
}

Tokenizer load(const nlohmann::json& j) { return Tokenizer::from_json_text(j.dump()); }

// The message of the std::invalid_argument that loading `j` raises.
std::string load_error(const nlohmann::json& j) {
  try {
    load(j);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("the tokenizer.json loaded");
  return "";
}

std::string load_error_text(const std::string& text) {
  try {
    Tokenizer::from_json_text(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("the tokenizer.json loaded");
  return "";
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string_view> views;
  tmm::text::detail::gpt2_split(text, views);
  return {views.begin(), views.end()};
}

}  // namespace

TEST_CASE("byte-level tokenizer: ids are the UTF-8 bytes", "[tokenizer]") {
  const Tokenizer tok = Tokenizer::byte_level();
  CHECK(tok.kind() == "byte");
  CHECK(tok.vocab_size() == 256);
  const std::string text = "h\xC3\xA9llo \xE4\xBD\xA0 \xF0\x9F\x98\x80\n\t";  // "héllo 你 😀\n\t"
  const Ids ids = tok.encode(text);
  REQUIRE(ids.size() == text.size());
  for (size_t i = 0; i < text.size(); ++i) CHECK(ids[i] == static_cast<unsigned char>(text[i]));
  CHECK(tok.decode(ids) == text);
  CHECK(tok.encode("").empty());
  CHECK(tok.token_bytes(0xE4) == "\xE4");
  CHECK(tok.token_to_id("a") == 97);
  CHECK(!tok.token_to_id("ab"));
}

TEST_CASE("byte-level tokenizer: ill-formed UTF-8 decodes to U+FFFD per maximal subpart", "[tokenizer]") {
  const Tokenizer tok = Tokenizer::byte_level();
  const std::string fffd = "\xEF\xBF\xBD";
  // Python: bytes(ids).decode("utf-8", "replace")
  CHECK(tok.decode({0xFF}) == fffd);
  CHECK(tok.decode({'a', 0xE4, 0xBD}) == "a" + fffd);                        // truncated 3-byte character: one U+FFFD
  CHECK(tok.decode({0xED, 0xA0, 0x80}) == fffd + fffd + fffd);               // a surrogate: three
  CHECK(tok.decode({0xC0, 0xAF}) == fffd + fffd);                            // overlong
  CHECK(tok.decode({0xF4, 0x90, 0x80, 0x80}) == fffd + fffd + fffd + fffd);  // past U+10FFFF
  CHECK(tok.decode({0xE2, 0x82, 'x'}) == fffd + "x");
  CHECK(tok.encode("\xFF\x80") == Ids{0xFF, 0x80});
}

TEST_CASE("tokenizer: ids out of range name the id and the vocabulary size", "[tokenizer]") {
  const Tokenizer byte = Tokenizer::byte_level();
  CHECK_THROWS_AS(byte.decode({1, 256}), std::out_of_range);
  CHECK_THROWS_WITH(byte.decode({1, 256}), Catch::Contains("256") && Catch::Contains("id 256"));
  CHECK_THROWS_AS(byte.token_bytes(-3), std::out_of_range);
  CHECK_THROWS_WITH(byte.token_bytes(-3), Catch::Contains("id -3"));
  const Tokenizer bpe = load(small_bpe());
  CHECK_THROWS_AS(bpe.decode({16}), std::out_of_range);
  CHECK_THROWS_WITH(bpe.decode({16}), Catch::Contains("id 16") && Catch::Contains("16 ids"));
}

TEST_CASE("GPT-2 split: contractions, optional space, letters, numbers, whitespace runs", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(split("Hello world's  test\n\n 123abc!!") ==
        V{"Hello", " world", "'s", " ", " test", "\n\n", " 123", "abc", "!!"});
  CHECK(split("it'S we're I'll 'x") == V{"it", "'", "S", " we", "'re", " I", "'ll", " '", "x"});
  CHECK(split("   ") == V{"   "});
  CHECK(split("a \t b") == V{"a", " \t", " b"});
  CHECK(split("x\ny") == V{"x", "\n", "y"});
  CHECK(split("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x81") ==
        V{"caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x81"});
  CHECK(split("x\xC2\xA0y") == V{"x", "\xC2\xA0", "y"});  // U+00A0 is \s but not the optional space
  CHECK(split("\xD9\xA3\xD9\xA4 \xE2\x85\xAB") ==
        V{"\xD9\xA3\xD9\xA4", " \xE2\x85\xAB"});            // Arabic-Indic digits, Roman numeral: \p{N}
  CHECK(split("a\xFF\xFE b") == V{"a", "\xFF\xFE", " b"});  // ill-formed bytes are "other"
  CHECK(split("").empty());
}

TEST_CASE("small BPE tokenizer.json: merges by rank, added tokens, decode", "[tokenizer]") {
  for (const bool string_merges : {true, false}) {
    INFO("string merges " << string_merges);
    const Tokenizer tok = load(small_bpe(false, string_merges));
    CHECK(tok.kind() == "bpe");
    CHECK(tok.vocab_size() == 16);
    // "hello" -> hello; " world" -> Ġw, or -> Ġwor, then l, d.
    CHECK(tok.encode("hello world") == Ids{11, 14, 2, 7});
    CHECK(tok.encode("hello<|endoftext|>hello") == Ids{11, 15, 11});
    CHECK(tok.encode("hex") == Ids{8});  // 'x' has no token and there is no unk_token: dropped
    CHECK(tok.encode("").empty());
    CHECK(tok.decode({11, 14, 2, 7}) == "hello world");
    CHECK(tok.decode({11, 15}) == "hello<|endoftext|>");
    CHECK(tok.token_bytes(4) == " ");
    CHECK(tok.token_to_id("<|endoftext|>") == 15);
    CHECK(tok.token_to_id("\xC4\xA0wor") == 14);
    CHECK(!tok.token_to_id(" wor"));
  }
  const Tokenizer prefixed = load(small_bpe(true));
  CHECK(prefixed.encode("hello") == Ids{4, 11});
  CHECK(prefixed.encode("hello<|endoftext|>hello") == Ids{4, 11, 15, 4, 11});  // each text part gets the space
  CHECK(prefixed.encode(" hello") == Ids{4, 11});
}

TEST_CASE("small BPE tokenizer.json: Sequence wrappers, ill-formed input, threads", "[tokenizer]") {
  nlohmann::json j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {j["pre_tokenizer"]}}};
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {j["decoder"]}}};
  const Tokenizer tok = load(j);
  CHECK(tok.encode("hello world") == Ids{11, 14, 2, 7});
  CHECK(tok.encode("he\xFF\xC3llo") == Ids{8, 9, 3});  // the broken bytes have no token here
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results)
    threads.emplace_back([&tok, &r] {
      for (int i = 0; i < 200; ++i) r = tok.encode("hello world hello<|endoftext|> world " + std::to_string(i % 7));
    });
  for (auto& t : threads) t.join();
  for (const auto& r : results) CHECK(r == results[0]);
}

TEST_CASE("Llama-3-style tokenizer.json: NFC, Split regex, template post-processor", "[tokenizer]") {
  const Tokenizer tok = load(llama3_style_bpe());
  CHECK(tok.vocab_size() == 26);
  // <|begin_of_text|>, then "hello" | " world" (Ġwor l d) | "'s" | " " | "111" | "1" (\\p{N}{1,3}).
  CHECK(tok.encode("hello world's 1111") == Ids{25, 11, 14, 2, 7, 18, 4, 24, 22});
  CHECK(tok.encode("hello world's 1111", false) == Ids{11, 14, 2, 7, 18, 4, 24, 22});
  CHECK(tok.encode("") == Ids{25});
  CHECK(tok.encode("", false).empty());
  // NFC first: e + U+0301 becomes U+00E9, whose two bytes merge.
  CHECK(tok.encode("he\xCC\x81", false) == Ids{0, 21});
  CHECK(tok.encode("h\xC3\xA9", false) == Ids{0, 21});
  CHECK(tok.decode(tok.encode("he\xCC\x81")) == "<|begin_of_text|>h\xC3\xA9");
  // The Split pieces, case-insensitive contractions included (U+017F folds to s).
  using Pieces = std::vector<std::string>;
  CHECK(tok.pre_tokenize("it'S x'\xC5\xBFy") == Pieces{"it", "'S", " x", "'\xC5\xBF", "y"});
  CHECK(tok.pre_tokenize("a  \n\n b<|begin_of_text|>1234") == Pieces{"a", "  \n\n", " b", "<|begin_of_text|>", "123", "4"});
  CHECK(tok.pre_tokenize("e\xCC\x81") == Pieces{"\xC3\xA9"});
  // ignore_merges: a piece that is a token is that token ("'s"), with or without merges.
  CHECK(tok.encode("'s", false) == Ids{18});
}

TEST_CASE("post-processors: Roberta and Bert processing, add_special_tokens", "[tokenizer]") {
  nlohmann::json j = small_bpe();
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"h", 0}}, {"sep", {"<|endoftext|>", 15}},
                         {"trim_offsets", true}, {"add_prefix_space", false}};
  const Tokenizer roberta = load(j);
  CHECK(roberta.encode("hello world") == Ids{0, 11, 14, 2, 7, 15});
  CHECK(roberta.encode("hello world", false) == Ids{11, 14, 2, 7});
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors", {{{"type", "BertProcessing"}, {"cls", {"e", 1}}, {"sep", {"d", 7}}}}}};
  CHECK(load(j).encode("hello") == Ids{1, 11, 7});
  CHECK(Tokenizer::byte_level().encode("hi", true) == Ids{'h', 'i'});
}

TEST_CASE("tokenizer.json: unsupported or inconsistent content names the key", "[tokenizer]") {
  using Catch::Contains;
  nlohmann::json j = small_bpe();
  j["normalizer"] = {{"type", "NFKC"}};
  CHECK_THAT(load_error(j), Contains("normalizer.type: expected \"NFC\", \"NFD\"") && Contains("NFKC"));

  j = small_bpe();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
  CHECK_THAT(load_error(j), Contains("normalizer.normalizers[1].type") && Contains("Lowercase"));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Split"}}, {{"type", "ByteLevel"}}}}};
  CHECK_THAT(load_error(j), Contains("pre_tokenizer.pretokenizers[0].pattern: expected {\"Regex\""));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", "(?<=a)b"}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  CHECK_THAT(load_error(j), Contains("pre_tokenizer.pretokenizers[0].pattern.Regex: unsupported construct '(?<='") &&
                                Contains("lookbehind"));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Separated"}},
                          {{"type", "ByteLevel"}}}}};
  CHECK_THAT(load_error(j), Contains("pre_tokenizer.pretokenizers[0].behavior") && Contains("Separated"));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Digits"}}}}};
  CHECK_THAT(load_error(j), Contains("pre_tokenizer.pretokenizers[1]") && Contains("after ByteLevel"));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Digits"}};
  CHECK_THAT(load_error(j), Contains("no ByteLevel pre-tokenizer"));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Metaspace"}}, {{"type", "ByteLevel"}}}}};
  CHECK_THAT(load_error(j), Contains("pre_tokenizer.pretokenizers[0].type") && Contains("Metaspace"));

  j = small_bpe();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK_THAT(load_error(j), Contains("pre_tokenizer.type") && Contains("Whitespace"));

  j = small_bpe();
  j.erase("decoder");
  CHECK_THAT(load_error(j), Contains("decoder: expected ByteLevel"));

  j = small_bpe();
  j["model"]["type"] = "WordPiece";
  CHECK_THAT(load_error(j), Contains("model.type") && Contains("WordPiece"));

  j = small_bpe();
  j["model"]["dropout"] = 0.1;
  CHECK_THAT(load_error(j), Contains("model.dropout") && Contains("0.1"));

  j = small_bpe();
  j["model"]["merges"][2] = "he ll o";
  CHECK_THAT(load_error(j), Contains("model.merges[2]") && Contains("he ll o"));

  j = small_bpe();
  j["model"]["merges"].push_back("o d");
  CHECK_THAT(load_error(j), Contains("model.merges[7]") && Contains("'od' is not in model.vocab"));

  j = small_bpe();
  j["model"]["vocab"]["x"] = -1;
  CHECK_THAT(load_error(j), Contains("model.vocab[\"x\"]") && Contains("-1"));

  j = small_bpe();
  j["model"]["vocab"]["x"] = 3;
  CHECK_THAT(load_error(j), Contains("the id 3 is given to both"));

  j = small_bpe();
  j["model"]["unk_token"] = "<unk>";
  CHECK_THAT(load_error(j), Contains("model.unk_token") && Contains("<unk>"));

  j = small_bpe();
  j["added_tokens"][0]["single_word"] = true;
  CHECK_THAT(load_error(j), Contains("added_tokens[0].single_word"));

  j = small_bpe();
  j["added_tokens"][0]["id"] = 14;
  CHECK_THAT(load_error(j), Contains("added_tokens[0]") && Contains("has id 14 but model.vocab gives it 15"));

  j = small_bpe();
  j["padding"] = {{"length", 8}};
  CHECK_THAT(load_error(j), Contains("padding: expected null"));

  j = small_bpe();
  j["post_processor"] = {{"type", "TemplateProcessing"}};
  CHECK_THAT(load_error(j), Contains("post_processor.single: expected a list of pieces"));

  j = small_bpe();
  j["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing", "special_tokens": {},
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]})");
  CHECK_THAT(load_error(j), Contains("post_processor.single[0]") &&
                                Contains("\"<s>\" is not in the post-processor's special_tokens"));

  j = small_bpe();
  j["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [15], "tokens": ["<s>"]}}})");
  CHECK_THAT(load_error(j), Contains("post_processor.single") && Contains("sequence A exactly once"));

  j = small_bpe();
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 99}}, {"sep", {"</s>", 15}}};
  CHECK_THAT(load_error(j), Contains("post_processor.cls") && Contains("99 is not a token"));

  j = small_bpe();
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors",
                          {{{"type", "BertProcessing"}, {"cls", {"a", 15}}, {"sep", {"b", 15}}},
                           {{"type", "RobertaProcessing"}, {"cls", {"a", 15}}, {"sep", {"b", 15}}}}}};
  CHECK_THAT(load_error(j), Contains("post_processor.processors[1]") && Contains("a second post-processor"));

  j = small_bpe();
  j["post_processor"] = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, {{"type", "Fancy"}}}}};
  CHECK_THAT(load_error(j), Contains("post_processor.processors[1].type") && Contains("Fancy"));

  CHECK_THAT(load_error(nlohmann::json::array()), Contains("expected a JSON object"));
  CHECK_THROWS_AS(Tokenizer::from_json_text("{\"model\": "), std::invalid_argument);
  CHECK_THROWS_WITH(Tokenizer::from_json_text("{\"model\": "),
                    Contains("tokenizer.json") && Contains("not valid JSON"));
  // Messages quote the input but stay valid UTF-8 (Python turns them into str).
  const std::string bad = load_error_text("{\"model\": {\"type\": \"W\xC3\xA9\xC3\"}}");
  CHECK_THAT(bad, Contains("not valid JSON"));
  CHECK(tmm::text::detail::to_valid_utf8(bad) == bad);
  CHECK_THROWS_AS(Tokenizer::from_file("/nonexistent/tokenizer.json"), std::runtime_error);
  CHECK_THROWS_WITH(Tokenizer::from_file("/nonexistent/tokenizer.json"), Contains("/nonexistent/tokenizer.json"));
}
