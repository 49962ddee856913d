#include "models/layers.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

namespace tmm::models {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;  // at least float32
  const at::Tensor xf = x.to(acc);
  const at::Tensor y = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (y * weight.to(acc)).to(x.scalar_type());
}

torch::nn::AnyModule make_norm(NormKind kind, int64_t dim) {
  if (kind == NormKind::RMSNorm) return torch::nn::AnyModule(RMSNorm(dim));
  return torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kLayerNormEps)));
}

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear layer(torch::nn::LinearOptions(in, out).bias(bias));
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_normal_(layer->weight, 0.0, torch::kFanIn, torch::kReLU);
  if (bias) layer->bias.zero_();
  return layer;
}

at::Tensor activation(Activation kind, const at::Tensor& x) {
  switch (kind) {
    case Activation::SiLU: return at::silu(x);
    case Activation::GELU: return at::gelu(x);
    case Activation::ReLU: return at::relu(x);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown activation ", static_cast<int>(kind));
  return x;
}

}  // namespace tmm::models
