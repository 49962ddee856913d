#include "text/normalize.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "text/normalization_tables.h"
#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

// Hangul syllables compose and decompose by formula (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClassRange* r = find_range(kCombiningClassRanges, cp);
  return r ? r->ccc : 0;
}

// Whether a text holding cp may change under `form` (the quick check).
bool may_change(char32_t cp, NormalForm form) {
  if (cp < 0xC0) return false;
  const NormalizationCheckRange* r = find_range(kNormalizationCheckRanges, cp);
  return r && (r->flags & (form == NormalForm::kNFC ? 1 : 2));
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = std::end(kDecompositions);
  const auto* it = std::lower_bound(std::begin(kDecompositions), end, cp,
                                    [](const Decomposition& d, char32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kDecompositionPool + it->offset, kDecompositionPool + it->offset + it->length);
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* end = std::end(kCompositions);
  const auto* it = std::lower_bound(std::begin(kCompositions), end, std::make_pair(a, b),
                                    [](const Composition& c, const std::pair<char32_t, char32_t>& key) {
                                      return c.first != key.first ? c.first < key.first : c.second < key.second;
                                    });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Canonical ordering: each run of non-starters sorted, stably, by class.
void reorder(std::vector<char32_t>& cps) {
  std::vector<std::pair<uint8_t, char32_t>> run;
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    run.clear();
    for (; j < cps.size(); ++j) {
      const uint8_t ccc = combining_class(cps[j]);
      if (ccc == 0) break;
      run.emplace_back(ccc, cps[j]);
    }
    std::stable_sort(run.begin(), run.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t k = 0; k < run.size(); ++k) cps[i + k] = run[k].second;
    i = j;
  }
}

// Canonical composition, in place: each character that is not blocked from
// the last starter (nothing between them, or only marks of a lower class)
// and forms a primary composite with it is merged into it.
void compose_all(std::vector<char32_t>& cps) {
  size_t out = 0;
  int64_t starter = -1;  // index in the output
  int last_ccc = -1;     // class of the last character after the starter; -1: none
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const int ccc = combining_class(c);
    if (starter >= 0 && (last_ccc == -1 || (last_ccc != 0 && last_ccc < ccc))) {
      if (const char32_t composite = compose(cps[size_t(starter)], c)) {
        cps[size_t(starter)] = composite;
        continue;
      }
    }
    if (ccc == 0) starter = int64_t(out), last_ccc = -1;
    else last_ccc = ccc;
    cps[out++] = c;
  }
  cps.resize(out);
}

void normalize_well_formed(std::string_view text, NormalForm form, std::vector<char32_t>& cps, std::string& out) {
  cps.clear();
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_utf8(text, i);
    decompose(d.cp, cps);
    i += d.len;
  }
  reorder(cps);
  if (form == NormalForm::kNFC) compose_all(cps);
  for (const char32_t cp : cps) append_utf8(out, cp);
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  bool unchanged = true;
  for (size_t i = 0; i < text.size() && unchanged;) {
    const Decoded d = decode_utf8(text, i);
    unchanged = d.cp == kInvalid || !may_change(d.cp, form);
    i += d.len;
  }
  if (unchanged) return std::string(text);

  std::string out;
  out.reserve(text.size() + text.size() / 4);
  std::vector<char32_t> cps;
  size_t begin = 0;  // of the well-formed run being collected
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_utf8(text, i);
    if (d.cp == kInvalid) {
      normalize_well_formed(text.substr(begin, i - begin), form, cps, out);
      out.append(text.substr(i, d.len));
      begin = i + d.len;
    }
    i += d.len;
  }
  normalize_well_formed(text.substr(begin), form, cps, out);
  return out;
}

}  // namespace tmm::text::detail
