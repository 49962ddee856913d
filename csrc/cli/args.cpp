#include "cli/args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace tmm::cli {

Args::Args(int argc, char** argv, int first, std::vector<Option> options) : options_(std::move(options)) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + arg + "' (options start with --)");
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto opt = std::find_if(options_.begin(), options_.end(), [&](const Option& o) { return o.name == name; });
    if (opt == options_.end()) throw UsageError("unknown option --" + name);
    if (opt->value_name.empty()) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
    } else if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("--" + name + " needs a value (" + opt->value_name + ")");
      value = argv[++i];
    }
    auto& slot = values_[name];
    if (!slot.empty() && !opt->repeatable) throw UsageError("--" + name + " given more than once");
    slot.push_back(value);
  }
}

std::string Args::text(const std::string& name, const std::string& fallback) const {
  return has(name) ? values_.at(name).back() : fallback;
}

std::string Args::required(const std::string& name) const {
  if (!has(name)) throw UsageError("missing --" + name);
  return values_.at(name).back();
}

int64_t parse_integer(const std::string& name, const std::string& s, int64_t min) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < min) {
    throw UsageError("--" + name + ": expected an integer >= " + std::to_string(min) + ", got '" + s + "'");
  }
  return v;
}

int64_t Args::integer(const std::string& name, int64_t fallback, int64_t min) const {
  return has(name) ? parse_integer(name, text(name, ""), min) : fallback;
}

double Args::real(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string s = text(name, "");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) {
    throw UsageError("--" + name + ": expected a number, got '" + s + "'");
  }
  return v;
}

std::vector<std::string> Args::all(const std::string& name) const {
  return has(name) ? values_.at(name) : std::vector<std::string>{};
}

std::vector<int64_t> parse_integers(const std::string& name, const std::string& value, int64_t min) {
  std::vector<int64_t> out;
  std::stringstream list(value);
  for (std::string item; std::getline(list, item, ',');) out.push_back(parse_integer(name, item, min));
  if (out.empty()) throw UsageError("--" + name + ": expected a comma-separated list of integers");
  return out;
}

std::vector<int64_t> Args::integers(const std::string& name, const std::string& fallback, int64_t min) const {
  return parse_integers(name, text(name, fallback), min);
}

std::string Args::describe() const {
  std::string out;
  for (const auto& o : options_) {
    std::string left = "  --" + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
    left.resize(std::max<size_t>(left.size() + 2, 28), ' ');
    out += left + o.help + (o.repeatable ? " (repeatable)" : "") + "\n";
  }
  return out;
}

}  // namespace tmm::cli
