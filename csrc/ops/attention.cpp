// Llama's attention (RoPE, grouped key/value heads, causal or sliding-window)
// as a CompositeImplicitAutograd op (tmm/ops.h): its autograd, shapes and
// compiled graphs come from the ATen ops it is made of. The C++ model's KV-cache
// decoder reuses the pieces (mixer_parts.h).
#include <optional>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::ops {
namespace parts {
namespace {

// x: B x H x L x hd at positions start, start + 1, ... Rotates the pair
// (i, i + hd/2) of position p by the angle p * theta^(-2i/hd). Angles and the
// rotation are computed in float32 (float64 for float64 inputs), then cast
// back to x's dtype.
at::Tensor apply_rope(const at::Tensor& x, double theta, int64_t start) {
  const int64_t L = x.size(2), hd = x.size(3);
  const auto dtype = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto opts = x.options().dtype(dtype);
  const at::Tensor inv_freq = 1.0 / at::pow(theta, at::arange(0, hd, 2, opts) / double(hd));  // hd/2
  const at::Tensor angles = at::outer(at::arange(start, start + L, opts), inv_freq);           // L x hd/2
  const at::Tensor emb = at::cat({angles, angles}, -1);                                        // L x hd
  const at::Tensor cos = emb.cos(), sin = emb.sin();
  const at::Tensor xf = x.to(dtype);
  const at::Tensor x1 = xf.narrow(-1, 0, hd / 2), x2 = xf.narrow(-1, hd / 2, hd / 2);
  const at::Tensor rotated = at::cat({-x2, x1}, -1);                                           // rotate_half
  return (xf * cos + rotated * sin).to(x.scalar_type());
}

}  // namespace

at::Tensor attention_heads(const at::Tensor& x, const at::Tensor& w, int64_t head_dim, double rope_theta,
                           int64_t start, bool rope) {
  const int64_t B = x.size(0), L = x.size(1), heads = w.size(0) / head_dim;
  const at::Tensor h = parts::linear(x, w).view({B, L, heads, head_dim}).transpose(1, 2);  // B x heads x L x hd
  return rope ? apply_rope(h, rope_theta, start) : h;
}

at::Tensor repeat_kv(const at::Tensor& kv, int64_t n_rep) {
  return n_rep == 1 ? kv : kv.repeat_interleave(n_rep, 1);
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                            double dropout) {
  const int64_t L = q.size(2);
  if (window > 0 && window < L) {
    // mask[t, s] = true where t - window < s <= t (true = attend).
    const at::Tensor pos = at::arange(L, q.options().dtype(at::kLong));
    const at::Tensor diff = pos.unsqueeze(1) - pos.unsqueeze(0);  // L x L: t - s
    const at::Tensor mask = diff.ge(0).logical_and(diff.lt(window));
    return at::scaled_dot_product_attention(q, k, v, mask, dropout, /*is_causal=*/false);
  }
  return at::scaled_dot_product_attention(q, k, v, std::nullopt, dropout, /*is_causal=*/true);
}

at::Tensor merge_heads(const at::Tensor& y, const at::Tensor& wo) {
  const int64_t B = y.size(0), L = y.size(2);
  return parts::linear(y.transpose(1, 2).reshape({B, L, y.size(1) * y.size(3)}), wo);  // B x L x d
}

}  // namespace parts

namespace {

at::Tensor attention_impl(const at::Tensor& x, const at::Tensor& wq, const at::Tensor& wk, const at::Tensor& wv,
                     const at::Tensor& wo, int64_t n_heads, int64_t n_kv_heads, double rope_theta, int64_t window,
                     double dropout, bool train) {
  TORCH_CHECK(n_heads >= 1 && n_kv_heads >= 1 && n_heads % n_kv_heads == 0,
              "attention: n_kv_heads must divide n_heads, got n_heads ", n_heads, ", n_kv_heads ", n_kv_heads);
  TORCH_CHECK(wq.dim() == 2 && wq.size(0) % n_heads == 0, "attention: wq must have n_heads * head_dim rows, got ",
              wq.sizes(), " for n_heads ", n_heads);
  TORCH_CHECK(x.dim() == 3 && x.size(2) == wq.size(1), "attention: expected x of shape B x L x ", wq.size(1),
              ", got ", x.sizes());
  const int64_t hd = wq.size(0) / n_heads, n_rep = n_heads / n_kv_heads;
  // v, k, q: the order of the graph's nodes is the order x's gradients are summed in.
  const at::Tensor v = parts::attention_heads(x, wv, hd, rope_theta, 0, false);
  const at::Tensor k = parts::attention_heads(x, wk, hd, rope_theta, 0, true);
  const at::Tensor q = parts::attention_heads(x, wq, hd, rope_theta, 0, true);
  const at::Tensor y = parts::causal_attention(q, parts::repeat_kv(k, n_rep), parts::repeat_kv(v, n_rep), window,
                                               train ? dropout : 0.0);
  return parts::merge_heads(y, wo);
}

}  // namespace

TORCH_LIBRARY_IMPL(tmm, CompositeImplicitAutograd, m) { m.impl("attention", &attention_impl); }

}  // namespace tmm::ops
