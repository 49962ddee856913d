// Small layers shared by the zoo's models.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "tmm/models/config.h"

namespace tmm::models {

// make_norm's epsilons (tmm.nn reads them through tmm._C._norm_eps()).
inline constexpr double kRMSNormEps = 1e-6;
inline constexpr double kLayerNormEps = 1e-5;  // torch's default, as the TMM authors' nn.LayerNorm

// y = x / rms(x) * weight, over the last dimension (computed in float32 at least).
class RMSNormImpl : public torch::nn::Module {
 public:
  explicit RMSNormImpl(int64_t dim, double eps = kRMSNormEps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;
  double eps;
};
TORCH_MODULE(RMSNorm);

// LayerNorm (with bias) or RMSNorm over the last dimension of size dim.
torch::nn::AnyModule make_norm(NormKind kind, int64_t dim);

// Linear layers are initialised as the TMM authors do: Kaiming-normal
// (fan-in, gain sqrt 2) weights, zero biases.
torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias);

at::Tensor activation(Activation kind, const at::Tensor& x);

}  // namespace tmm::models
