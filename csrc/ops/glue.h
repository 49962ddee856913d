// Pieces of the causal-Toeplitz glue that every backend shares.
#pragma once

#include <array>
#include <tuple>

#include <ATen/ATen.h>

#include "kernels/toeplitz_params.h"

namespace tmm::detail {

// The backward's outputs: each requested one at full shape, contiguous; an
// unrequested one as an empty tensor of shape [0].
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> empty_backward_outputs(
    const at::Tensor& x, const kernels::ToeplitzShape& s, std::array<bool, 3> mask) {
  const auto opts = x.options();
  return {at::empty(mask[0] ? at::IntArrayRef{s.B, s.L, s.C} : at::IntArrayRef{0}, opts),
          at::empty(mask[1] ? at::IntArrayRef{s.G, s.K, s.N} : at::IntArrayRef{0}, opts),
          at::empty(mask[2] ? at::IntArrayRef{s.G, s.N} : at::IntArrayRef{0}, opts)};
}

// grad_bias[g, t] = sum over batch and the group's channels of grad_y[b, t, c]
// (accumulated in float32 at least), zero for t >= L. Writes into out (G x N).
inline void fill_grad_bias(const at::Tensor& grad_y, const kernels::ToeplitzShape& s, at::Tensor& out) {
  const auto acc = grad_y.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor per_t = grad_y.sum(0, false, acc).view({s.L, s.G, s.C / s.G}).sum(-1);  // L x G
  out.zero_();
  out.narrow(1, 0, s.L).copy_(per_t.t());
}

// Kernels with more taps than a tile's halo allows run one tap at a time:
// tap i of the K-tap op is a 1-tap op on x shifted right by K-1-i channels
// inside each group (zero-filled), and its input gradient shifts back.
inline at::Tensor shift_in_groups(const at::Tensor& x, const kernels::ToeplitzShape& s, int64_t shift) {
  const int64_t cg = s.C / s.G;
  return at::constant_pad_nd(x.reshape({s.B, s.L, s.G, cg}), {shift, 0}).narrow(3, 0, cg).reshape({s.B, s.L, s.C});
}

inline at::Tensor unshift_in_groups(const at::Tensor& g, const kernels::ToeplitzShape& s, int64_t shift) {
  const int64_t cg = s.C / s.G;
  return at::constant_pad_nd(g.reshape({s.B, s.L, s.G, cg}), {0, shift}).narrow(3, shift, cg).reshape({s.B, s.L, s.C});
}

inline at::ScalarType accumulation_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// forward_one_tap(x, weight_i (G x 1 x N), bias) -> y
template <class ForwardOneTap>
at::Tensor forward_per_tap(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           const kernels::ToeplitzShape& s, ForwardOneTap&& forward_one_tap) {
  at::Tensor y = at::zeros({s.B, s.L, s.C}, x.options().dtype(accumulation_type(x.scalar_type())));
  for (int64_t i = 0; i < s.K; ++i) {
    y.add_(forward_one_tap(shift_in_groups(x, s, s.K - 1 - i), weight.narrow(1, i, 1),
                           i == 0 ? bias : std::nullopt));
  }
  return y.to(x.scalar_type());
}

// backward_one_tap(grad_y, x_i, weight_i, want_gx, want_gw) -> (gx_i, gw_i);
// writes grad_x (B x L x C) and grad_weight (G x K x N) where defined.
template <class BackwardOneTap>
void backward_per_tap(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
                      const kernels::ToeplitzShape& s, at::Tensor* grad_x, at::Tensor* grad_weight,
                      BackwardOneTap&& backward_one_tap) {
  at::Tensor gx_acc;
  if (grad_x) gx_acc = at::zeros({s.B, s.L, s.C}, x.options().dtype(accumulation_type(x.scalar_type())));
  for (int64_t i = 0; i < s.K; ++i) {
    const int64_t shift = s.K - 1 - i;
    auto [gx_i, gw_i] = backward_one_tap(grad_y, shift_in_groups(x, s, shift), weight.narrow(1, i, 1),
                                         grad_x != nullptr, grad_weight != nullptr);
    if (grad_x) gx_acc.add_(unshift_in_groups(gx_i, s, shift));
    if (grad_weight) grad_weight->narrow(1, i, 1).copy_(gw_i);
  }
  if (grad_x) grad_x->copy_(gx_acc);
}

}  // namespace tmm::detail
