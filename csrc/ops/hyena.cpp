// Hyena's implicit filter and the order-2 Hyena operator as
// CompositeImplicitAutograd ops (tmm/ops.h): their autograd, shapes and
// compiled graphs come from the ATen ops they are made of. The C++ model's
// filter and decoder reuse the pieces (mixer_parts.h).
#include <cmath>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::ops {
namespace parts {

constexpr double kPi = 3.14159265358979323846;

// Positions are computed in float32 (float64 for a float64 filter): bf16
// cannot even count to 512.
at::TensorOptions hyena_feature_options(const at::Tensor& like) {
  return like.options().dtype(like.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
}

// t_p = p / (max_len - 1): the first of the positional features and the
// time of the decay (safari's linspace(0, 1, max_len)[:L]).
at::Tensor normalized_time(int64_t L, int64_t max_len, const at::TensorOptions& opt) {
  const at::Tensor p = at::arange(L, opt);
  return max_len > 1 ? p / double(max_len - 1) : p * 0.0;  // L
}

at::Tensor hyena_positional_features(int64_t L, int64_t max_len, int64_t emb_dim, const at::TensorOptions& opt) {
  const int64_t bands = (emb_dim - 1) / 2;
  const at::Tensor t = normalized_time(L, max_len, opt).unsqueeze(1);                    // L x 1
  const at::Tensor w = at::arange(L, opt).unsqueeze(1) * (2.0 * kPi / double(max_len));  // L x 1
  const at::Tensor f = at::linspace(1e-4, double(bands - 1), bands, opt).unsqueeze(0);  // 1 x bands
  const at::Tensor fw = w * f;                                                           // L x bands
  return at::cat({t, at::cos(fw), -at::sin(fw)}, 1);                                     // L x emb_dim
}

at::Tensor hyena_decay(int64_t L, int64_t max_len, int64_t d, bool modulate, const at::TensorOptions& opt) {
  if (!modulate) return at::ones({L, d}, opt);
  // Channel c decays to 1e-2 at t between 1.5 (slowest, c = 0) and 0.3 (fastest, c = d-1).
  const double target = 1e-2, fast_decay_pct = 0.3, slow_decay_pct = 1.5;
  const double max_decay = std::log(target) / fast_decay_pct, min_decay = std::log(target) / slow_decay_pct;
  const at::Tensor deltas = at::linspace(min_decay, max_decay, d, opt).abs();  // d
  const at::Tensor t = normalized_time(L, max_len, opt).unsqueeze(1);         // L x 1
  return at::exp(-t * deltas.unsqueeze(0));                                   // L x d
}

// The d x L filter h (without D) from the MLP's tensors {w0, b0, w1, b1, w2, b2, w3}.
at::Tensor hyena_implicit_filter(at::TensorList mlp, const at::Tensor& freq, int64_t L, int64_t max_len, bool modulate) {
  TORCH_CHECK(mlp.size() == 7, "hyena_filter: mlp must be the 7 tensors w0, b0, w1, b1, w2, b2, w3, got ", mlp.size());
  const at::ScalarType dtype = freq.scalar_type();
  const auto opt = hyena_feature_options(freq);
  at::Tensor h = hyena_positional_features(L, max_len, mlp[0].size(1), opt).to(dtype);  // L x emb_dim
  for (size_t i = 0; i < 3; ++i) h = at::sin(freq * at::linear(h, mlp[2 * i], mlp[2 * i + 1]));  // L x F
  h = at::linear(h, mlp[6]);                                                                       // L x d
  h = h * hyena_decay(L, max_len, mlp[6].size(0), modulate, opt).to(dtype);
  return h.t();  // d x L
}

at::Tensor short_conv(const at::Tensor& u, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t C = weight.size(0), w = weight.size(2);
  const at::Tensor padded = at::constant_pad_nd(u.transpose(1, 2), {w - 1, 0});  // B x C x (w-1+L)
  return at::conv1d(padded, weight, bias, /*stride=*/at::IntArrayRef{1}, /*padding=*/at::IntArrayRef{0},
                    /*dilation=*/at::IntArrayRef{1}, /*groups=*/C)
      .transpose(1, 2)
      .contiguous();  // B x L x C
}

}  // namespace parts

namespace {

// The d x 1 x L causal_toeplitz weight: h with D added to the lag-0 tap.
at::Tensor hyena_filter_impl(at::TensorList mlp, const at::Tensor& freq, const at::Tensor& D, int64_t L, int64_t max_len,
                        bool modulate) {
  TORCH_CHECK(L >= 1, "HyenaFilter: expected a filter length >= 1, got ", L);
  const at::Tensor h = parts::hyena_implicit_filter(mlp, freq, L, max_len, modulate);  // d x L
  const at::Tensor lag0 = h.narrow(1, 0, 1) + D.unsqueeze(1);               // d x 1: h[:, 0] + D
  return at::cat({lag0, h.narrow(1, 1, L - 1)}, 1).unsqueeze(1);            // d x 1 x L
}

// y = out_proj(h * (v x1) + D (v x1)) * x0), x0, x1, v the thirds of short_conv(in_proj(x)).
at::Tensor hyena_operator_impl(const at::Tensor& x, const at::Tensor& in_weight, const at::Tensor& in_bias,
                          const at::Tensor& short_weight, const at::Tensor& short_bias, at::TensorList filter_mlp,
                          const at::Tensor& filter_freq, const at::Tensor& filter_D, const at::Tensor& out_weight,
                          const at::Tensor& out_bias, int64_t max_len, bool modulate) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == in_weight.size(1), "hyena_operator: expected x of shape B x L x ",
              in_weight.size(1), ", got ", x.sizes());
  if (x.size(1) == 0) return at::zeros_like(x);
  const at::Tensor u = parts::short_conv(parts::linear(x, in_weight, in_bias), short_weight, short_bias);  // B x L x 3d
  const auto x0_x1_v = u.chunk(3, -1);
  // This order of the graph's nodes (the gate, then the filter) is the one the
  // gradients are summed in: kept so that results stay bitwise what they are.
  const at::Tensor gated = x0_x1_v[2] * x0_x1_v[1];
  const at::Tensor weight = ops::hyena_filter(filter_mlp, filter_freq, filter_D, x.size(1), max_len, modulate);
  const at::Tensor v = ops::causal_toeplitz(gated, weight, std::nullopt);  // the long conv
  return parts::linear(v * x0_x1_v[0], out_weight, out_bias);
}

}  // namespace

TORCH_LIBRARY_IMPL(tmm, CompositeImplicitAutograd, m) {
  m.impl("hyena_filter", &hyena_filter_impl);
  m.impl("hyena_operator", &hyena_operator_impl);
}

}  // namespace tmm::ops
