#include "text/unicode.h"

#include <algorithm>

#include "text/unicode_properties.h"
#include "text/unicode_tables.h"

namespace tmm::text::detail {

CharClass char_class(char32_t cp) {
  if (cp < 0x80) {  // the common case, without the search
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::kSpace;
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    return CharClass::kOther;
  }
  const CodePointRange* r = find_range(kCodePointRanges, cp);
  return r ? static_cast<CharClass>(r->cls) : CharClass::kOther;
}

GeneralCategory general_category(char32_t cp) {
  const CategoryRange* r = find_range(kCategoryRanges, cp);
  return r ? static_cast<GeneralCategory>(r->category) : GeneralCategory::kCn;
}

std::vector<std::pair<char32_t, char32_t>> class_ranges(CharClass cls) {
  std::vector<std::pair<char32_t, char32_t>> out;
  for (const CodePointRange& r : kCodePointRanges)
    if (r.cls == static_cast<uint8_t>(cls)) out.emplace_back(r.first, r.last);
  return out;
}

std::vector<std::pair<char32_t, char32_t>> category_ranges(GeneralCategory category) {
  std::vector<std::pair<char32_t, char32_t>> out;
  if (category != GeneralCategory::kCn) {
    for (const CategoryRange& r : kCategoryRanges)
      if (r.category == static_cast<uint8_t>(category)) out.emplace_back(r.first, r.last);
    return out;
  }
  char32_t next = 0;  // unassigned: the gaps between the ranges
  for (const CategoryRange& r : kCategoryRanges) {
    if (r.first > next) out.emplace_back(next, r.first - 1);
    next = r.last + 1;
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}

int case_fold(char32_t cp, char32_t out[3]) {
  const auto* end = std::end(kCaseFoldings);
  const auto* it = std::lower_bound(std::begin(kCaseFoldings), end, cp,
                                    [](const CaseFolding& f, char32_t c) { return f.cp < c; });
  if (it == end || it->cp != cp) {
    out[0] = cp;
    return 1;
  }
  for (int i = 0; i < it->length; ++i) out[i] = it->folded[i];
  return it->length;
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
