// Public C++ entry points of the tmm operators.
//
// Each function calls through the PyTorch dispatcher, so the CPU, CUDA, Meta
// and Autograd kernels registered under the `tmm` namespace are all reached
// from here: `y.sum().backward()` works from a LibTorch program.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

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

// The masked mixer (TMM's ablation): a learned lower-triangular matrix per group.
//   x: B x L x C, matrix: G x N x N (its upper triangle ignored), bias: G x N
//   y[b,t,g,:] = sum_{s<=t} matrix[g,t,s] x[b,s,g,:] + bias[g,t]
at::Tensor causal_matrix_mix(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias);

// TMM's token mixer (docs/models.md), B x L x d -> B x L x d:
//   h = in_proj(x)                              (when in_weight is given: heads)
//   h = mix(h; weight, bias)                    causal_toeplitz, or causal_matrix_mix when masked
//   h = mix(dropout(silu(h)); weight2, bias2)   (when weight2 is given: "expanded")
//   y = out_proj(h)                             (when out_weight is given)
// dropout applies in training only (train).
at::Tensor toeplitz_mixer(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                          const std::optional<at::Tensor>& in_weight, const std::optional<at::Tensor>& in_bias,
                          const std::optional<at::Tensor>& out_weight, const std::optional<at::Tensor>& out_bias,
                          const std::optional<at::Tensor>& weight2, const std::optional<at::Tensor>& bias2,
                          bool masked = false, double dropout = 0.0, bool train = false);

// Hyena's implicit filter as causal_toeplitz's d x 1 x L weight: positional
// features -> (Linear, sin(freq *)) x 3 -> Linear -> decay (when modulate),
// with D added to the lag-0 tap. mlp: w0, b0, w1, b1, w2, b2, w3.
at::Tensor hyena_filter(at::TensorList mlp, const at::Tensor& freq, const at::Tensor& D, int64_t length,
                        int64_t max_len, bool modulate);

// The order-2 Hyena operator, B x L x d -> B x L x d:
//   x0, x1, v = short_conv(in_proj(x)) split in three
//   y = out_proj(causal_toeplitz(v * x1, hyena_filter(...)) * x0)
at::Tensor hyena_operator(const at::Tensor& x, const at::Tensor& in_weight, const at::Tensor& in_bias,
                          const at::Tensor& short_weight, const at::Tensor& short_bias, at::TensorList filter_mlp,
                          const at::Tensor& filter_freq, const at::Tensor& filter_D, const at::Tensor& out_weight,
                          const at::Tensor& out_bias, int64_t max_len, bool modulate);

// Mamba2's pieces (the SSD of "ssd_minimal"; docs/models.md).
//   ssd_chunked: x b x L x H x P, dt b x L x H, A H, B and C b x L x G x N -> b x L x H x P
//   ssd_scan: dt = softplus(dt_raw + dt_bias), A = -exp(A_log), the chunked scan, + D x;
//             x b x L x H*P, B and C b x L x G*N -> b x L x H*P, in at least float32
at::Tensor mamba2_ssd_chunked(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                              const at::Tensor& C, int64_t chunk_size);
at::Tensor mamba2_ssd_scan(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias,
                           const at::Tensor& A_log, const at::Tensor& B, const at::Tensor& C, const at::Tensor& D,
                           int64_t ngroups, int64_t chunk_size);
// x b x L x C, weight C x 1 x K, bias C: y[t] = bias + sum_k weight[k] x[t-(K-1)+k].
at::Tensor mamba2_causal_depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
// RMSNorm of y * silu(z) in `groups` groups of the last dimension, times weight.
at::Tensor mamba2_gated_rms_norm(const at::Tensor& y, const at::Tensor& z, const at::Tensor& weight, int64_t groups,
                                 double eps);

// The Mamba2 mixer, B x L x d -> B x L x d: in_proj -> [z, xBC, dt]; xBC =
// silu(causal depthwise conv); the scan; gated RMSNorm with z; out_proj.
at::Tensor mamba2_mixer(const at::Tensor& u, const at::Tensor& in_weight, const at::Tensor& conv_weight,
                        const at::Tensor& conv_bias, const at::Tensor& dt_bias, const at::Tensor& A_log,
                        const at::Tensor& D, const at::Tensor& norm_weight, const at::Tensor& out_weight,
                        int64_t ngroups, int64_t chunk_size, double norm_eps);

// Llama's attention, B x L x d -> B x L x d: q, k, v projections (no bias),
// RoPE on q and k, causal attention (within the last `window` positions when
// window > 0; each key/value head serves n_heads / n_kv_heads query heads),
// dropout on the weights in training, wo.
at::Tensor attention(const at::Tensor& x, const at::Tensor& wq, const at::Tensor& wk, const at::Tensor& wv,
                     const at::Tensor& wo, int64_t n_heads, int64_t n_kv_heads, double rope_theta,
                     int64_t window = 0, double dropout = 0.0, bool train = false);

}  // namespace tmm::ops
