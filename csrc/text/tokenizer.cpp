#include "tmm/text/tokenizer.h"

#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "text/normalize.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace tmm::text {

using detail::TokenizerImpl;

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::byte_level() {
  static const auto impl = [] {
    auto p = std::make_shared<TokenizerImpl>();
    p->byte_level = true;
    p->vocab_size = 256;
    return p;
  }();
  return Tokenizer(impl);
}

namespace {

// Messages quote the input, which may not be UTF-8; Python needs them valid.
std::string message(const std::string& where, const char* what) {
  return detail::to_valid_utf8(where + ": " + what);
}

}  // namespace

Tokenizer Tokenizer::from_json_text(const std::string& text) {
  try {
    return Tokenizer(detail::parse_tokenizer_json(text));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(message("tokenizer.json", e.what()));
  }
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(message("tokenizer file '" + path + "'", "cannot be opened for reading"));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw std::runtime_error(message("tokenizer file '" + path + "'", "read error"));
  try {
    return Tokenizer(detail::parse_tokenizer_json(text));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(message("tokenizer file '" + path + "'", e.what()));
  }
}

namespace {

// The Rust library's pipeline, up to the model: added tokens with
// "normalized": false found on the raw text; each part between them
// normalized; added tokens with "normalized": true found on that; what is
// left pre-tokenized. Calls token(id, text) for each added token and
// piece(bytes) for each piece for the model, in order.
void visit(const TokenizerImpl& impl, std::string_view text,
           const std::function<void(int64_t, std::string_view)>& token,
           const std::function<void(std::string_view)>& piece) {
  if (text.empty()) return;
  const auto pre_tokenize = [&](std::string_view part) {
    if (impl.normalizers.empty() && !impl.added->has_normalized()) return impl.pre_tokenizer.run(part, piece);
    std::string normalized(part);
    for (const detail::NormalForm form : impl.normalizers) normalized = detail::normalize(normalized, form);
    for (const detail::Segment& s : impl.added->split(normalized, true)) {
      const std::string_view sub = std::string_view(normalized).substr(s.begin, s.end - s.begin);
      if (s.id >= 0) token(s.id, sub);
      else impl.pre_tokenizer.run(sub, piece);
    }
  };
  for (const detail::Segment& s : impl.added->split(text, false)) {
    const std::string_view part = text.substr(s.begin, s.end - s.begin);
    if (s.id >= 0) token(s.id, part);
    else pre_tokenize(part);
  }
}

}  // namespace

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int64_t> out;
  if (impl_->byte_level) {
    out.reserve(text.size());
    for (const char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  }
  if (add_special_tokens) out = impl_->prefix_ids;
  out.reserve(out.size() + text.size() / 3 + impl_->suffix_ids.size());
  visit(
      *impl_, text, [&](int64_t id, std::string_view) { out.push_back(id); },
      [&](std::string_view piece) { impl_->bpe->encode_piece(piece, out); });
  if (add_special_tokens) out.insert(out.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
  return out;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::string> out;
  if (impl_->byte_level) {
    if (!text.empty()) out.emplace_back(text);
    return out;
  }
  visit(
      *impl_, text, [&](int64_t, std::string_view token) { out.emplace_back(token); },
      [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

std::string Tokenizer::token_bytes(int64_t id) const {
  if (id < 0 || id >= impl_->vocab_size)
    throw std::out_of_range("token id " + std::to_string(id) + " is out of range for a vocabulary of " +
                            std::to_string(impl_->vocab_size) + " ids");
  if (impl_->byte_level) return std::string(1, char(id));
  const auto it = impl_->id_bytes.find(id);
  if (it == impl_->id_bytes.end())
    throw std::out_of_range("token id " + std::to_string(id) + " has no token (the vocabulary of " +
                            std::to_string(impl_->vocab_size) + " ids has gaps)");
  return it->second;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  bytes.reserve(ids.size() * (impl_->byte_level ? 1 : 4));
  for (const int64_t id : ids) {
    if (impl_->byte_level && id >= 0 && id < 256) bytes += char(id);
    else bytes += token_bytes(id);  // checks the range
  }
  return detail::to_valid_utf8(bytes);
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int64_t> Tokenizer::token_to_id(const std::string& token) const {
  if (impl_->byte_level) {
    if (token.size() == 1) return static_cast<unsigned char>(token[0]);
    return std::nullopt;
  }
  if (const auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  if (const auto it = impl_->bpe->vocab().find(token); it != impl_->bpe->vocab().end()) return int64_t(it->second);
  return std::nullopt;
}

std::string Tokenizer::kind() const { return impl_->byte_level ? "byte" : "bpe"; }

}  // namespace tmm::text
