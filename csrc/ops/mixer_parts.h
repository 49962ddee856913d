// The pieces the mixer ops (csrc/ops/{hyena,mamba2,attention}.cpp) are made
// of, which the C++ models' incremental decoders reuse: one definition of
// each computation. Internal; the ops themselves are in tmm/ops.h.
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

namespace tmm::ops::parts {

// x W^T + b as torch::nn::Linear computes it (the C++ frontend's F::linear:
// addmm for 2-D x, else matmul and then the bias added), so that the ops and
// the C++ zoo's own Linear layers agree bitwise, gradients included.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias = std::nullopt);

// --- Hyena ---
// Positions in float32 (float64 for a float64 filter): bf16 cannot count to 512.
at::TensorOptions hyena_feature_options(const at::Tensor& like);
// L x emb_dim: t_p = p / (max_len - 1), then cosine and sine bands.
at::Tensor hyena_positional_features(int64_t L, int64_t max_len, int64_t emb_dim, const at::TensorOptions& opt);
// L x d: exp(-t_p |delta_c|), ones when not modulate.
at::Tensor hyena_decay(int64_t L, int64_t max_len, int64_t d, bool modulate, const at::TensorOptions& opt);
// d x L: the filter h (without D) from the MLP's tensors w0, b0, w1, b1, w2, b2, w3.
at::Tensor hyena_implicit_filter(at::TensorList mlp, const at::Tensor& freq, int64_t L, int64_t max_len,
                                 bool modulate);
// The causal depthwise conv over B x L x C (weight C x 1 x w): B x L x C, contiguous.
at::Tensor short_conv(const at::Tensor& u, const at::Tensor& weight, const at::Tensor& bias);

// --- Mamba2 ---
// The chunked SSD scan (no D term, zero initial state).
//   x:  batch x L x H x P      dt: batch x L x H (already positive)
//   A:  H (negative)           B, C: batch x L x G x N, H % G == 0
// Returns y: batch x L x H x P with, per head h (group g = h / (H/G)),
//   s_t = exp(A_h dt_t) s_{t-1} + dt_t x_t B_t^T  (P x N, s_{-1} = 0)
//   y_t = s_t C_t.
// L need not be a multiple of chunk_size (the tail chunk is zero-padded).
// Computed in the dtype of x; callers upcast low-precision inputs.
// final_state, when given, receives s_{L-1}: batch x H x P x N (zeros for
// L = 0), what a recurrence continuing after the sequence starts from.
at::Tensor mamba2_ssd_chunked(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                              const at::Tensor& C, int64_t chunk_size, at::Tensor* final_state);
// The scan's operands in at least float32 (float64 stays float64): shared by
// the scan and the decoder's steps.
struct Mamba2ScanInputs {
  at::Tensor x, B, C, dt, A, D;  // batch x L x H x P, batch x L x G x N (twice), batch x L x H, H, H
  // y (batch x L x H x P, the scan of these inputs) plus the skip D x, as batch x L x H*P.
  at::Tensor with_skip(const at::Tensor& y) const { return (y + x * D.unsqueeze(-1)).flatten(2); }
};
Mamba2ScanInputs mamba2_scan_inputs(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias,
                                    const at::Tensor& A_log, const at::Tensor& B, const at::Tensor& C,
                                    const at::Tensor& D, int64_t ngroups);
// The mixer's scan, from the conv's output and in_proj's raw dt, computed in
// at least float32 (float64 stays float64), per head h of group g = h / (H/G):
//   dt = softplus(dt_raw + dt_bias),  A = -exp(A_log)
//   y = ssd_chunked(x, dt, A, B, C) + D x
//   x: batch x L x H*P   dt_raw: batch x L x H   dt_bias, A_log, D: H
//   B, C: batch x L x G*N with G = ngroups
// Returns y: batch x L x H*P in that dtype; final_state as ssd_chunked's.
at::Tensor mamba2_ssd_scan(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias,
                           const at::Tensor& A_log, const at::Tensor& B, const at::Tensor& C, const at::Tensor& D,
                           int64_t ngroups, int64_t chunk_size, at::Tensor* final_state);
// Causal depthwise convolution along the sequence.
//   x: batch x L x C, weight: C x 1 x K (torch Conv1d layout), bias: C
//   y[b,t,c] = bias[c] + sum_{k<K} weight[c,0,k] * x[b, t-(K-1)+k, c]
//   (terms with a negative time index are zero).
at::Tensor mamba2_causal_depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
// Gated RMSNorm ("norm before gate = false"): g = y * silu(z), normalised
// over each of `groups` equal slices of the last dimension, times weight.
at::Tensor mamba2_gated_rms_norm(const at::Tensor& y, const at::Tensor& z, const at::Tensor& weight, int64_t groups,
                                 double eps);
// out_proj(gated_rms_norm(y, z) in dtype): the mixer's last step.
at::Tensor mamba2_output(const at::Tensor& y, const at::Tensor& z, const at::Tensor& norm_weight,
                         const at::Tensor& out_weight, int64_t groups, double eps, at::ScalarType dtype);

// --- Attention ---
// x B x L x d -> B x heads x L x head_dim (heads = w rows / head_dim), RoPE at
// positions start, start + 1, ... when rope.
at::Tensor attention_heads(const at::Tensor& x, const at::Tensor& w, int64_t head_dim, double rope_theta,
                           int64_t start, bool rope);
// B x H_kv x S x hd -> B x H_kv * n_rep x S x hd: each key/value head serves n_rep consecutive query heads.
at::Tensor repeat_kv(const at::Tensor& kv, int64_t n_rep);
// Causal attention of a whole sequence from position 0 (within the last
// `window` positions when 0 < window < L); q B x H x L x hd, k and v already repeated.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                            double dropout);
// B x H x L x hd -> wo(B x L x H*hd).
at::Tensor merge_heads(const at::Tensor& y, const at::Tensor& wo);

}  // namespace tmm::ops::parts
