// Argument validation shared by every backend of the causal-Toeplitz ops:
// a bad argument is a c10::Error naming it, what it got and what was
// expected. Templated on the size type so that the Meta kernels check
// symbolic shapes (c10::SymInt) under torch.compile's dynamic shapes.
#pragma once

#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include "params/toeplitz_params.h"

namespace tmm::detail {

template <class Int>
struct Sizes {
  Int B, L, C, G, K, N;
};

template <class Int>
Sizes<Int> check_forward_sizes(const at::Tensor& x, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias);

template <class Int>
Sizes<Int> check_backward_sizes(const at::Tensor& grad_y, const at::Tensor& x,
                                const at::Tensor& weight);

kernels::ToeplitzShape to_shape(const Sizes<int64_t>& s);

inline kernels::ToeplitzShape check_forward_args(const at::Tensor& x, const at::Tensor& weight,
                                                 const std::optional<at::Tensor>& bias) {
  return to_shape(check_forward_sizes<int64_t>(x, weight, bias));
}

inline kernels::ToeplitzShape check_backward_args(const at::Tensor& grad_y, const at::Tensor& x,
                                                  const at::Tensor& weight) {
  return to_shape(check_backward_sizes<int64_t>(grad_y, x, weight));
}

}  // namespace tmm::detail
