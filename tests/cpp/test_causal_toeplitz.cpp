// Tests of tmm::ops::causal_toeplitz (forward, backward, autograd, errors)
// against the naive loop reference in naive_reference.h, at the project's
// tolerances (tolerances.h), on each CPU path forced in turn.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <catch2/catch.hpp>
#include <tmm/tmm.h>

#include "naive_reference.h"
#include "tolerances.h"
#include "skip.h"

using Catch::Contains;
using tmm::ops::causal_toeplitz;
using tmm::ops::causal_toeplitz_backward;
using tmm::ops::Path;
using tmm::ops::PathGuard;

namespace {

enum Layout { kContiguous, kTransposed, kChannelStep };

struct Case {
  int64_t B, L, C, G, K, N;
  bool bias;
  Layout layout;
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.B) + " L=" + std::to_string(c.L) +
         " C=" + std::to_string(c.C) + " G=" + std::to_string(c.G) +
         " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) +
         " bias=" + std::to_string(c.bias) + " layout=" + std::to_string(c.layout);
}

// L = 1, short, odd / prime, N > L, long; every G/K combination: G=1,K=1;
// G=heads; K>1; K=C/G; G=C; K > 16 (one call per tap). Each runs on both
// CPU paths (the tests force them) and on auto's choice. The last three
// take mixed-radix transform sizes.
const std::vector<Case> kCases = {
    {2, 1, 4, 1, 1, 1, true, kContiguous},
    {2, 1, 4, 2, 2, 3, false, kTransposed},
    {2, 5, 6, 2, 3, 5, true, kTransposed},
    {1, 16, 8, 4, 2, 20, false, kContiguous},
    {2, 7, 6, 6, 1, 7, true, kChannelStep},
    {3, 13, 12, 3, 4, 13, false, kTransposed},
    {2, 31, 4, 1, 1, 40, true, kContiguous},
    {1, 97, 9, 3, 3, 97, true, kChannelStep},
    {2, 64, 5, 1, 5, 64, true, kTransposed},
    {2, 257, 8, 8, 1, 300, false, kTransposed},
    {2, 300, 6, 2, 2, 300, true, kContiguous},
    {1, 1000, 4, 2, 2, 1024, true, kTransposed},
    {2, 23, 40, 2, 17, 30, true, kChannelStep},
    // Mixed-radix transform sizes (4 * 2^a 3^b 5^c, docs/ops.md).
    {2, 150, 8, 2, 2, 150, true, kContiguous},
    {1, 250, 6, 6, 1, 260, false, kTransposed},
    {1, 1025, 4, 1, 1, 1025, true, kContiguous},
};

// The paths every reference test runs on.
constexpr Path kCpuPaths[] = {Path::kAuto, Path::kDirect, Path::kFft};

struct Inputs {
  at::Tensor x, w, b, gy;
  std::optional<at::Tensor> bias() const {
    return b.defined() ? std::optional<at::Tensor>(b) : std::nullopt;
  }
};

Inputs make_inputs(const Case& c, at::ScalarType dtype, at::Device dev = at::kCPU) {
  const auto o = at::TensorOptions().dtype(dtype).device(dev);
  Inputs in;
  switch (c.layout) {
    case kContiguous: in.x = at::randn({c.B, c.L, c.C}, o); break;
    case kTransposed: in.x = at::randn({c.B, c.C, c.L}, o).transpose(1, 2); break;
    case kChannelStep:
      in.x = at::randn({c.B, c.L, 2 * c.C}, o).slice(2, 0, 2 * c.C, 2);
      break;
  }
  in.w = at::randn({c.G, c.K, c.N}, o);
  if (c.bias) in.b = at::randn({c.G, c.N}, o);
  in.gy = at::randn({c.B, c.L, c.C}, o);
  return in;
}

bool all_zero(const at::Tensor& t) { return t.numel() == 0 || !t.ne(0).any().item<bool>(); }

