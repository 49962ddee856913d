// Public C++ entry points of the tmm operators.
//
// Each function calls through the PyTorch dispatcher, so the CPU, CUDA, Meta
// and Autograd kernels registered under the `tmm` namespace are all reached
// from here: `y.sum().backward()` works from a LibTorch program.
#pragma once

#include <array>
#include <optional>
#include <tuple>

#include <ATen/core/Tensor.h>

namespace tmm::ops {

// Causal Toeplitz mixing along the sequence (a learned long convolution).
//   x:      B x L x C   (any strides)
//   weight: G x K x N   (N >= L, C % G == 0, 1 <= K <= C / G)
//   bias:   G x N, or none
// With Cg = C / G, g = c / Cg and lo = g * Cg:
//   y[b,t,c] = sum_{i<K} sum_{s<=t} weight[g,i,t-s] * x[b,s,c-(K-1)+i]
//              + bias[g,t]
// where a source channel below lo contributes zero. Returns B x L x C,
// contiguous, in x's dtype.
at::Tensor causal_toeplitz(const at::Tensor& x, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias = std::nullopt);

// The hand-written backward: (grad_x, grad_weight, grad_bias), each computed
// only where output_mask says so (an unrequested one is an empty tensor of
// shape [0]). grad_weight is G x K x N and grad_bias G x N; the taps and
// bias entries past L get zero gradient.
std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> output_mask = {true, true, true});

}  // namespace tmm::ops
