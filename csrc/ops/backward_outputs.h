// The backward's outputs, shared by the CPU and CUDA glue: allocating them
// as output_mask asks, and grad_bias, which needs no kernel (a sum of grad_y).
#pragma once

#include <array>
#include <tuple>

#include <ATen/ATen.h>

#include "params/toeplitz_params.h"

namespace tmm::detail {

// Each requested output at full shape, contiguous; an unrequested one as an
// empty tensor of shape [0].
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

}  // namespace tmm::detail
