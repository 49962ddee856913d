// UTF-8, code point classes and properties for the tokenizers (torch-free).
// The Unicode data (general categories, case folding) is utf8proc's
// (unicode.cpp), linked statically.
//
// Input text is any byte string: well-formed UTF-8 decodes to code points, and
// each maximal ill-formed subpart (Unicode's "maximal subpart" rule, as in
// Python's and Rust's lossy decoders) is one unit of class "other". Nothing
// here fails on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmm::text::detail {

enum class CharClass : uint8_t { kOther, kLetter, kNumber, kSpace };

// The class of a code point: \p{L}, \p{N}, \s (Oniguruma's: U+0009..U+000D,
// U+0085 and the categories Zs, Zl, Zp, which is also Rust's
// char::is_whitespace) or other.
CharClass char_class(char32_t cp);

// General categories, numbered as utf8proc_category_t (Cn, unassigned, is 0).
enum class GeneralCategory : uint8_t {
  kCn, kLu, kLl, kLt, kLm, kLo, kMn, kMc, kMe, kNd, kNl, kNo, kPc, kPd, kPs, kPe, kPi,
  kPf, kPo, kSm, kSc, kSk, kSo, kZs, kZl, kZp, kCc, kCf, kCs, kCo
};
inline constexpr int kGeneralCategories = 30;

GeneralCategory general_category(char32_t cp);

// The full case folding of cp (Unicode's CaseFolding.txt, C and F: e.g. 'A'
// -> 'a', U+00DF -> "ss"): writes 1 to 3 code points to `out`, returns how many.
int case_fold(char32_t cp, char32_t out[3]);

// The code points of a class or a category as sorted, disjoint, inclusive
// ranges (for the regex's character sets).
std::vector<std::pair<char32_t, char32_t>> class_ranges(CharClass cls);
std::vector<std::pair<char32_t, char32_t>> category_ranges(GeneralCategory category);

// Not a code point: marks an ill-formed unit.
inline constexpr char32_t kInvalid = 0xFFFFFFFF;

struct Decoded {
  char32_t cp;  // kInvalid for an ill-formed subpart
  size_t len;   // bytes consumed, >= 1
};

// The unit starting at s[i] (i < s.size()).
Decoded decode_utf8(std::string_view s, size_t i);

// The class of the unit starting at s[i]; ill-formed units are kOther.
inline CharClass class_at(std::string_view s, size_t i, size_t* len) {
  const Decoded d = decode_utf8(s, i);
  *len = d.len;
  return d.cp == kInvalid ? CharClass::kOther : char_class(d.cp);
}

void append_utf8(std::string& out, char32_t cp);

// `bytes` with each maximal ill-formed subpart replaced by U+FFFD, as
// Python's bytes.decode("utf-8", "replace") and Rust's from_utf8_lossy do.
std::string to_valid_utf8(std::string_view bytes);

// `s` quoted for an error message, cut after about `max` bytes on a
// character boundary.
std::string excerpt(std::string_view s, size_t max = 60);

}  // namespace tmm::text::detail
