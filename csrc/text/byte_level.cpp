#include "text/byte_level.h"

#include <array>

#include "text/unicode.h"

namespace tmm::text::detail {
namespace {

struct Tables {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes;  // code point -> byte; the table's code points are < 512

  Tables() {
    bytes.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? char32_t(b) : next++;
      append_utf8(chars[b], cp);
      bytes[cp] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_char(uint8_t b) { return tables().chars[b]; }

int char_byte(char32_t cp) { return cp < 512 ? tables().bytes[cp] : -1; }

std::string token_to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const Decoded d = decode_utf8(token, i);
    const int b = d.cp == kInvalid ? -1 : char_byte(d.cp);
    if (b < 0) return std::string(token);
    out += char(b);
    i += d.len;
  }
  return out;
}

}  // namespace tmm::text::detail
