// The regular expressions of tokenizer.json's Split pre-tokenizer, matched
// as the Rust `tokenizers` library matches them (Oniguruma, Ruby syntax):
// leftmost match, first alternative first, backtracking, over code points.
//
// The supported subset (what GPT-NeoX-, Llama-3-, Qwen- and GPT-4o-style
// patterns use; docs/tokenizers.md lists it): literals and escapes (\t \n \r
// \f \v \a \e \xHH \x{H..} \uHHHH \0oo, escaped punctuation); `.`; classes
// [...] and [^...] with ranges; \s \S \d \D \h \H; \p{..} \P{..} \p{^..} for
// general categories; groups (...), (?:...), (?<name>...); (?i:...) (?-i:...)
// and the isolated (?i) (?-i); lookahead (?=...) (?!...); atomic groups
// (?>...); quantifiers * + ? {n} {n,} {n,m} {,m}, lazy (?) and possessive
// (+, after * + ?); anchors ^ $ \A \z \Z; alternation. Case-insensitive
// literals use full case folding (so (?i:ss) matches U+00DF, as in
// Oniguruma); classes and \p inside (?i) are refused. Anything else (e.g.
// lookbehind, backreferences, \w, \b, POSIX brackets, a repetition of
// something that can match the empty string) is refused with the construct
// and its offset. An ill-formed UTF-8 unit in the text matches as U+FFFD.
//
// Matching never recurses on the text and never takes exponential time: a
// plain backtracking run that exceeds a work budget is redone with a memo of
// the (instruction, position) states already tried, which bounds it.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace tmm::text::detail {

struct RegexProgram;

class Regex {
 public:
  // Throws std::invalid_argument "<what is wrong> at offset <byte> of the
  // pattern" for a syntax error or a construct outside the subset.
  explicit Regex(std::string_view pattern);
  // The pattern that matches `text` literally (Split's {"String": ...}).
  static Regex literal(std::string_view text);

  // Appends the [begin, end) byte offsets of the matches in `text`, as
  // Oniguruma's find_iter (Rust crate `onig`) gives them: each search starts
  // where the previous match ended, and an empty match right at the end of
  // the previous one is skipped by moving one character on. Thread-safe.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  Regex() = default;
  std::shared_ptr<const RegexProgram> program_;
};

}  // namespace tmm::text::detail
