// Naive loop reference for tmm::ops::causal_toeplitz and its backward,
// written straight from the formula in <tmm/ops.h>, in double precision.
//   y[b,t,c] = sum_{i<K} sum_{s<=t} weight[g,i,t-s] * x[b,s,c-(K-1)+i] + bias[g,t]
// with g = c / (C/G) and source channels below g * (C/G) contributing zero.
#pragma once

#include <optional>
#include <tuple>

#include <ATen/ATen.h>

namespace naive {

inline at::Tensor as_double(const at::Tensor& t) {
  return t.detach().to(at::kCPU, at::kDouble).contiguous();
}

// Calls f(b, t, c, g, i, s, src) once for every product term of the sum.
template <typename F>
void for_each_term(int64_t B, int64_t L, int64_t C, int64_t G, int64_t K, F&& f) {
  const int64_t Cg = C / G;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t g = c / Cg;
        for (int64_t i = 0; i < K; ++i) {
          const int64_t src = c - (K - 1) + i;
          if (src < g * Cg) continue;
          for (int64_t s = 0; s <= t; ++s) f(b, t, c, g, i, s, src);
        }
      }
}

// Returns y (B x L x C, double).
inline at::Tensor forward(const at::Tensor& x_, const at::Tensor& w_,
                          const std::optional<at::Tensor>& bias_ = std::nullopt) {
  const auto x = as_double(x_), w = as_double(w_);
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2);
  const int64_t G = w.size(0), K = w.size(1), Cg = C / G;
  auto y = at::zeros({B, L, C}, x.options());
  auto X = x.accessor<double, 3>();
  auto W = w.accessor<double, 3>();
  auto Y = y.accessor<double, 3>();
  for_each_term(B, L, C, G, K, [&](int64_t b, int64_t t, int64_t c, int64_t g,
                                   int64_t i, int64_t s, int64_t src) {
    Y[b][t][c] += W[g][i][t - s] * X[b][s][src];
  });
  if (bias_ && bias_->defined()) {
    const auto bias = as_double(*bias_);
    auto Bs = bias.accessor<double, 2>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t c = 0; c < C; ++c) Y[b][t][c] += Bs[c / Cg][t];
  }
  return y;
}

// Returns (grad_x, grad_weight, grad_bias) in double, the adjoints of forward.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
    const at::Tensor& gy_, const at::Tensor& x_, const at::Tensor& w_) {
  const auto gy = as_double(gy_), x = as_double(x_), w = as_double(w_);
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2);
  const int64_t G = w.size(0), K = w.size(1), N = w.size(2), Cg = C / G;
  auto gx = at::zeros_like(x), gw = at::zeros_like(w);
  auto gb = at::zeros({G, N}, w.options());
  auto GY = gy.accessor<double, 3>();
  auto X = x.accessor<double, 3>();
  auto W = w.accessor<double, 3>();
  auto GX = gx.accessor<double, 3>();
  auto GW = gw.accessor<double, 3>();
  auto GB = gb.accessor<double, 2>();
  for_each_term(B, L, C, G, K, [&](int64_t b, int64_t t, int64_t c, int64_t g,
                                   int64_t i, int64_t s, int64_t src) {
    GX[b][s][src] += W[g][i][t - s] * GY[b][t][c];
    GW[g][i][t - s] += X[b][s][src] * GY[b][t][c];
  });
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < C; ++c) GB[c / Cg][t] += GY[b][t][c];
  return {gx, gw, gb};
}

}  // namespace naive
