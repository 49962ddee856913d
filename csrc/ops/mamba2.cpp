// Mamba2's scan and the pieces around it (the "ssd_minimal" algorithm in
// ATen ops), and the Mamba2 mixer made of them, as CompositeImplicitAutograd
// ops (tmm/ops.h): their autograd, shapes and compiled graphs come from the
// ATen ops they are made of. The C++ decoder reuses the pieces (mixer_parts.h).
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::ops {
namespace parts {
namespace {

// x: ... x T  ->  ... x T x T with out[..., i, j] = x[j+1] + ... + x[i] for
// i >= j (0 on the diagonal) and -inf above it, so exp(out) is the decay from
// step j to step i of a scalar recurrence, masked to be causal. Summing the
// masked terms (rather than differencing one cumsum) keeps it exact when the
// cumulative sums grow large.
at::Tensor segsum(const at::Tensor& x) {
  const int64_t T = x.size(-1);
  const at::Tensor idx = at::arange(T, x.options().dtype(at::kLong));
  const at::Tensor i = idx.unsqueeze(1), j = idx.unsqueeze(0);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.push_back(T);
  // terms[..., k, j] = x[..., k] where k > j, else 0; cumsum over k.
  const at::Tensor terms = x.unsqueeze(-1).expand(shape).masked_fill(i <= j, 0);
  return terms.cumsum(-2).masked_fill(i < j, -std::numeric_limits<double>::infinity());
}

}  // namespace

at::Tensor mamba2_ssd_chunked(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                       const at::Tensor& C, int64_t chunk_size, at::Tensor* final_state) {
  TORCH_CHECK(x.dim() == 4, "ssd_chunked: x must be batch x L x H x P, got ", x.sizes());
  const int64_t bsz = x.size(0), L = x.size(1), H = x.size(2), P = x.size(3);
  TORCH_CHECK(dt.sizes() == at::IntArrayRef({bsz, L, H}), "ssd_chunked: dt must be ", at::IntArrayRef({bsz, L, H}),
              ", got ", dt.sizes());
  TORCH_CHECK(A.dim() == 1 && A.size(0) == H, "ssd_chunked: A must have ", H, " entries, got ", A.sizes());
  TORCH_CHECK(B.dim() == 4 && B.size(0) == bsz && B.size(1) == L && B.size(2) > 0 && H % B.size(2) == 0,
              "ssd_chunked: B must be batch x L x G x N with G dividing H = ", H, ", got ", B.sizes());
  TORCH_CHECK(C.sizes() == B.sizes(), "ssd_chunked: C must have B's shape ", B.sizes(), ", got ", C.sizes());
  TORCH_CHECK(chunk_size > 0, "ssd_chunked: chunk_size must be positive, got ", chunk_size);
  const int64_t G = B.size(2), N = B.size(3), R = H / G;  // R heads share each group's B and C
  if (L == 0) {
    if (final_state) *final_state = at::zeros({bsz, H, P, N}, x.options());
    return at::zeros_like(x);
  }

  const int64_t Q = chunk_size, nc = (L + Q - 1) / Q, pad = nc * Q - L;
  // Discretise: the input enters as dt * x, the per-step log-decay is dt * A.
  at::Tensor Xd = x * dt.unsqueeze(-1);  // b x L x H x P
  at::Tensor Ad = dt * A;                 // b x L x H
  at::Tensor Bp = B, Cp = C;
  if (pad > 0) {  // zero tail: no input, no decay; causal, so earlier outputs are untouched
    Xd = at::constant_pad_nd(Xd, {0, 0, 0, 0, 0, pad});
    Ad = at::constant_pad_nd(Ad, {0, 0, 0, pad});
    Bp = at::constant_pad_nd(B, {0, 0, 0, 0, 0, pad});
    Cp = at::constant_pad_nd(C, {0, 0, 0, 0, 0, pad});
  }
  const at::Tensor X = Xd.reshape({bsz, nc, Q, G, R, P});                             // b c l g r p
  const at::Tensor Ac = Ad.reshape({bsz, nc, Q, G, R}).permute({0, 3, 4, 1, 2});      // b g r c l
  const at::Tensor Bc = Bp.reshape({bsz, nc, Q, G, N});                              // b c l g n
  const at::Tensor Cc = Cp.reshape({bsz, nc, Q, G, N});                              // b c l g n
  const at::Tensor Acum = Ac.cumsum(-1);                                               // b g r c l

  // 1. Inside each chunk: y_l = sum_{s<=l} (C_l . B_s) exp(A_{s+1..l}) X_s.
  const at::Tensor decay_in = segsum(Ac).exp().permute({0, 3, 1, 2, 4, 5});          // b c g r l s
  const at::Tensor CB = at::einsum("bclgn,bcsgn->bcgls", {Cc, Bc});                   // b c g l s
  const at::Tensor Y_diag = at::einsum("bcgrls,bcsgrp->bclgrp", {CB.unsqueeze(3) * decay_in, X});

  // 2. The state each chunk leaves behind (from its own inputs only).
  const at::Tensor decay_to_end = (Acum.narrow(-1, Q - 1, 1) - Acum).exp();             // b g r c l
  const at::Tensor Xw = X * decay_to_end.permute({0, 3, 4, 1, 2}).unsqueeze(-1);        // b c l g r p
  at::Tensor states = at::einsum("bclgn,bclgrp->bcgrpn", {Bc, Xw});                   // b c g r p n

  // 3. Across chunks: the state entering chunk z sums the states left by
  // chunks c < z, decayed over the chunks in between (zero initial state).
  // Entry z = nc is the state after the last chunk: the final state (the
  // zero-padded tail neither decays nor adds to it).
  states = at::cat({at::zeros_like(states.narrow(1, 0, 1)), states}, 1);              // b c+1 g r p n
  const at::Tensor chunk_decay = at::constant_pad_nd(Acum.select(-1, Q - 1), {1, 0});  // b g r c+1
  const at::Tensor decay_across = segsum(chunk_decay).exp();                           // b g r z c
  const at::Tensor entering_all = at::einsum("bgrzc,bcgrpn->bzgrpn", {decay_across, states});  // b c+1 g r p n
  const at::Tensor entering = entering_all.narrow(1, 0, nc);                           // b c g r p n
  // clone: its own memory, not a view keeping every chunk's state alive.
  if (final_state) *final_state = entering_all.select(1, nc).reshape({bsz, H, P, N}).clone();

  // 4. Each entering state's contribution: y_l += exp(A_{1..l}) C_l . state.
  const at::Tensor decay_from_start = Acum.exp().permute({0, 3, 4, 1, 2}).unsqueeze(-1);  // b c l g r 1
  const at::Tensor Y_off = at::einsum("bclgn,bcgrpn->bclgrp", {Cc, entering}) * decay_from_start;

  return (Y_diag + Y_off).reshape({bsz, nc * Q, H, P}).narrow(1, 0, L);
}

Mamba2ScanInputs mamba2_scan_inputs(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias,
                       const at::Tensor& A_log, const at::Tensor& B, const at::Tensor& C, const at::Tensor& D,
                       int64_t ngroups) {
  TORCH_CHECK(x.dim() == 3 && dt_raw.dim() == 3 && dt_raw.size(2) > 0 && x.size(2) % dt_raw.size(2) == 0,
              "ssd_scan: x must be batch x L x H*P and dt_raw batch x L x H, got ", x.sizes(), " and ",
              dt_raw.sizes());
  const int64_t H = dt_raw.size(2);
  for (const at::Tensor* t : {&dt_bias, &A_log, &D})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == H, "ssd_scan: dt_bias, A_log and D must have H = ", H,
                " entries, got ", t->sizes());
  TORCH_CHECK(ngroups > 0 && B.dim() == 3 && B.size(2) % ngroups == 0 && C.sizes() == B.sizes(),
              "ssd_scan: B and C must be batch x L x G*N with G = ngroups = ", ngroups, ", got ", B.sizes(), " and ",
              C.sizes());
  const auto ct = at::promote_types(x.scalar_type(), at::kFloat);
  const auto heads = [](const at::Tensor& t, int64_t n) {  // batch x L x n*k -> batch x L x n x k
    return t.reshape({t.size(0), t.size(1), n, t.size(2) / n});
  };
  return {heads(x.to(ct), H),
          heads(B.to(ct), ngroups),
          heads(C.to(ct), ngroups),
          at::softplus(dt_raw.to(ct) + dt_bias.to(ct)),
          -at::exp(A_log.to(ct)),
          D.to(ct)};
}

at::Tensor mamba2_ssd_scan(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias, const at::Tensor& A_log,
                    const at::Tensor& B, const at::Tensor& C, const at::Tensor& D, int64_t ngroups, int64_t chunk_size,
                    at::Tensor* final_state) {
  const Mamba2ScanInputs in = mamba2_scan_inputs(x, dt_raw, dt_bias, A_log, B, C, D, ngroups);
  return in.with_skip(mamba2_ssd_chunked(in.x, in.dt, in.A, in.B, in.C, chunk_size, final_state));
}

at::Tensor mamba2_causal_depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 3, "causal_depthwise_conv1d: x must be batch x L x C, got ", x.sizes());
  const int64_t L = x.size(1), C = x.size(2);
  TORCH_CHECK(weight.dim() == 3 && weight.size(0) == C && weight.size(1) == 1,
              "causal_depthwise_conv1d: weight must be C x 1 x K with C = ", C, ", got ", weight.sizes());
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == C, "causal_depthwise_conv1d: bias must have ", C,
              " entries, got ", bias.sizes());
  const int64_t K = weight.size(2);
  const at::Tensor w = weight.select(1, 0).to(x.scalar_type());   // C x K
  const at::Tensor xp = at::constant_pad_nd(x, {0, 0, K - 1, 0});  // K-1 zeros before t = 0
  at::Tensor y = bias.to(x.scalar_type()).expand_as(x);
  for (int64_t k = 0; k < K; ++k) y = y + xp.narrow(1, k, L) * w.select(1, k);
  return y;
}

