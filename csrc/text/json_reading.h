// Reading tokenizer.json values with errors that name the key, what was
// expected and what was found (values cut at about 80 bytes). Every error is
// std::invalid_argument "<key>: <what is wrong>".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tmm::text::detail {

using nlohmann::json;

// A value for an error message: its JSON, cut at 80 bytes on a character boundary.
std::string show(const json& v);

[[noreturn]] void fail(const std::string& key, const std::string& what);
[[noreturn]] void expected(const std::string& key, const std::string& what, const json& found);

// obj[key], or nullptr when obj has no such member.
const json* member(const json& obj, const char* key);
bool is_null(const json* v);

// obj[key] as a bool (`path` names obj); `fallback` when absent or null.
bool get_bool(const json& obj, const char* key, const std::string& path, bool fallback);
// A token id: an integer in [0, 2^32).
uint32_t get_id(const json& v, const std::string& key);
// v["type"], requiring v to be an object with a string type.
const std::string& type_of(const json& v, const std::string& key);

}  // namespace tmm::text::detail
