#include "cli/utf8_stream.h"

namespace tmm::cli {
namespace {

const char kReplacement[] = "\xEF\xBF\xBD";

struct Scan {
  int length;     // bytes of the character or of the ill-formed part
  bool valid;     // a whole character
  bool complete;  // false: a valid prefix cut off by the end of the buffer
};

// The character starting at s[i]. An ill-formed part is its longest valid
// prefix (at least one byte): one U+FFFD each, like Python's "replace".
Scan scan(const std::string& s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {1, true, true};
  int n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlong forms
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return {1, false, true};
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return {k, false, false};
    const auto c = static_cast<unsigned char>(s[i + k]);
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return {k, false, true};
  }
  return {n, true, true};
}

}  // namespace

std::string Utf8Stream::push(const std::string& bytes) {
  pending_ += bytes;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Scan c = scan(pending_, i);
    if (!c.complete) break;  // wait for the rest of the character
    if (c.valid) {
      out.append(pending_, i, c.length);
    } else {
      out += kReplacement;
    }
    i += c.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = pending_.empty() ? "" : kReplacement;
  pending_.clear();
  return out;
}

}  // namespace tmm::cli
