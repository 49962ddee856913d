// The compiled form of a Regex (regex.h): a backtracking program over code
// points, shared by regex_compile.cpp (which writes it) and regex_match.cpp
// (which runs it).
//
// A program is a list of sub-programs: [0] is the pattern, the others the
// bodies of lookaheads and atomic groups, each ending in kMatch. A kSplit
// tries `x` first and `y` on backtracking, which is how alternatives and
// greedy or lazy repetitions are ordered.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tmm::text::detail {

// A set of code points: sorted, disjoint, inclusive ranges and, for speed,
// the ASCII members as a bitmap.
struct CharSet {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  uint64_t ascii[2] = {0, 0};

  bool contains(char32_t cp) const;
  // Sorts and merges `ranges` (which may overlap) and fills the bitmap.
  void finish();
  // The complement within U+0000..U+10FFFF (after finish()).
  CharSet complement() const;
};

enum class Assertion : uint8_t {
  kTextStart,         // \A
  kTextEnd,           // \z
  kTextEndNewline,    // \Z: the end, or before a newline that ends the text
  kLineStart,         // ^: the start, or after a newline that does not end the text
  kLineEnd,           // $: the end, or before a newline
};

enum class Op : uint8_t {
  kChar,    // the code point x
  kFold,    // case-insensitive: the text's case folding equals folds[x]
  kSet,     // a code point in sets[x]
  kAny,     // any code point but '\n' (Oniguruma's '.')
  kSplit,   // go to x; on backtracking, to y
  kJmp,     // go to x
  kAssert,  // the Assertion `arg` holds here
  kLook,    // sub-program x matches here (arg 0) or does not (arg 1); consumes nothing
  kAtomic,  // sub-program x's first match from here, without backtracking into it
  kMatch,
};

struct Inst {
  Op op;
  uint8_t arg = 0;
  uint32_t x = 0, y = 0;
};

struct RegexProgram {
  std::vector<std::vector<Inst>> subs;
  std::vector<CharSet> sets;
  std::vector<std::vector<char32_t>> folds;  // case-folded literal runs
  size_t size = 0;                           // instructions in all sub-programs
};

// regex_compile.cpp: throws std::invalid_argument as Regex's constructor.
RegexProgram compile_regex(std::string_view pattern);
RegexProgram compile_literal(std::string_view text);

}  // namespace tmm::text::detail
