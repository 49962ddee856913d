// Autograd kernels, in C++ so that LibTorch programs can train: the forward
// saves x and weight and its backward calls the registered backward op. The
// backward op has an autograd kernel of its own whose derivative is a clear
// error, so double backward fails loudly instead of silently being wrong.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "tmm/ops.h"

namespace tmm::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class CausalToeplitzBackwardFunction
    : public torch::autograd::Function<CausalToeplitzBackwardFunction> {
 public:
  static variable_list forward(AutogradContext*, const at::Tensor& grad_y, const at::Tensor& x,
                               const at::Tensor& weight, std::array<bool, 3> mask) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [gx, gw, gb] = ops::causal_toeplitz_backward(grad_y, x, weight, mask);
    return {gx, gw, gb};
  }
  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false,
                "causal_toeplitz: double backward is not supported; differentiate the op once "
                "(create_graph=True through tmm.ops.causal_toeplitz is not available)");
  }
};

class CausalToeplitzFunction : public torch::autograd::Function<CausalToeplitzFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    return ops::causal_toeplitz(x, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      has_bias && ctx->needs_input_grad(2)};
    at::Tensor grad_y = grad_outputs[0];
    if (!grad_y.defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    auto grads = CausalToeplitzBackwardFunction::apply(grad_y, saved[0], saved[1], mask);
    return {mask[0] ? grads[0] : at::Tensor(), mask[1] ? grads[1] : at::Tensor(),
            mask[2] ? grads[2] : at::Tensor()};
  }
};

at::Tensor causal_toeplitz_autograd(const at::Tensor& x, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias) {
  return CausalToeplitzFunction::apply(x, weight, bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_autograd(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> mask) {
  auto grads = CausalToeplitzBackwardFunction::apply(grad_y, x, weight, mask);
  return {grads[0], grads[1], grads[2]};
}

}  // namespace
}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, Autograd, m) {
  m.impl("causal_toeplitz", &tmm::detail::causal_toeplitz_autograd);
  m.impl("causal_toeplitz_backward", &tmm::detail::causal_toeplitz_backward_autograd);
}
