// Filling the torch-free kernel parameter structs from tensors: the storage
// type each torch dtype maps to, raw data pointers and element strides; one
// place for the CPU and CUDA glue.
#pragma once

#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "params/half_types.h"
#include "params/toeplitz_params.h"

namespace tmm::detail {

template <class S> struct storage { using type = S; };
template <> struct storage<c10::BFloat16> { using type = kernels::bf16_t; };
template <> struct storage<c10::Half> { using type = kernels::f16_t; };

// t's data as the kernels' storage type (bit-compatible with S).
template <class S>
auto* raw(const at::Tensor& t) {
  using T = typename storage<S>::type;
  return reinterpret_cast<T*>(t.data_ptr<S>());
}

inline void copy_strides(const at::Tensor& t, int64_t* out) {
  for (int64_t d = 0; d < t.dim(); ++d) out[d] = t.stride(d);
}

// The forward's parameters for torch dtype S; y is the allocated output.
template <class S>
kernels::ToeplitzForwardParams<typename storage<S>::type> make_forward_params(
    const kernels::ToeplitzShape& s, const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias, const at::Tensor& y) {
  kernels::ToeplitzForwardParams<typename storage<S>::type> p;
  p.shape = s;
  p.x = raw<S>(x);
  copy_strides(x, p.x_stride);
  p.weight = raw<S>(weight);
  copy_strides(weight, p.w_stride);
  if (bias.has_value()) {
    p.bias = raw<S>(*bias);
    copy_strides(*bias, p.bias_stride);
  }
  p.y = raw<S>(y);
  return p;
}

// The backward's parameters for torch dtype S; grad_x / grad_weight are the
// allocated outputs, nullptr where not wanted.
template <class S>
kernels::ToeplitzBackwardParams<typename storage<S>::type> make_backward_params(
    const kernels::ToeplitzShape& s, const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
    const at::Tensor* grad_x, const at::Tensor* grad_weight) {
  kernels::ToeplitzBackwardParams<typename storage<S>::type> p;
  p.shape = s;
  p.grad_y = raw<S>(grad_y);
  copy_strides(grad_y, p.gy_stride);
  p.x = raw<S>(x);
  copy_strides(x, p.x_stride);
  p.weight = raw<S>(weight);
  copy_strides(weight, p.w_stride);
  p.grad_x = grad_x ? raw<S>(*grad_x) : nullptr;
  p.grad_weight = grad_weight ? raw<S>(*grad_weight) : nullptr;
  return p;
}

}  // namespace tmm::detail
