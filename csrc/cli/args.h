// Command-line flags of the tmm CLI: each command declares its options; the
// parser checks names and values and every error says what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tmm::cli {

// A bad command line: printed with the command's usage, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Option {
  std::string name;        // without the leading "--"
  std::string value_name;  // empty: a switch that takes no value
  std::string help;
  bool repeatable = false;
};

// `value` of option --name as an integer >= min.
int64_t parse_integer(const std::string& name, const std::string& value, int64_t min);
// `value` of option --name as comma-separated integers, each >= min.
std::vector<int64_t> parse_integers(const std::string& name, const std::string& value, int64_t min);

class Args {
 public:
  // argv[first..argc) against `options`; --help sets help().
  Args(int argc, char** argv, int first, std::vector<Option> options);

  bool help() const { return help_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::string text(const std::string& name, const std::string& fallback) const;
  std::string required(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback, int64_t min) const;
  double real(const std::string& name, double fallback) const;
  std::vector<std::string> all(const std::string& name) const;
  // Comma-separated integers, each >= min.
  std::vector<int64_t> integers(const std::string& name, const std::string& fallback, int64_t min) const;

  // "  --name VALUE   help" lines for the usage text.
  std::string describe() const;

 private:
  std::vector<Option> options_;
  std::map<std::string, std::vector<std::string>> values_;
  bool help_ = false;
};

}  // namespace tmm::cli