// Checks the op's forward and backward against the reference at the
// dtype's tolerance, on the current path.
void check_against_reference(const Case& c, at::ScalarType dtype) {
  const double tol = tolerances::of(dtype);
  INFO(describe(c) << " dtype=" << c10::toString(dtype) << " path=" << tmm::ops::path_name(tmm::ops::path()));
  const auto in = make_inputs(c, dtype);
  const auto y = causal_toeplitz(in.x, in.w, in.bias());
  CHECK(y.scalar_type() == dtype);
  CHECK(y.is_contiguous());
  CHECK(rel_err(y, naive::forward(in.x, in.w, in.bias())) <= tol);

  const auto [gx, gw, gb] = causal_toeplitz_backward(in.gy, in.x, in.w);
  const auto [rx, rw, rb] = naive::backward(in.gy, in.x, in.w);
  CHECK(gx.scalar_type() == dtype);
  CHECK(gw.scalar_type() == dtype);
  CHECK(gb.scalar_type() == dtype);
  CHECK(rel_err(gx, rx) <= tol);
  CHECK(rel_err(gw, rw) <= tol);
  CHECK(rel_err(gb, rb) <= tol);
  // Taps and bias entries past L get exactly zero gradient.
  CHECK(all_zero(gw.slice(2, c.L)));
  CHECK(all_zero(gb.slice(1, c.L)));
}

}  // namespace

TEST_CASE("forward and backward match the naive reference (float64, float32)",
          "[reference]") {
  at::manual_seed(0);
  for (const Path path : kCpuPaths) {
    const PathGuard guard(path);
    for (const auto& c : kCases) {
      check_against_reference(c, at::kDouble);
      check_against_reference(c, at::kFloat);
    }
  }
}

TEST_CASE("low precision dtypes are close to the reference", "[reference]") {
  at::manual_seed(1);
  const std::vector<Case> cases = {{2, 16, 8, 2, 2, 16, true, kTransposed},
                                   {1, 300, 4, 4, 1, 320, true, kContiguous},
                                   {2, 23, 40, 2, 17, 30, true, kChannelStep}};
  for (const Path path : kCpuPaths) {
    const PathGuard guard(path);
    for (const auto& c : cases) {
      check_against_reference(c, at::kBFloat16);
      check_against_reference(c, at::kHalf);
    }
  }
}

TEST_CASE("autograd from C++ equals the backward op", "[autograd]") {
  at::manual_seed(2);
  const double tol64 = tolerances::of(at::kDouble);
  const std::vector<Case> cases = {{2, 5, 6, 2, 3, 8, true, kTransposed},
                                   {2, 300, 4, 1, 1, 300, true, kContiguous},
                                   {1, 33, 6, 3, 2, 40, false, kChannelStep}};
  for (const auto& c : cases) {
    INFO(describe(c));
    const auto in = make_inputs(c, at::kDouble);
    const auto ones = at::ones_like(in.gy);
    const auto [gx, gw, gb] = causal_toeplitz_backward(in.gy, in.x, in.w);
    const auto [rx, rw, rb] = naive::backward(ones, in.x, in.w);
    // Fresh leaves (x keeps its strides) for each backward pass.
    auto x = [&] { return in.x.detach().requires_grad_(); };
    auto w = [&] { return in.w.detach().requires_grad_(); };
    auto b = [&] { return c.bias ? in.b.detach().requires_grad_() : at::Tensor(); };
    auto opt = [](const at::Tensor& t) {
      return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
    };

    {  // weighted sum: autograd hands the backward op grad_y = in.gy
      auto xl = x(), wl = w(), bl = b();
      (causal_toeplitz(xl, wl, opt(bl)) * in.gy).sum().backward();
      CHECK(rel_err(xl.grad(), gx) <= 1e-12);
      CHECK(rel_err(wl.grad(), gw) <= 1e-12);
      if (c.bias) CHECK(rel_err(bl.grad(), gb) <= 1e-12);
    }
    {  // plain sum: grad_y is an expanded (stride-0) tensor of ones
      auto xl = x(), wl = w(), bl = b();
      causal_toeplitz(xl, wl, opt(bl)).sum().backward();
      CHECK(rel_err(xl.grad(), rx) <= tol64);
      CHECK(rel_err(wl.grad(), rw) <= tol64);
      if (c.bias) CHECK(rel_err(bl.grad(), rb) <= tol64);
    }
    {  // only x requires grad
      auto xl = x();
      causal_toeplitz(xl, in.w, in.bias()).sum().backward();
      CHECK(rel_err(xl.grad(), rx) <= tol64);
    }
    {  // only weight requires grad
      auto wl = w();
      causal_toeplitz(in.x, wl, in.bias()).sum().backward();
      CHECK(rel_err(wl.grad(), rw) <= tol64);
    }
  }
}

