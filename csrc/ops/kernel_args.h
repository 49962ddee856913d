// Filling the torch-free kernel parameter structs from tensors: the storage
// type each torch dtype maps to, raw data pointers and element strides.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "kernels/half_types.h"

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

}  // namespace tmm::detail
