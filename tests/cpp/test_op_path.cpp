// The kernel path option (<tmm/ops/path.h>): names, errors, the guard, that
// forcing a path runs those kernels (each CPU path against the reference on
// shapes auto would send elsewhere), that a CUDA path on the CPU runs auto's
// choice, and that concurrent reads see a consistent value.
#include <array>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <tmm/tmm.h>

#include "naive_reference.h"
#include "tolerances.h"

using Catch::Contains;
using tmm::ops::Path;
using tmm::ops::PathGuard;

namespace {

constexpr Path kAll[] = {Path::kAuto, Path::kDirect, Path::kFft, Path::kCufft, Path::kFused};

struct Result {
  at::Tensor y, gx, gw, gb;
};

Result run(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& gy) {
  auto [gx, gw, gb] = tmm::ops::causal_toeplitz_backward(gy, x, w);
  return {tmm::ops::causal_toeplitz(x, w, b), gx, gw, gb};
}

}  // namespace

TEST_CASE("path: names round-trip and the default is auto", "[path]") {
  for (const Path p : kAll) CHECK(tmm::ops::parse_path(tmm::ops::path_name(p)) == p);
  CHECK(std::string(tmm::ops::path_name(Path::kFused)) == "fused");
  const char* env = std::getenv("TMM_CUDA_ALGORITHM");
  if (env == nullptr || *env == '\0') CHECK(tmm::ops::path() == Path::kAuto);
  CHECK(tmm::ops::direct_crossover_length() == 24);
}

TEST_CASE("path: an unknown name is an error naming it and the choices", "[path][errors]") {
  CHECK_THROWS_AS(tmm::ops::parse_path("FFT"), std::invalid_argument);
  CHECK_THROWS_WITH(tmm::ops::parse_path("cuda"),
                    Contains("'cuda'") && Contains("auto, direct, fft, cufft or fused"));
  CHECK_THROWS_WITH(tmm::ops::parse_path(""), Contains("''"));
}

TEST_CASE("path: the guard sets and restores, nested", "[path]") {
  {
    const PathGuard outer(Path::kFft);
    CHECK(tmm::ops::path() == Path::kFft);
    {
      const PathGuard inner(Path::kDirect);
      CHECK(tmm::ops::path() == Path::kDirect);
    }
    CHECK(tmm::ops::path() == Path::kFft);
  }
  CHECK(tmm::ops::path() == Path::kAuto);
}

TEST_CASE("path: each forced CPU path matches the reference where auto would not take it", "[path]") {
  at::manual_seed(21);
  // (B, L, C, G, K): L*K <= 24 (auto: direct) and L*K > 24 (auto: fft),
  // K > 16 (one call per tap), groups.
  const std::vector<std::array<int64_t, 5>> shapes = {
      {2, 6, 8, 2, 3}, {2, 16, 12, 3, 3}, {1, 70, 8, 1, 1}, {2, 9, 40, 2, 17}, {2, 1, 4, 4, 1}};
  for (const auto& [B, L, C, G, K] : shapes) {
    for (const Path path : {Path::kDirect, Path::kFft}) {
      for (const auto dtype : {at::kDouble, at::kFloat}) {
        INFO("B=" << B << " L=" << L << " C=" << C << " G=" << G << " K=" << K << " path="
                  << tmm::ops::path_name(path) << " dtype=" << c10::toString(dtype));
        const auto o = at::TensorOptions().dtype(dtype);
        const auto x = at::randn({B, L, C}, o), w = at::randn({G, K, L + 2}, o), b = at::randn({G, L + 2}, o);
        const auto gy = at::randn({B, L, C}, o);
        const PathGuard guard(path);
        const Result r = run(x, w, b, gy);
        const auto [rx, rw, rb] = naive::backward(gy, x, w);
        const double tol = tolerances::of(dtype);
        CHECK(rel_err(r.y, naive::forward(x, w, b)) <= tol);
        CHECK(rel_err(r.gx, rx) <= tol);
        CHECK(rel_err(r.gw, rw) <= tol);
        CHECK(rel_err(r.gb, rb) <= tol);
      }
    }
  }
}

TEST_CASE("path: the two CPU paths differ in rounding, so forcing one is seen", "[path]") {
  // Guards against a forced path being ignored: direct and FFT round
  // differently in float32, so bitwise-equal outputs would mean one path ran.
  at::manual_seed(22);
  const auto x = at::randn({2, 40, 8}), w = at::randn({2, 1, 40}), b = at::randn({2, 40});
  const auto gy = at::randn({2, 40, 8});
  Result direct, fft, autom;
  {
    const PathGuard g(Path::kDirect);
    direct = run(x, w, b, gy);
  }
  {
    const PathGuard g(Path::kFft);
    fft = run(x, w, b, gy);
  }
  autom = run(x, w, b, gy);  // L * K = 40 > 24: auto takes fft
  CHECK_FALSE(at::equal(direct.y, fft.y));
  CHECK(at::equal(autom.y, fft.y));
  CHECK(at::equal(autom.gw, fft.gw));
}

TEST_CASE("path: CUDA's paths on CPU tensors run auto's choice", "[path]") {
  at::manual_seed(23);
  for (const int64_t L : {5, 100}) {  // auto: direct, then fft
    INFO("L = " << L);
    const auto x = at::randn({2, L, 6}), w = at::randn({3, 2, L}), b = at::randn({3, L});
    const auto gy = at::randn({2, L, 6});
    const Result ref = run(x, w, b, gy);
    for (const Path path : {Path::kCufft, Path::kFused}) {
      const PathGuard guard(path);
      const Result r = run(x, w, b, gy);
      CHECK(at::equal(r.y, ref.y));
      CHECK(at::equal(r.gx, ref.gx));
      CHECK(at::equal(r.gw, ref.gw));
    }
  }
}

TEST_CASE("path: reading while another thread switches sees only set values", "[path][concurrency]") {
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread writer([&] {
    for (int i = 0; i < 20000; ++i) tmm::ops::set_path(i % 2 ? Path::kDirect : Path::kFft);
    stop = true;
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop) {
        const Path p = tmm::ops::path();
        if (p != Path::kDirect && p != Path::kFft && p != Path::kAuto) ++bad;
      }
    });
  }
  writer.join();
  for (auto& r : readers) r.join();
  tmm::ops::set_path(Path::kAuto);
  CHECK(bad == 0);
}
