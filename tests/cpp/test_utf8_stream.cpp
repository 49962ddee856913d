// tmm::cli::Utf8Stream (csrc/cli/utf8_stream.h), which `tmm generate` uses
// to print tokens as they come: a character split across tokens is held back
// until it is complete, and what comes out in the end is the lossy UTF-8
// decoding of all the bytes (Python's bytes.decode("utf-8", "replace")),
// however the bytes were cut.
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/utf8_stream.h"
#include "text/unicode.h"

using tmm::cli::Utf8Stream;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Everything the stream prints for `bytes` cut at `cuts` (sorted offsets).
std::string stream(const std::string& bytes, const std::vector<size_t>& cuts, std::vector<std::string>* pushed = nullptr) {
  Utf8Stream s;
  std::string out;
  size_t begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t end = i < cuts.size() ? cuts[i] : bytes.size();
    const std::string chunk = s.push(bytes.substr(begin, end - begin));
    if (pushed) pushed->push_back(chunk);
    out += chunk;
    begin = end;
  }
  return out + s.finish();
}

}  // namespace

TEST_CASE("utf8 stream: a character split across tokens is held back until complete", "[cli][utf8]") {
  for (const std::string ch : {"\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80"}) {  // é, 你, 😀
    INFO("character of " << ch.size() << " bytes");
    for (size_t cut = 1; cut < ch.size(); ++cut) {
      Utf8Stream s;
      CHECK(s.push("a" + ch.substr(0, cut)) == "a");  // the lead bytes wait
      CHECK(s.push(ch.substr(cut)) == ch);            // the rest completes it
      CHECK(s.finish().empty());
    }
    // One byte per token.
    Utf8Stream s;
    for (size_t i = 0; i + 1 < ch.size(); ++i) CHECK(s.push(ch.substr(i, 1)).empty());
    CHECK(s.push(ch.substr(ch.size() - 1)) == ch);
    CHECK(s.finish().empty());
  }
}

TEST_CASE("utf8 stream: bytes that can never form a character become U+FFFD at once", "[cli][utf8]") {
  Utf8Stream s;
  CHECK(s.push("\xFF") == kFffd);                      // never a lead byte
  CHECK(s.push("\x80x") == kFffd + "x");               // a stray continuation byte
  CHECK(s.push("\xE4\xBD").empty());                  // a valid prefix waits...
  CHECK(s.push("y") == kFffd + "y");                   // ...and is one U+FFFD when cut off
  CHECK(s.push("\xED\xA0\x80") == kFffd + kFffd + kFffd);  // a surrogate: three, as Python
  CHECK(s.push("\xC0\xAF") == kFffd + kFffd);          // an overlong form
  CHECK(s.push("\xF0\x9F").empty());
  CHECK(s.finish() == kFffd);                          // an incomplete character at the end
  CHECK(s.finish().empty());
}

TEST_CASE("utf8 stream: any cut of any bytes prints their lossy decoding", "[cli][utf8]") {
  std::mt19937 rng(7);
  const std::vector<std::string> parts = {"a", " ", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\xFF",
                                          "\x80", "\xE4\xBD", "\xF0\x9F", "\xED\xA0\x80", "\xC3", "\n"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    for (int i = int(rng() % 12); i > 0; --i) bytes += parts[rng() % parts.size()];
    std::vector<size_t> cuts;
    for (size_t i = 1; i < bytes.size(); ++i)
      if (rng() % 3 == 0) cuts.push_back(i);
    std::vector<std::string> pushed;
    const std::string out = stream(bytes, cuts, &pushed);
    INFO("trial " << trial);
    CHECK(out == tmm::text::detail::to_valid_utf8(bytes));
    for (const std::string& chunk : pushed) CHECK(tmm::text::detail::to_valid_utf8(chunk) == chunk);
  }
}