at::Tensor mamba2_gated_rms_norm(const at::Tensor& y, const at::Tensor& z, const at::Tensor& weight, int64_t groups,
                          double eps) {
  TORCH_CHECK(y.sizes() == z.sizes(), "gated_rms_norm: y ", y.sizes(), " and z ", z.sizes(), " differ");
  const int64_t D = y.size(-1);
  TORCH_CHECK(groups > 0 && D % groups == 0, "gated_rms_norm: ", groups, " groups do not divide ", D);
  std::vector<int64_t> grouped = y.sizes().vec();
  grouped.back() = D / groups;
  grouped.insert(grouped.end() - 1, groups);  // ... x groups x D/groups
  const at::Tensor g = (y * at::silu(z)).reshape(grouped);
  const at::Tensor normed = g * at::rsqrt(g.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.reshape(y.sizes()) * weight.to(y.scalar_type());
}

at::Tensor mamba2_output(const at::Tensor& y, const at::Tensor& z, const at::Tensor& norm_weight,
                         const at::Tensor& out_weight, int64_t groups, double eps, at::ScalarType dtype) {
  return parts::linear(mamba2_gated_rms_norm(y, z.to(y.scalar_type()), norm_weight, groups, eps).to(dtype), out_weight);
}

}  // namespace parts

