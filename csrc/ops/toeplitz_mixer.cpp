// TMM's token mixer and the masked mixer (its ablation) as
// CompositeImplicitAutograd ops (tmm/ops.h): their autograd, shapes and
// compiled graphs come from the ops they are made of (causal_toeplitz's own
// kernels, ATen's).
#include <optional>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::ops {
namespace {

at::Tensor causal_matrix_mix_impl(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias) {
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2), G = matrix.size(0);
  const at::Tensor M = matrix.narrow(1, 0, L).narrow(2, 0, L).tril();  // G x L x L
  at::Tensor y = at::einsum("gts,bsgc->btgc", {M, x.reshape({B, L, G, C / G})});
  y = y + bias.narrow(1, 0, L).t().reshape({1, L, G, 1});
  return y.reshape({B, L, C});
}

at::Tensor mix(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, bool masked) {
  TORCH_CHECK(!masked || bias.has_value(), "toeplitz_mixer: the masked mixer needs its bias");
  return masked ? causal_matrix_mix(x, weight, *bias) : causal_toeplitz(x, weight, bias);
}

}  // namespace

namespace parts {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  const bool with_bias = bias.has_value() && bias->defined();
  if (x.dim() == 2 && with_bias) return at::addmm(*bias, x, weight.t());
  at::Tensor y = x.matmul(weight.t());
  if (with_bias) y += *bias;
  return y;
}

}  // namespace parts

namespace {

at::Tensor toeplitz_mixer_impl(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               const std::optional<at::Tensor>& in_weight, const std::optional<at::Tensor>& in_bias,
                               const std::optional<at::Tensor>& out_weight, const std::optional<at::Tensor>& out_bias,
                               const std::optional<at::Tensor>& weight2, const std::optional<at::Tensor>& bias2,
                               bool masked, double dropout, bool train) {
  at::Tensor h = in_weight ? parts::linear(x, *in_weight, in_bias) : x;  // B x L x d
  h = mix(h, weight, bias, masked);
  if (weight2) h = mix(at::dropout(at::silu(h), dropout, train), *weight2, bias2, masked);
  return out_weight ? parts::linear(h, *out_weight, out_bias) : h;
}

}  // namespace

TORCH_LIBRARY_IMPL(tmm, CompositeImplicitAutograd, m) {
  m.impl("causal_matrix_mix", &causal_matrix_mix_impl);
  m.impl("toeplitz_mixer", &toeplitz_mixer_impl);
}

}  // namespace tmm::ops