TEST_CASE("double backward raises an error", "[autograd]") {
  at::manual_seed(3);
  auto x = at::randn({2, 6, 4}, at::kDouble).requires_grad_();
  auto w = at::randn({2, 2, 6}, at::kDouble).requires_grad_();
  auto twice = [&] {
    causal_toeplitz(x, w).pow(2).sum().backward({}, /*retain_graph=*/true,
                                                /*create_graph=*/true);
    (x.grad().pow(2).sum() + w.grad().pow(2).sum()).backward();
  };
  REQUIRE_THROWS_WITH(twice(), Contains("double backward"));
  // With create_graph, x.grad and w.grad hold a graph that holds x and w (via
  // their AccumulateGrad nodes): a reference cycle, never freed. Break it.
  x.mutable_grad().reset();
  w.mutable_grad().reset();
}

TEST_CASE("partial output masks return empty tensors", "[backward]") {
  at::manual_seed(4);
  for (const Case& c : {Case{2, 9, 6, 3, 2, 12, true, kTransposed},
                        Case{1, 300, 4, 2, 2, 300, true, kContiguous}}) {
    INFO(describe(c));
    const auto in = make_inputs(c, at::kDouble);
    const auto full = causal_toeplitz_backward(in.gy, in.x, in.w);
    const std::array<at::Tensor, 3> ref = {std::get<0>(full), std::get<1>(full),
                                           std::get<2>(full)};
    for (int m = 0; m < 8; ++m) {
      const std::array<bool, 3> mask = {bool(m & 1), bool(m & 2), bool(m & 4)};
      INFO("mask=" << mask[0] << mask[1] << mask[2]);
      const auto r = causal_toeplitz_backward(in.gy, in.x, in.w, mask);
      const std::array<at::Tensor, 3> got = {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
      for (int k = 0; k < 3; ++k) {
        INFO("output " << k);
        REQUIRE(got[k].defined());
        if (mask[k]) {
          CHECK(rel_err(got[k], ref[k]) <= 1e-12);
        } else {
          CHECK(got[k].sizes() == at::IntArrayRef{0});
        }
      }
    }
  }
}

TEST_CASE("empty tensors", "[empty]") {
  at::manual_seed(5);
  auto check_empty = [](int64_t B, int64_t L, int64_t N) {
    INFO("B=" << B << " L=" << L << " N=" << N);
    const auto x = at::randn({B, L, 4});
    const auto w = at::randn({2, 2, N});
    const auto b = at::randn({2, N});
    const auto y = causal_toeplitz(x, w, b);
    CHECK(y.sizes() == at::IntArrayRef{B, L, 4});
    const auto [gx, gw, gb] = causal_toeplitz_backward(at::randn({B, L, 4}), x, w);
    CHECK(gx.sizes() == at::IntArrayRef{B, L, 4});
    CHECK(gw.sizes() == at::IntArrayRef{2, 2, N});
    CHECK(gb.sizes() == at::IntArrayRef{2, N});
    CHECK(all_zero(gw));
    CHECK(all_zero(gb));
    // Through autograd too.
    auto xr = x.clone().requires_grad_();
    auto wr = w.clone().requires_grad_();
    causal_toeplitz(xr, wr, b).sum().backward();
    CHECK(xr.grad().sizes() == at::IntArrayRef{B, L, 4});
    CHECK(all_zero(wr.grad()));
  };
  SECTION("B = 0") { check_empty(0, 5, 8); }
  SECTION("L = 0") { check_empty(3, 0, 4); }
  SECTION("L = 0, N = 0") { check_empty(3, 0, 0); }
}

TEST_CASE("results are independent of the thread count", "[threads]") {
  at::manual_seed(6);
  const int saved = at::get_num_threads();
  for (const auto& [c, path] : {std::pair{Case{4, 16, 8, 8, 1, 16, true, kTransposed}, Path::kDirect},
                                std::pair{Case{4, 16, 8, 2, 3, 16, true, kTransposed}, Path::kDirect},
                                std::pair{Case{4, 300, 8, 2, 2, 320, true, kContiguous}, Path::kFft},
                                std::pair{Case{2, 40, 40, 2, 18, 40, true, kContiguous}, Path::kFft}}) {
    INFO(describe(c) << " path=" << tmm::ops::path_name(path));
    const PathGuard guard(path);
    const auto in = make_inputs(c, at::kFloat);
    auto run = [&](int threads) {
      at::set_num_threads(threads);
      const auto y = causal_toeplitz(in.x, in.w, in.bias());
      const auto [gx, gw, gb] = causal_toeplitz_backward(in.gy, in.x, in.w);
      return std::array<at::Tensor, 4>{y, gx, gw, gb};
    };
    const auto one = run(1), two = run(2);
    for (int k = 0; k < 4; ++k) {
      INFO("output " << k << " (y, grad_x, grad_weight, grad_bias)");
      CHECK(at::equal(one[k], two[k]));
    }
  }
  at::set_num_threads(saved);
}

TEST_CASE("invalid arguments raise errors naming the argument", "[errors]") {
  const auto f = at::kFloat;
  const auto x = at::randn({2, 10, 4});
  const auto w = at::randn({2, 2, 16});
  const auto gy = at::randn({2, 10, 4});

  REQUIRE_THROWS_AS(causal_toeplitz(at::randn({3, 4}), w), c10::Error);
  REQUIRE_THROWS_WITH(causal_toeplitz(at::randn({3, 4}), w),
                      Contains("x") && Contains("3-D") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(causal_toeplitz(x, at::randn({2, 16})),
                      Contains("weight") && Contains("3-D"));
  REQUIRE_THROWS_WITH(causal_toeplitz(x, at::randn({1, 1, 8})),
                      Contains("weight") && Contains("N = 8") && Contains("L = 10"));
  REQUIRE_THROWS_WITH(causal_toeplitz(at::randn({2, 4, 10}), at::randn({3, 1, 4})),
                      Contains("C = 10") && Contains("G = 3"));
  REQUIRE_THROWS_WITH(causal_toeplitz(at::randn({2, 4, 8}), at::randn({2, 5, 4})),
                      Contains("weight") && Contains("C/G = 4") && Contains("K = 5"));
  REQUIRE_THROWS_WITH(causal_toeplitz(at::randn({2, 4, 8}), at::randn({2, 0, 4})),
                      Contains("weight") && Contains("K = 0"));
  REQUIRE_THROWS_WITH(causal_toeplitz(at::ones({2, 4, 4}, at::kLong), w),
                      Contains("x") && Contains("float32") && Contains("Long"));
  REQUIRE_THROWS_WITH(causal_toeplitz(x, w.to(at::kDouble)),
                      Contains("weight") && Contains("Float") && Contains("Double"));
  REQUIRE_THROWS_WITH(causal_toeplitz(x, w, at::randn({2, 15})),
                      Contains("bias") && Contains("[2, 16]") && Contains("[2, 15]"));
  REQUIRE_THROWS_WITH(causal_toeplitz(x, w, at::randn({2, 16}, at::kDouble)),
                      Contains("bias"));
  REQUIRE_NOTHROW(causal_toeplitz(x, w, at::randn({2, 16}, f)));

  // The backward op checks its arguments too.
  REQUIRE_THROWS_WITH(causal_toeplitz_backward(at::randn({2, 10, 5}), x, w),
                      Contains("grad_y"));
  REQUIRE_THROWS_WITH(causal_toeplitz_backward(gy.to(at::kDouble), x, w),
                      Contains("grad_y"));
  REQUIRE_THROWS_WITH(causal_toeplitz_backward(gy, x, at::randn({1, 1, 8})),
                      Contains("weight"));
  REQUIRE_THROWS_WITH(causal_toeplitz_backward(at::randn({3, 4}), at::randn({3, 4}), w),
                      Contains("3-D"));
}

#if TMM_WITH_CUDA
TEST_CASE("CUDA matches the naive reference", "[cuda]") {
  if (!at::hasCUDA()) TMM_SKIP("no CUDA device on this machine");
  at::manual_seed(7);
  for (const Case& c : {Case{2, 5, 6, 2, 3, 8, true, kTransposed},
                        Case{2, 300, 6, 3, 2, 300, true, kContiguous},
                        Case{1, 1000, 4, 4, 1, 1024, false, kTransposed}}) {
    for (auto [dtype, tol] : {std::pair{at::kDouble, 1e-9}, std::pair{at::kFloat, 1e-4}}) {
      INFO(describe(c) << " dtype=" << c10::toString(dtype));
      const auto in = make_inputs(c, dtype, at::kCUDA);
      const auto y = causal_toeplitz(in.x, in.w, in.bias());
      CHECK(y.is_cuda());
      CHECK(rel_err(y, naive::forward(in.x, in.w, in.bias())) <= tol);
      const auto [gx, gw, gb] = causal_toeplitz_backward(in.gy, in.x, in.w);
      const auto [rx, rw, rb] = naive::backward(in.gy, in.x, in.w);
      CHECK(rel_err(gx, rx) <= tol);
      CHECK(rel_err(gw, rw) <= tol);
      CHECK(rel_err(gb, rb) <= tol);
    }
  }
}
#endif  // TMM_WITH_CUDA
