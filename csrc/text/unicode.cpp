#include "text/unicode.h"

#include <utf8proc.h>

#include <stdexcept>

namespace tmm::text::detail {
namespace {

// GeneralCategory numbers the categories as utf8proc does, so that one
// converts to the other as it is.
constexpr utf8proc_category_t kUtf8procCategories[kGeneralCategories] = {
    UTF8PROC_CATEGORY_CN, UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT, UTF8PROC_CATEGORY_LM,
    UTF8PROC_CATEGORY_LO, UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_MC, UTF8PROC_CATEGORY_ME, UTF8PROC_CATEGORY_ND,
    UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_NO, UTF8PROC_CATEGORY_PC, UTF8PROC_CATEGORY_PD, UTF8PROC_CATEGORY_PS,
    UTF8PROC_CATEGORY_PE, UTF8PROC_CATEGORY_PI, UTF8PROC_CATEGORY_PF, UTF8PROC_CATEGORY_PO, UTF8PROC_CATEGORY_SM,
    UTF8PROC_CATEGORY_SC, UTF8PROC_CATEGORY_SK, UTF8PROC_CATEGORY_SO, UTF8PROC_CATEGORY_ZS, UTF8PROC_CATEGORY_ZL,
    UTF8PROC_CATEGORY_ZP, UTF8PROC_CATEGORY_CC, UTF8PROC_CATEGORY_CF, UTF8PROC_CATEGORY_CS, UTF8PROC_CATEGORY_CO};
constexpr bool same_numbering() {
  for (int i = 0; i < kGeneralCategories; ++i)
    if (kUtf8procCategories[i] != i) return false;
  return true;
}
static_assert(same_numbering(), "GeneralCategory must number the categories as utf8proc_category_t");

CharClass class_of(GeneralCategory g) {
  using G = GeneralCategory;
  if (g >= G::kLu && g <= G::kLo) return CharClass::kLetter;
  if (g >= G::kNd && g <= G::kNo) return CharClass::kNumber;
  if (g >= G::kZs && g <= G::kZp) return CharClass::kSpace;
  return CharClass::kOther;
}

struct CategoryRun {
  char32_t first, last;
  GeneralCategory category;
};

// Every code point's category as maximal runs (about 3,300), computed once,
// for the regex's \p{..} and \s sets.
const std::vector<CategoryRun>& category_runs() {
  static const std::vector<CategoryRun> runs = [] {
    std::vector<CategoryRun> out;
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      const GeneralCategory g = general_category(cp);
      if (!out.empty() && out.back().category == g) out.back().last = cp;
      else out.push_back({cp, cp, g});
    }
    return out;
  }();
  return runs;
}

void append_range(std::vector<std::pair<char32_t, char32_t>>& out, char32_t first, char32_t last) {
  if (!out.empty() && out.back().second + 1 == first) out.back().second = last;
  else out.emplace_back(first, last);
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 0x80) {  // the common case, without a property lookup
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::kSpace;
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    return CharClass::kOther;
  }
  if (cp == 0x85) return CharClass::kSpace;  // NEXT LINE, a control (Cc) that \s matches
  return class_of(general_category(cp));
}

GeneralCategory general_category(char32_t cp) {
  // utf8proc gives Cn past U+10FFFF (kInvalid included).
  return static_cast<GeneralCategory>(utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
}

std::vector<std::pair<char32_t, char32_t>> class_ranges(CharClass cls) {
  std::vector<std::pair<char32_t, char32_t>> out;
  for (const CategoryRun& r : category_runs()) {
    if (r.category == GeneralCategory::kCc) {  // the one category whose class depends on the code point
      for (char32_t cp = r.first; cp <= r.last; ++cp)
        if (char_class(cp) == cls) append_range(out, cp, cp);
    } else if (class_of(r.category) == cls) {
      append_range(out, r.first, r.last);
    }
  }
  return out;
}

std::vector<std::pair<char32_t, char32_t>> category_ranges(GeneralCategory category) {
  std::vector<std::pair<char32_t, char32_t>> out;
  for (const CategoryRun& r : category_runs())
    if (r.category == category) out.emplace_back(r.first, r.last);
  return out;
}

int case_fold(char32_t cp, char32_t out[3]) {
  utf8proc_int32_t folded[3];
  int boundclass = 0;  // read only with UTF8PROC_CHARBOUND
  const utf8proc_ssize_t n =
      utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), folded, 3, UTF8PROC_CASEFOLD, &boundclass);
  if (n < 1) {  // not a code point: folds to itself
    out[0] = cp;
    return 1;
  }
  if (n > 3)
    throw std::logic_error("case_fold: utf8proc folds code point " + std::to_string(uint32_t(cp)) + " to " +
                           std::to_string(n) + " code points (CaseFolding.txt has at most 3)");
  for (utf8proc_ssize_t i = 0; i < n; ++i) out[i] = static_cast<char32_t>(folded[i]);
  return int(n);
}

Decoded decode_utf8(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned b0 = byte(i);
  if (b0 < 0x80) return {b0, 1};
  // Continuation bytes allowed after the lead: the first one's range excludes
  // overlong forms, surrogates and code points past U+10FFFF.
  size_t need;
  unsigned lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {kInvalid, 1};
  }
  size_t k = 1;
  for (size_t j = 0; j < need; ++j, ++k) {
    if (i + k >= s.size()) return {kInvalid, k};
    const unsigned b = byte(i + k);
    if (b < lo || b > hi) return {kInvalid, k};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80, hi = 0xBF;
  }
  return {cp, k};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Decoded d = decode_utf8(bytes, i);
    if (d.cp == kInvalid) append_utf8(out, 0xFFFD);
    else out.append(bytes.data() + i, d.len);
    i += d.len;
  }
  return out;
}

std::string excerpt(std::string_view s, size_t max) {
  if (s.size() <= max) return "'" + std::string(s) + "'";
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return "'" + std::string(s.substr(0, cut)) + "'... (" + std::to_string(s.size()) + " bytes)";
}

}  // namespace tmm::text::detail
