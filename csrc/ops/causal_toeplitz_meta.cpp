// Meta (fake) kernels: shapes and dtypes only, with the same argument
// checks as the real kernels, on symbolic sizes so that torch.compile
// traces the ops with dynamic shapes too.
#include <torch/library.h>

#include <ATen/ops/empty.h>

#include "ops/checks.h"

namespace tmm::detail {
namespace {

at::Tensor causal_toeplitz_meta(const at::Tensor& x, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias) {
  const auto s = check_forward_sizes<c10::SymInt>(x, weight, bias);
  return at::empty_symint({s.B, s.L, s.C}, x.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_meta(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> mask) {
  const auto s = check_backward_sizes<c10::SymInt>(grad_y, x, weight);
  const auto opts = x.options();
  const c10::SymInt none(0);
  return {mask[0] ? at::empty_symint({s.B, s.L, s.C}, opts) : at::empty_symint({none}, opts),
          mask[1] ? at::empty_symint({s.G, s.K, s.N}, opts) : at::empty_symint({none}, opts),
          mask[2] ? at::empty_symint({s.G, s.N}, opts) : at::empty_symint({none}, opts)};
}

}  // namespace
}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, Meta, m) {
  m.impl("causal_toeplitz", &tmm::detail::causal_toeplitz_meta);
  m.impl("causal_toeplitz_backward", &tmm::detail::causal_toeplitz_backward_meta);
}
