// The byte <-> character table of byte-level BPE (GPT-2's bytes_to_unicode):
// each byte is written as a printable code point so that vocabulary entries
// and merges are text. Printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100.. in byte order (0x20, the space, becomes U+0120 'Ġ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tmm::text::detail {

// The UTF-8 text of the character standing for byte b.
const std::string& byte_char(uint8_t b);

// The byte a character stands for, or -1 when it stands for none.
int char_byte(char32_t cp);

// A vocabulary token's bytes as the ByteLevel decoder gives them: the bytes
// its characters stand for when all of them stand for one, else the token's
// own UTF-8 (added tokens such as "<|endoftext|> " with a plain space).
std::string token_to_bytes(std::string_view token);

}  // namespace tmm::text::detail
