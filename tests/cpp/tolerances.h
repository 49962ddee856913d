// The project's one tolerance table, tmm/tolerances.json (its path from
// repo_paths.h), and its metric: max|actual - expected| /
// max|expected| against a float64 reference computed from the same
// (rounded) inputs. The Python tests read the same file.
#pragma once

#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "naive_reference.h"
#include "repo_paths.h"

namespace tolerances {

inline double entry(const std::string& key) {
  static const std::map<std::string, double> table = [] {
    std::ifstream in(tmm_test::tolerances_json());
    if (!in) throw std::runtime_error("cannot read " + tmm_test::tolerances_json());
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::map<std::string, double> t;
    for (const auto& [key, value] : doc.items()) {
      if (key != "_doc") t[key] = value.get<double>();
    }
    return t;
  }();
  const auto it = table.find(key);
  if (it == table.end()) throw std::runtime_error("no entry " + key + " in " + tmm_test::tolerances_json());
  return it->second;
}

inline std::string dtype_name(at::ScalarType dtype) {
  return dtype == at::kDouble ? "float64" : dtype == at::kFloat ? "float32"
         : dtype == at::kHalf ? "float16" : dtype == at::kBFloat16 ? "bfloat16" : "?";
}

// The largest allowed rel_err for results of this dtype.
inline double of(at::ScalarType dtype) { return entry(dtype_name(dtype)); }

// The whole-step row of an autocast dtype ("_autocast_step_<dtype>"): a
// training step under autocast against the float32 step, each gradient
// against its own scale floored at this row times the largest gradient's
// (tmm.testing.grad_errors).
inline double step(at::ScalarType dtype) { return entry("_autocast_step_" + dtype_name(dtype)); }

}  // namespace tolerances

// max |actual - expected| relative to max |expected| (or absolute if that is 0).
inline double rel_err(const at::Tensor& actual, const at::Tensor& expected) {
  REQUIRE(actual.defined());
  REQUIRE(actual.sizes() == expected.sizes());
  if (expected.numel() == 0) return 0.0;
  const auto a = naive::as_double(actual), e = naive::as_double(expected);
  const double scale = e.abs().max().item<double>();
  const double err = (a - e).abs().max().item<double>();
  return err / (scale > 0 ? scale : 1.0);
}
