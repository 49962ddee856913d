#include "text/json_reading.h"

#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tmm::text::detail {

std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() <= 80) return s;
  size_t cut = 77;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

void fail(const std::string& key, const std::string& what) { throw std::invalid_argument(key + ": " + what); }

void expected(const std::string& key, const std::string& what, const json& found) {
  fail(key, "expected " + what + ", found " + show(found));
}

const json* member(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool is_null(const json* v) { return v == nullptr || v->is_null(); }

bool get_bool(const json& obj, const char* key, const std::string& path, bool fallback) {
  const json* v = member(obj, key);
  if (is_null(v)) return fallback;
  if (!v->is_boolean()) expected(path + "." + key, "true or false", *v);
  return v->get<bool>();
}

uint32_t get_id(const json& v, const std::string& key) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0) ||
      v.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
    expected(key, "an id (an integer in [0, 2^32))", v);
  return uint32_t(v.get<uint64_t>());
}

const std::string& type_of(const json& v, const std::string& key) {
  if (!v.is_object()) expected(key, "an object", v);
  const json* t = member(v, "type");
  if (t == nullptr || !t->is_string()) expected(key + ".type", "a string", t ? *t : json());
  return t->get_ref<const std::string&>();
}

}  // namespace tmm::text::detail
