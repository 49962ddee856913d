// The pieces of the tokenizer that real checkpoints' tokenizer.json files
// need beyond GPT-2's: the Split pre-tokenizer's regex (csrc/text/regex*),
// its behaviours (csrc/text/split.h) and the NFC / NFD normalizers
// (csrc/text/normalize.h). Expected values are worked out by hand or read
// from the Rust `tokenizers` library's documentation; the parity tests with
// that library are in tests/python/test_tokenizer_parity.py.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "text/normalize.h"
#include "text/regex.h"
#include "text/split.h"

using tmm::text::detail::NormalForm;
using tmm::text::detail::Regex;
using tmm::text::detail::SplitBehavior;
using tmm::text::detail::SplitPreTokenizer;
using Spans = std::vector<std::pair<size_t, size_t>>;
using Strings = std::vector<std::string>;

namespace {

Spans matches(const std::string& pattern, const std::string& text) {
  Spans out;
  Regex(pattern).find_all(text, out);
  return out;
}

// The texts of the matches.
Strings found(const std::string& pattern, const std::string& text) {
  Strings out;
  for (const auto& [b, e] : matches(pattern, text)) out.push_back(text.substr(b, e - b));
  return out;
}

std::string regex_error(const std::string& pattern) {
  try {
    Regex r(pattern);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("the pattern compiled: " << pattern);
  return "";
}

Strings split(const Regex& pattern, SplitBehavior behavior, bool invert, const std::string& text) {
  std::vector<std::string_view> pieces;
  SplitPreTokenizer(pattern, behavior, invert).split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

const char kLlama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

TEST_CASE("regex: leftmost, first alternative first, greedy and lazy", "[tokenizer][regex]") {
  CHECK(found("a|ab", "ab") == Strings{"a"});
  CHECK(found("ab|a", "ab") == Strings{"ab"});
  CHECK(found("a+", "baaab") == Strings{"aaa"});
  CHECK(found("a+?", "aaa") == Strings{"a", "a", "a"});
  CHECK(found("a{2,3}", "aaaaaaa") == Strings{"aaa", "aaa"});
  CHECK(found("a{,2}b", "aaab") == Strings{"aab"});
  CHECK(found("\\p{N}{1,3}", "1234567") == Strings{"123", "456", "7"});
  CHECK(found("(?:ab)+", "ababa") == Strings{"abab"});
  CHECK(found("a++a", "aaa").empty());  // possessive: no backtracking into it
  CHECK(found("(?>a+)a", "aaa").empty());
  CHECK(found("\\s+(?!\\S)", "a   b") == Strings{"  "});
  CHECK(found("x(?=y)", "xxy") == Strings{"x"});
  CHECK(found(".", "a\nb") == Strings{"a", "b"});  // '.' is anything but '\n'
}

TEST_CASE("regex: Unicode classes, properties and escapes", "[tokenizer][regex]") {
  CHECK(found("\\p{L}+", "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD") == Strings{"caf\xC3\xA9", "\xE4\xBD\xA0\xE5\xA5\xBD"});
  CHECK(found("\\p{Lu}", "aBcD") == Strings{"B", "D"});
  CHECK(found("\\P{L}+", "ab12cd") == Strings{"12"});
  CHECK(found("\\p{^L}+", "ab12cd") == Strings{"12"});
  CHECK(found("\\p{Letter}+", "ab12") == Strings{"ab"});
  CHECK(found("\\d+", "12\xD9\xA3x\xC2\xBD") == Strings{"12\xD9\xA3"});  // \d is \p{Nd}: not U+00BD
  CHECK(found("\\p{N}+", "\xE2\x85\xAB\xC2\xBD") == Strings{"\xE2\x85\xAB\xC2\xBD"});  // Nl, No
  CHECK(found("\\s", "a\xC2\xA0" "b\xE2\x80\x8B" "c") == Strings{"\xC2\xA0"});  // NBSP yes, U+200B no
  CHECK(found("\\h+", "0fz G") == Strings{"0f"});
  CHECK(found("[^\\s\\p{L}\\p{N}]+", "a!?b") == Strings{"!?"});
  CHECK(found("[a-c-]+", "xa-cbx") == Strings{"a-cb"});
  CHECK(found("[]a]+", "]a") == Strings{"]a"});
  CHECK(found("\\x41\\u0042\\x{43}\\0", std::string("ABC\0", 4)) == Strings{std::string("ABC\0", 4)});
  CHECK(found("[\\x{1F600}-\\x{1F64F}]+", "\xF0\x9F\x98\x80\xF0\x9F\x98\x81" "a") ==
        Strings{"\xF0\x9F\x98\x80\xF0\x9F\x98\x81"});
  CHECK(found("\\.", "a.b") == Strings{"."});
  // An ill-formed unit matches as U+FFFD (a symbol).
  CHECK(found("\\p{So}", "a\xFF" "b") == Strings{"\xFF"});
}

TEST_CASE("regex: anchors as Oniguruma places them", "[tokenizer][regex]") {
  CHECK(matches("^", "a\nb\n") == Spans{{0, 0}, {2, 2}});  // not after the final newline
  CHECK(matches("$", "a\nb\n") == Spans{{1, 1}, {3, 3}, {4, 4}});
  CHECK(matches("\\Z", "ab\nc\n") == Spans{{4, 4}, {5, 5}});
  CHECK(matches("\\A", "aa") == Spans{{0, 0}});
  CHECK(matches("a\\z", "aa") == Spans{{1, 2}});
}

TEST_CASE("regex: empty matches follow Oniguruma's find_iter", "[tokenizer][regex]") {
  // No empty match right where the previous match ended: move one character on.
  CHECK(matches("a*", "baab") == Spans{{0, 0}, {1, 3}, {4, 4}});
  CHECK(matches("", "ab") == Spans{{0, 0}, {1, 1}, {2, 2}});
  CHECK(matches("", "\xC3\xA9x") == Spans{{0, 0}, {2, 2}, {3, 3}});  // by characters, not bytes
}

TEST_CASE("regex: case-insensitive literals use full case folding", "[tokenizer][regex]") {
  CHECK(found("(?i:'s|'t)", "'S 'T '\xC5\xBF") == Strings{"'S", "'T", "'\xC5\xBF"});  // U+017F LONG S folds to s
  CHECK(found("(?i:k)", "kK\xE2\x84\xAA") == Strings{"k", "K", "\xE2\x84\xAA"});      // U+212A KELVIN SIGN
  CHECK(found("(?i:ss)", "x\xC3\x9Fx") == Strings{"\xC3\x9F"});                         // U+00DF folds to "ss"
  CHECK(found("(?i:\xC3\x9F)", "xSsx") == Strings{"Ss"});
  CHECK(found("(?i:s(?:s))", "\xC3\x9F") == Strings{"\xC3\x9F"});  // (?:...) joins the literals
  CHECK(found("(?i:s(s))", "\xC3\x9F").empty());                    // a capturing group does not
  CHECK(found("(?i:s)", "\xC3\x9F").empty());                       // half a character never matches
  // An isolated option reaches to the end of its group, alternatives included.
  CHECK(found("ab(?i)c|d", "abC abD D") == Strings{"abC", "abD"});
  CHECK(found("(?i)a(?-i)b", "AB Ab") == Strings{"Ab"});
}

TEST_CASE("regex: the Llama 3 pattern", "[tokenizer][regex]") {
  CHECK(found(kLlama3, "Hello world's 12345  \n\n x!!\n") ==
        Strings{"Hello", " world", "'s", " ", "123", "45", "  \n\n", " x", "!!\n"});
  CHECK(found(kLlama3, "I'M it'LL") == Strings{"I", "'M", " it", "'LL"});
  CHECK(found(kLlama3, "   ") == Strings{"   "});
  CHECK(found(kLlama3, "a \r\n\r\n b") == Strings{"a", " \r\n\r\n", " b"});
}

TEST_CASE("regex: bounded work on patterns that backtrack exponentially", "[tokenizer][regex]") {
  const std::string as(40, 'a');
  CHECK(matches("(a|a)*b", as).empty());
  CHECK(matches("(?:a+)+b", as).empty());
  CHECK(found("(?:a|aa)+c|a", as + "c") == Strings{as + "c"});
  CHECK(found("(?:a|aa)+(?=b)|x", as) == Strings{});
}

TEST_CASE("regex: constructs outside the subset are refused, naming them", "[tokenizer][regex]") {
  using Catch::Contains;
  CHECK_THAT(regex_error("(?<=a)b"), Contains("'(?<='") && Contains("lookbehind") && Contains("offset 0"));
  CHECK_THAT(regex_error("x(?<!a)"), Contains("'(?<!'") && Contains("offset 1"));
  CHECK_THAT(regex_error("\\w+"), Contains("'\\w'") && Contains("word characters"));
  CHECK_THAT(regex_error("\\bx"), Contains("'\\b'") && Contains("word boundaries"));
  CHECK_THAT(regex_error("(a)\\1"), Contains("'\\1'") && Contains("backreferences"));
  CHECK_THAT(regex_error("[[:alpha:]]"), Contains("POSIX"));
  CHECK_THAT(regex_error("[a&&b]"), Contains("intersection"));
  CHECK_THAT(regex_error("\\p{Han}"), Contains("'\\p{Han}'") && Contains("general categories"));
  CHECK_THAT(regex_error("\\pL"), Contains("braces"));
  CHECK_THAT(regex_error("(?i:[a-z])"), Contains("inside (?i)"));
  CHECK_THAT(regex_error("(?i)\\p{L}"), Contains("inside (?i)"));
  CHECK_THAT(regex_error("(?m:a.b)"), Contains("option"));
  CHECK_THAT(regex_error("(a*)*"), Contains("empty string"));
  CHECK_THAT(regex_error("(?:a|)+"), Contains("empty string"));
  CHECK_THAT(regex_error("(?:a|$)?"), Contains("assertion"));
  CHECK_THAT(regex_error("a{2}+"), Contains("quantifier after a quantifier"));
  CHECK_THAT(regex_error("a**"), Contains("quantifier after a quantifier"));
  CHECK_THAT(regex_error("a{x}"), Contains("'{'"));
  CHECK_THAT(regex_error("x{2,1}"), Contains("n > m"));
  CHECK_THAT(regex_error("a{100001}"), Contains("above 100000"));
  CHECK_THAT(regex_error("(?:a{1000}){1000}"), Contains("too large"));
  CHECK_THAT(regex_error("(ab"), Contains("missing ')'") && Contains("offset 0"));
  CHECK_THAT(regex_error("ab)"), Contains("unmatched ')'") && Contains("offset 2"));
  CHECK_THAT(regex_error("[ab"), Contains("missing ']'"));
  CHECK_THAT(regex_error("*a"), Contains("nothing to repeat"));
  CHECK_THAT(regex_error("\\x{110000}"), Contains("scalar value"));
  CHECK_THAT(regex_error(std::string(70, '(') + std::string(70, ')')), Contains("nested deeper"));
  CHECK_THAT(regex_error("a\xFF"), Contains("not valid UTF-8"));
}

TEST_CASE("Split: the five behaviours and invert", "[tokenizer][regex]") {
  const Regex dash = Regex::literal("-");
  const std::string text = "the-final--countdown";
  CHECK(split(dash, SplitBehavior::kRemoved, false, text) == Strings{"the", "final", "countdown"});
  CHECK(split(dash, SplitBehavior::kIsolated, false, text) == Strings{"the", "-", "final", "-", "-", "countdown"});
  CHECK(split(dash, SplitBehavior::kMergedWithPrevious, false, text) == Strings{"the-", "final-", "-", "countdown"});
  CHECK(split(dash, SplitBehavior::kMergedWithNext, false, text) == Strings{"the", "-final", "-", "-countdown"});
  CHECK(split(dash, SplitBehavior::kContiguous, false, text) == Strings{"the", "-", "final", "--", "countdown"});
  // invert: the text between the dashes is what matches.
  CHECK(split(dash, SplitBehavior::kRemoved, true, text) == Strings{"-", "-", "-"});
  CHECK(split(dash, SplitBehavior::kMergedWithPrevious, true, text) == Strings{"the", "-final", "-", "-countdown"});
  CHECK(split(dash, SplitBehavior::kMergedWithNext, true, text) == Strings{"the-", "final-", "-", "countdown"});
  CHECK(split(dash, SplitBehavior::kContiguous, true, text) == Strings{"the", "-", "final", "--", "countdown"});
  CHECK(split(Regex("\\s+"), SplitBehavior::kRemoved, false, "  a b  ") == Strings{"a", "b"});
  CHECK(split(Regex("\\p{N}"), SplitBehavior::kContiguous, false, "a123b4") == Strings{"a", "123", "b", "4"});
  CHECK(split(Regex("a*"), SplitBehavior::kIsolated, false, "bb") == Strings{"b", "b"});  // empty matches cut too
  CHECK(split(dash, SplitBehavior::kIsolated, false, "").empty());
}

TEST_CASE("NFC and NFD: decomposition, canonical order, composition", "[tokenizer][nfc]") {
  const auto nfc = [](const std::string& s) { return tmm::text::detail::normalize(s, NormalForm::kNFC); };
  const auto nfd = [](const std::string& s) { return tmm::text::detail::normalize(s, NormalForm::kNFD); };
  CHECK(nfc("e\xCC\x81") == "\xC3\xA9");                  // e + U+0301 -> U+00E9
  CHECK(nfd("\xC3\xA9") == "e\xCC\x81");
  CHECK(nfc("plain ASCII") == "plain ASCII");
  CHECK(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // Hangul L V T -> U+AC01
  CHECK(nfd("\xEA\xB0\x81") == "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");
  // U+0323 (class 220) sorts before U+0307 (230); then s + U+0323 + U+0307 composes to U+1E69.
  CHECK(nfc("s\xCC\x87\xCC\xA3") == "\xE1\xB9\xA9");
  CHECK(nfd("\xE1\xB9\xA9") == "s\xCC\xA3\xCC\x87");
  CHECK(nfc("\xE2\x84\xAB") == "\xC3\x85");  // U+212B ANGSTROM SIGN: a singleton, -> U+00C5
  CHECK(nfc("\xE0\xBD\xB3") == "\xE0\xBD\xB1\xE0\xBD\xB2");  // U+0F73: excluded from composition
  // A second of class 0: Sinhala U+0DD9 + U+0DCF -> U+0DDC.
  CHECK(nfc("\xE0\xB7\x99\xE0\xB7\x8F") == "\xE0\xB7\x9C");
  // U+11A7 is no trailing consonant: an LV syllable keeps it (utf8proc 2.8 merged it away).
  CHECK(nfc("\xEA\xB0\x80\xE1\x86\xA7") == "\xEA\xB0\x80\xE1\x86\xA7");
  CHECK(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA7") == "\xEA\xB0\x80\xE1\x86\xA7");
  // A mark blocked by another of the same class stays apart.
  CHECK(nfc("a\xCC\x81\xCC\x81") == "\xC3\xA1\xCC\x81");
  // Ill-formed bytes are kept and compose with nothing.
  CHECK(nfc("e\xFF\xCC\x81") == "e\xFF\xCC\x81");
  CHECK(nfc("e\xCC\x81\xFF" "e\xCC\x81") == "\xC3\xA9\xFF\xC3\xA9");
  CHECK(nfc("").empty());
}
