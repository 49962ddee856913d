// Validating reader of a model's JSON configuration: every key is read
// exactly once with its type checked; anything missing, mistyped,
// impossible or left unread is an error naming the key. A config lists its
// own keys once, for read_config and write_config: a callable (c, k) calling
// k("name", c.name) for each of them (an enum member is read and written by
// the names option_names(E) gives, option_names.h).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "models/option_names.h"
#include "tmm/models/config.h"

namespace tmm::models {

// Parses a config's JSON text; invalid JSON is a c10::Error naming `what`.
nlohmann::json parse_config_text(const std::string& text, const std::string& what);

class ConfigReader {
 public:
  // `text`: the config's JSON text, which must hold an object.
  ConfigReader(const std::string& text, std::string what)
      : config_(parse_config_text(text, what)), what_(std::move(what)) {
    TORCH_CHECK(config_.is_object(), what_, ": expected a JSON object, got ", config_.type_name());
  }

  // A key without a default: an error naming it when absent.
  void require(const std::string& key) const {
    TORCH_CHECK(config_.contains(key), what_, ": missing key \"", key, "\"");
  }

  template <class T>
  T required(const std::string& key) {
    require(key);
    return get<T>(key);
  }

  template <class T>
  T optional(const std::string& key, T fallback) {
    return config_.contains(key) ? get<T>(key) : fallback;
  }

  // An impossible value: `ok` false raises "<what>: key \"<key>\" <message>".
  void check(bool ok, const std::string& key, const std::string& message) const {
    TORCH_CHECK(ok, what_, ": key \"", key, "\" ", message);
  }

  // An integer below its least value: "... key \"<key>\" must be >= <least>, got <value>".
  void at_least(const std::string& key, int64_t value, int64_t least) const {
    check(value >= least, key, "must be >= " + std::to_string(least) + ", got " + std::to_string(value));
  }

  // One of the names in `names` (a string), as its enum value: an error
  // listing the names otherwise.
  template <class E, size_t N>
  E choice(const std::string& key, E fallback, const OptionName<E> (&names)[N]) {
    if (!config_.contains(key)) return fallback;
    const auto name = get<std::string>(key);
    for (const auto& n : names)
      if (name == n.name) return n.value;
    check(false, key, "must be " + option_list(names) + ", got \"" + name + "\"");
    return fallback;
  }

  // a * b, a size derived from `key`: an error naming the key when it
  // overflows int64 (a huge but valid-looking value must not wrap around).
  int64_t product(const std::string& key, int64_t a, int64_t b) const {
    int64_t p = 0;
    TORCH_CHECK(!__builtin_mul_overflow(a, b, &p), what_, ": key \"", key, "\" makes a size overflow: ", a, " * ", b,
                " does not fit in int64");
    return p;
  }

  // Every key of the object must have been read.
  void finish() const {
    for (const auto& item : config_.items())
      TORCH_CHECK(read_.count(item.key()), what_, ": unknown key \"", item.key(), "\"");
  }

 private:
  template <class T>
  T get(const std::string& key) {
    read_.insert(key);
    const nlohmann::json& v = config_.at(key);
    if constexpr (std::is_same_v<T, bool>) {
      TORCH_CHECK(v.is_boolean(), what_, ": key \"", key, "\" must be a boolean, got ", v.dump());
    } else if constexpr (std::is_integral_v<T>) {
      TORCH_CHECK(v.is_number_integer(), what_, ": key \"", key, "\" must be an integer, got ", v.dump());
    } else if constexpr (std::is_floating_point_v<T>) {
      TORCH_CHECK(v.is_number(), what_, ": key \"", key, "\" must be a number, got ", v.dump());
    } else if constexpr (std::is_same_v<T, std::string>) {
      TORCH_CHECK(v.is_string(), what_, ": key \"", key, "\" must be a string, got ", v.dump());
    } else {
      static_assert(std::is_same_v<T, std::vector<int64_t>>, "unsupported config type");
      TORCH_CHECK(v.is_array(), what_, ": key \"", key, "\" must be an array of integers, got ", v.dump());
      for (const auto& e : v)
        TORCH_CHECK(e.is_number_integer(), what_, ": key \"", key, "\" must be an array of integers, got ", v.dump());
    }
    return v.get<T>();
  }

  const nlohmann::json config_;
  std::string what_;
  std::set<std::string> read_;
};

// The keys every model's config has (CommonConfig): "arch" (must equal
// `arch`), then vocab_size, d_model, n_layers, max_len (required) and
// dropout, tie_embeddings (optional, c's values by default), each checked.
// Models differ only in the fewest layers they accept.
void read_common(ConfigReader& r, const std::string& arch, CommonConfig& c, int64_t min_layers = 0);

// The same keys, "arch" included, as a JSON object a model's to_json_text()
// adds its own keys to.
nlohmann::json write_common(const std::string& arch, const CommonConfig& c);

// "arch" (Config::kArch) and the common keys (read_common), then the keys
// `own` lists, each optional with the member's initial value as its default.
// The caller checks the values and calls r.finish().
template <class Config, class Keys>
Config read_config(ConfigReader& r, Keys own, int64_t min_layers = 0) {
  Config c;
  read_common(r, Config::kArch, c, min_layers);
  own(c, [&r](const char* key, auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_enum_v<T>)
      v = r.choice(key, v, option_names(v));
    else
      v = r.optional<T>(key, v);
  });
  return c;
}

// Every key, "arch" included, as config.json holds it.
template <class Config, class Keys>
std::string write_config(const Config& c, Keys own) {
  nlohmann::json j = write_common(Config::kArch, c);
  own(c, [&j](const char* key, const auto& v) {
    if constexpr (std::is_enum_v<std::decay_t<decltype(v)>>)
      j[key] = option_name(option_names(v), v);
    else
      j[key] = v;
  });
  return j.dump(2);
}

}  // namespace tmm::models
