// Autograd kernels, in C++ so that LibTorch programs can train. The forward
// records a graph node (as ATen's own ops do, rather than a
// torch::autograd::Function, which torch.func's transforms refuse) that saves
// x and weight; its apply calls the registered backward op. The backward op
// records a node whose derivative is a clear error, so double backward fails
// loudly instead of silently being wrong.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include "tmm/ops.h"

namespace tmm::detail {
namespace {

using torch::autograd::variable_list;

struct CausalToeplitzBackward : public torch::autograd::TraceableFunction {
  std::string name() const override { return "CausalToeplitzBackward"; }

  variable_list apply(variable_list&& grads) override {
    const at::Tensor& grad_y = grads[0];
    const std::array<bool, 3> mask = {should_compute_output(0), should_compute_output(1),
                                      has_bias && should_compute_output(2)};
    if (!grad_y.defined() || !(mask[0] || mask[1] || mask[2])) return {at::Tensor(), at::Tensor(), at::Tensor()};
    auto [gx, gw, gb] = ops::causal_toeplitz_backward(grad_y, x.unpack(), weight.unpack(), mask);
    return {mask[0] ? gx : at::Tensor(), mask[1] ? gw : at::Tensor(), mask[2] ? gb : at::Tensor()};
  }

  void release_variables() override {
    x.reset_data();
    weight.reset_data();
  }

  torch::autograd::SavedVariable x, weight;
  bool has_bias = false;
};

at::Tensor causal_toeplitz_autograd(const at::Tensor& x, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias) {
  const at::Tensor b = bias.value_or(at::Tensor());
  std::shared_ptr<CausalToeplitzBackward> grad_fn;
  if (torch::autograd::compute_requires_grad(x, weight, b)) {
    grad_fn = std::shared_ptr<CausalToeplitzBackward>(new CausalToeplitzBackward(), torch::autograd::deleteNode);
    grad_fn->set_next_edges(torch::autograd::collect_next_edges(x, weight, b));
    grad_fn->x = torch::autograd::SavedVariable(x, false);
    grad_fn->weight = torch::autograd::SavedVariable(weight, false);
    grad_fn->has_bias = b.defined();
  }
  at::Tensor y;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    y = ops::causal_toeplitz(x, weight, bias);
  }
  if (grad_fn) torch::autograd::set_history(y, grad_fn);
  return y;
}

struct CausalToeplitzDoubleBackward : public torch::autograd::Node {
  std::string name() const override { return "CausalToeplitzDoubleBackward"; }
  variable_list apply(variable_list&&) override {
    TORCH_CHECK(false,
                "causal_toeplitz: double backward is not supported; differentiate the op once "
                "(create_graph=True through tmm.ops.causal_toeplitz is not available)");
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_autograd(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight, std::array<bool, 3> mask) {
  std::shared_ptr<CausalToeplitzDoubleBackward> grad_fn;
  if (torch::autograd::compute_requires_grad(grad_y, x, weight)) {
    grad_fn = std::shared_ptr<CausalToeplitzDoubleBackward>(new CausalToeplitzDoubleBackward(),
                                                            torch::autograd::deleteNode);
    grad_fn->set_next_edges(torch::autograd::collect_next_edges(grad_y, x, weight));
  }
  std::tuple<at::Tensor, at::Tensor, at::Tensor> grads;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    grads = ops::causal_toeplitz_backward(grad_y, x, weight, mask);
  }
  if (grad_fn) {
    for (const at::Tensor* g : {&std::get<0>(grads), &std::get<1>(grads), &std::get<2>(grads)})
      torch::autograd::set_history(*g, grad_fn);
  }
  return grads;
}

}  // namespace
}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, Autograd, m) {
  m.impl("causal_toeplitz", &tmm::detail::causal_toeplitz_autograd);
  m.impl("causal_toeplitz_backward", &tmm::detail::causal_toeplitz_backward_autograd);
}
