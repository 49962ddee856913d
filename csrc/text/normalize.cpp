#include "text/normalize.h"

#include <utf8proc.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

using CodePoints = std::vector<utf8proc_int32_t>;

uint8_t combining_class(utf8proc_int32_t cp) { return uint8_t(utf8proc_get_property(cp)->combining_class); }

[[noreturn]] void fail(const char* step, utf8proc_ssize_t code) {
  throw std::logic_error(std::string("normalize: utf8proc's ") + step + " failed: " + utf8proc_errmsg(code));
}

// Appends the full canonical decomposition of cp (Hangul syllables included).
void decompose(utf8proc_int32_t cp, CodePoints& out) {
  const size_t at = out.size();
  int boundclass = 0;  // read only with UTF8PROC_CHARBOUND
  out.resize(at + 4);  // the longest canonical decomposition
  utf8proc_ssize_t n = utf8proc_decompose_char(cp, out.data() + at, 4, UTF8PROC_DECOMPOSE, &boundclass);
  if (n > 4) {  // a longer one in a later Unicode: the call says how long
    out.resize(at + size_t(n));
    n = utf8proc_decompose_char(cp, out.data() + at, n, UTF8PROC_DECOMPOSE, &boundclass);
  }
  if (n < 0) fail("decomposition", n);
  out.resize(at + size_t(n));
}

// Which code points a normal form may change, computed once from utf8proc's
// data, so that text already in the form is returned without work: for NFD
// those that decompose, for NFC those NFC does not keep alone and those that
// may combine with a character before them (they appear after the first
// place of some canonical decomposition); for both those of a non-zero
// combining class (they may be reordered).
class QuickCheck {
 public:
  QuickCheck() : nfd_(kWords), nfc_(kWords) {
    CodePoints d;
    for (utf8proc_int32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      if (combining_class(cp) != 0) set(nfd_, cp), set(nfc_, cp);
      d.clear();
      decompose(cp, d);
      if (d.size() == 1 && d[0] == cp) continue;
      set(nfd_, cp);
      for (size_t i = 1; i < d.size(); ++i) set(nfc_, d[i]);
      const utf8proc_ssize_t n = utf8proc_normalize_utf32(d.data(), utf8proc_ssize_t(d.size()),
                                                          utf8proc_option_t(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
      if (n != 1 || d[0] != cp) set(nfc_, cp);
    }
  }

  bool may_change(char32_t cp, NormalForm form) const {
    const std::vector<uint64_t>& bits = form == NormalForm::kNFC ? nfc_ : nfd_;
    return (bits[cp >> 6] >> (cp & 63)) & 1;
  }

 private:
  static constexpr size_t kWords = 0x110000 / 64;
  static void set(std::vector<uint64_t>& bits, utf8proc_int32_t cp) { bits[size_t(cp) >> 6] |= uint64_t(1) << (cp & 63); }

  std::vector<uint64_t> nfd_, nfc_;
};

bool may_change(char32_t cp, NormalForm form) {
  static const QuickCheck check;
  return cp >= 0xC0 && check.may_change(cp, form);  // none below U+00C0 (ASCII, Latin-1 symbols)
}

// Canonical ordering: each run of non-starters sorted, stably, by class.
// (utf8proc_decompose orders by swapping neighbours, quadratic in the length
// of a run of marks; the text may be anyone's.)
void reorder(CodePoints& cps) {
  std::vector<std::pair<uint8_t, utf8proc_int32_t>> run;
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

// Canonical composition, in place. utf8proc up to 2.9.0 merges U+11A7 into a
// preceding LV syllable as if it were a trailing consonant, losing it
// (upstream #317); U+11A7 composes with nothing before it, so the text is
// composed in pieces, each cut before one.
void compose(CodePoints& cps) {
  size_t out = 0;
  for (size_t begin = 0; begin < cps.size();) {
    size_t end = begin + 1;
    while (end < cps.size() && cps[end] != 0x11A7) ++end;
    const utf8proc_ssize_t n = utf8proc_normalize_utf32(cps.data() + begin, utf8proc_ssize_t(end - begin),
                                                        utf8proc_option_t(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
    if (n < 0) fail("composition", n);
    if (out != begin) std::copy(cps.begin() + begin, cps.begin() + begin + n, cps.begin() + out);
    out += size_t(n);
    begin = end;
  }
  cps.resize(out);
}

void normalize_well_formed(std::string_view text, NormalForm form, CodePoints& cps, std::string& out) {
  cps.clear();
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_utf8(text, i);
    decompose(utf8proc_int32_t(d.cp), cps);
    i += d.len;
  }
  reorder(cps);
  if (form == NormalForm::kNFC) compose(cps);
  for (const utf8proc_int32_t cp : cps) append_utf8(out, char32_t(cp));
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
  CodePoints cps;
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
