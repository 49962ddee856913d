// Streams raw token bytes as text: holds back a UTF-8 character split across
// tokens until it is complete, and writes U+FFFD for bytes that can never
// form one (as the tokenizer's decode does).
#pragma once

#include <string>

namespace tmm::cli {

class Utf8Stream {
 public:
  // Appends bytes; returns the text that is now complete.
  std::string push(const std::string& bytes);
  // Whatever is left at the end (an incomplete character becomes U+FFFD).
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace tmm::cli
