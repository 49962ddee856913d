// Schemas of the tmm operators and the C++ entry points that call them
// through the dispatcher (so every backend and autograd are reached).
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include "tmm/ops.h"

TORCH_LIBRARY(tmm, m) {
  m.def("causal_toeplitz(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "causal_toeplitz_backward(Tensor grad_y, Tensor x, Tensor weight, bool[3] output_mask)"
      " -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias)",
      {at::Tag::pt2_compliant_tag});
}

namespace tmm::ops {

at::Tensor causal_toeplitz(const at::Tensor& x, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("tmm::causal_toeplitz", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&)>();
  return op.call(x, weight, bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> output_mask) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("tmm::causal_toeplitz_backward", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&, const at::Tensor&, const at::Tensor&, std::array<bool, 3>)>();
  return op.call(grad_y, x, weight, output_mask);
}

}  // namespace tmm::ops
