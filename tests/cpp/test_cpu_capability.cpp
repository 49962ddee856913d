// The CPU kernels' instruction-set variants (<tmm/ops/cpu_capability.h>,
// csrc/cpu/capability.h): the choice logic on made-up CPUs (so the refusal
// of a capability above the CPU's is tested on any machine), and the op
// under every variant this machine runs, against the naive reference.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <tmm/tmm.h>

#include "cpu/capability.h"
#include "naive_reference.h"
#include "tolerances.h"

using Catch::Contains;
using tmm::cpu::choose_capability;

namespace {

const std::vector<std::string> kX86 = {"default", "avx2", "avx512"};

// Restores the variant chosen at start-up when a test has forced another.
struct RestoreCapability {
  std::string saved = tmm::ops::cpu_capability();
  ~RestoreCapability() { tmm::cpu::force_capability(saved); }
};

}  // namespace

TEST_CASE("cpu capability: the best supported one, unless capped", "[capability]") {
  CHECK(choose_capability(kX86, {true, true, true}, nullptr).index == 2);
  CHECK(choose_capability(kX86, {true, true, false}, nullptr).index == 1);
  CHECK(choose_capability(kX86, {true, false, false}, "").index == 0);
  CHECK(choose_capability(kX86, {true, true, true}, "avx2").index == 1);
  CHECK(choose_capability(kX86, {true, true, true}, "default").index == 0);
  const auto none = choose_capability(kX86, {true, true, true}, "avx2");
  CHECK(none.warning.empty());
  CHECK(choose_capability({"native"}, {true}, "native").index == 0);
}

TEST_CASE("cpu capability: a cap above the CPU's warns and runs the best it has", "[capability]") {
  const auto c = choose_capability(kX86, {true, true, false}, "avx512");
  CHECK(c.index == 1);
  CHECK_THAT(c.warning, Contains("TMM_CPU_CAPABILITY=avx512") && Contains("running avx2"));
}

TEST_CASE("cpu capability: a name the build lacks is an error naming the variable and the choices",
          "[capability][errors]") {
  CHECK_THROWS_AS(choose_capability(kX86, {true, true, true}, "sse4"), std::invalid_argument);
  CHECK_THROWS_WITH(choose_capability(kX86, {true, true, true}, "AVX2"),
                    Contains("TMM_CPU_CAPABILITY") && Contains("'AVX2'") && Contains("default, avx2, avx512"));
  CHECK_THROWS_WITH(choose_capability({"default"}, {true}, "avx2"), Contains("(default)"));
}

TEST_CASE("cpu capability: the chosen one is the best this machine runs", "[capability]") {
  const auto supported = tmm::ops::cpu_capabilities();
  REQUIRE_FALSE(supported.empty());
  const char* cap = std::getenv("TMM_CPU_CAPABILITY");
  if (cap == nullptr || *cap == '\0') CHECK(tmm::ops::cpu_capability() == supported.front());
  CHECK((supported.back() == "default" || supported.back() == "native"));
  INFO("supported: " << supported.size());
}

TEST_CASE("cpu capability: forcing one the build lacks or the CPU cannot run is an error", "[capability][errors]") {
  const RestoreCapability restore;
  CHECK_THROWS_WITH(tmm::cpu::force_capability("sse9"), Contains("'sse9'"));
  const auto supported = tmm::ops::cpu_capabilities();
  if (std::find(supported.begin(), supported.end(), "avx512") == supported.end() &&
      tmm::ops::cpu_capability() != "native") {
    CHECK_THROWS_WITH(tmm::cpu::force_capability("avx512"), Contains("does not support"));
  }
  CHECK(tmm::ops::cpu_capability() == restore.saved);
}

TEST_CASE("cpu capability: the op under every variant this machine runs matches the reference",
          "[capability][reference]") {
  const RestoreCapability restore;
  at::manual_seed(31);
  // (B, L, C, G, K): direct (L*K <= 24) and FFT, groups, taps, one call per tap.
  const std::vector<std::array<int64_t, 5>> shapes = {
      {2, 5, 6, 2, 3}, {2, 37, 8, 1, 1}, {1, 200, 12, 3, 2}, {2, 64, 6, 6, 1}, {1, 20, 36, 2, 17}};
  for (const std::string& cap : tmm::ops::cpu_capabilities()) {
    tmm::cpu::force_capability(cap);
    REQUIRE(tmm::ops::cpu_capability() == cap);
    for (const auto& [B, L, C, G, K] : shapes) {
      for (const auto dtype : {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf}) {
        INFO(cap << " B=" << B << " L=" << L << " C=" << C << " G=" << G << " K=" << K
                 << " dtype=" << c10::toString(dtype));
        const auto o = at::TensorOptions().dtype(dtype);
        const auto x = at::randn({B, C, L}, o).transpose(1, 2);  // strided x
        const auto w = at::randn({G, K, L + 3}, o), b = at::randn({G, L + 3}, o), gy = at::randn({B, L, C}, o);
        const double tol = tolerances::of(dtype);
        CHECK(rel_err(tmm::ops::causal_toeplitz(x, w, b), naive::forward(x, w, b)) <= tol);
        const auto [gx, gw, gb] = tmm::ops::causal_toeplitz_backward(gy, x, w);
        const auto [rx, rw, rb] = naive::backward(gy, x, w);
        CHECK(rel_err(gx, rx) <= tol);
        CHECK(rel_err(gw, rw) <= tol);
        CHECK(rel_err(gb, rb) <= tol);
      }
    }
  }
}