namespace {

at::Tensor ssd_chunked(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                       const at::Tensor& C, int64_t chunk_size) {
  return parts::mamba2_ssd_chunked(x, dt, A, B, C, chunk_size, nullptr);
}

at::Tensor ssd_scan(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias, const at::Tensor& A_log,
                    const at::Tensor& B, const at::Tensor& C, const at::Tensor& D, int64_t ngroups,
                    int64_t chunk_size) {
  return parts::mamba2_ssd_scan(x, dt_raw, dt_bias, A_log, B, C, D, ngroups, chunk_size, nullptr);
}

at::Tensor mixer(const at::Tensor& u, const at::Tensor& in_weight, const at::Tensor& conv_weight,
                 const at::Tensor& conv_bias, const at::Tensor& dt_bias, const at::Tensor& A_log, const at::Tensor& D,
                 const at::Tensor& norm_weight, const at::Tensor& out_weight, int64_t ngroups, int64_t chunk_size,
                 double norm_eps) {
  const int64_t di = out_weight.size(1), H = dt_bias.size(0), GN = (conv_weight.size(0) - di) / 2;
  TORCH_CHECK(u.dim() == 3 && u.size(2) == in_weight.size(1), "mamba2_mixer: expected u of shape batch x L x ",
              in_weight.size(1), ", got ", u.sizes());
  TORCH_CHECK(in_weight.size(0) == 2 * di + 2 * GN + H, "mamba2_mixer: in_weight has ", in_weight.size(0),
              " rows, expected 2 d_inner + 2 ngroups d_state + nheads = ", 2 * di + 2 * GN + H);
  const auto zxbcdt = parts::linear(u, in_weight).split_with_sizes({di, di + 2 * GN, H}, -1);  // z, xBC, dt
  const at::Tensor xBC = at::silu(parts::mamba2_causal_depthwise_conv1d(zxbcdt[1], conv_weight, conv_bias));
  const auto xbc = xBC.split_with_sizes({di, GN, GN}, -1);  // x, B, C
  const at::Tensor y = parts::mamba2_ssd_scan(xbc[0], zxbcdt[2], dt_bias, A_log, xbc[1], xbc[2], D, ngroups,
                                              chunk_size, nullptr);
  return parts::mamba2_output(y, zxbcdt[0], norm_weight, out_weight, ngroups, norm_eps, u.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(tmm, CompositeImplicitAutograd, m) {
  m.impl("mamba2_ssd_chunked", &ssd_chunked);
  m.impl("mamba2_ssd_scan", &ssd_scan);
  m.impl("mamba2_causal_depthwise_conv1d", &parts::mamba2_causal_depthwise_conv1d);
  m.impl("mamba2_gated_rms_norm", &parts::mamba2_gated_rms_norm);
  m.impl("mamba2_mixer", &mixer);
}

}  // namespace tmm::ops
