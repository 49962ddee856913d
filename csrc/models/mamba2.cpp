// Mamba2 (SSD) baseline: the chunked scan in LibTorch tensor ops, the mixer,
// the block and the language model. Math and shapes: tmm/models/mamba2.h.
//
// Initialisation follows mamba_ssm (Mamba2 module + MambaLMHeadModel):
//   in_proj, fc1, head: torch's default Linear init (U(+-1/sqrt(fan_in)));
//   out_proj, fc2: the same, divided by sqrt(n_layers * residuals per layer);
//   conv1d: torch's default Conv1d init (weight and bias);
//   A_log = log(U[1, 16]); softplus(dt_bias) log-uniform in [1e-3, 1e-1]
//   (floored at 1e-4); D = 1; norm weights = 1; embedding N(0, 0.02^2).
#include "tmm/models/mamba2.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/library.h>
#include <torch/nn/init.h>

#include "models/config_reader.h"
#include "models/layers.h"
#include "models/registry.h"

namespace tmm::models {

namespace {

constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtInitFloor = 1e-4;
constexpr double kAInitLo = 1.0, kAInitHi = 16.0;

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

// ---------------------------------------------------------------- config

namespace {
constexpr auto kOwnKeys = TMM_CONFIG_KEYS(d_state, d_conv, expand, headdim, ngroups, chunk_size, d_intermediate);
}  // namespace

Mamba2Config Mamba2Config::from_json_text(const std::string& text) {
  ConfigReader r(text, "mamba2 config");
  Mamba2Config c = read_config<Mamba2Config>(r, kOwnKeys, /*min_layers=*/1);
  r.check(c.d_state > 0, "d_state", "must be positive");
  r.check(c.d_conv > 0, "d_conv", "must be positive");
  r.check(c.expand > 0, "expand", "must be positive");
  r.check(c.headdim > 0, "headdim", "must be positive");
  r.product("expand", c.expand, c.d_model);
  r.check(c.d_inner() % c.headdim == 0, "headdim",
          "must divide d_inner = expand * d_model = " + std::to_string(c.d_inner()) + ", got " +
              std::to_string(c.headdim));
  r.check(c.ngroups > 0, "ngroups", "must be positive");
  r.check(c.nheads() % c.ngroups == 0, "ngroups",
          "must divide the number of heads d_inner / headdim = " + std::to_string(c.nheads()) + ", got " +
              std::to_string(c.ngroups));
  r.check(c.chunk_size > 0, "chunk_size", "must be positive");
  r.check(c.d_intermediate >= 0, "d_intermediate", "must be >= 0 (0: no MLP)");
  // The mixer's widths: 2 * ngroups * d_state, conv_dim = d_inner + 2 * GN and
  // in_proj's 2 * d_inner + 2 * GN + nheads must all fit in int64.
  const int64_t two_gn = r.product("d_state", 2, r.product("d_state", c.ngroups, c.d_state));
  const int64_t two_di = r.product("expand", 2, c.d_inner());
  r.product("n_layers", 2, c.n_layers);  // the out_proj init scale counts 2 per layer with the MLP
  int64_t width = 0;
  r.check(!__builtin_add_overflow(two_di, two_gn, &width) && !__builtin_add_overflow(width, c.nheads(), &width), "d_state",
          "makes the in_proj width 2 * d_inner + 2 * ngroups * d_state + nheads overflow int64");
  r.finish();
  return c;
}

std::string Mamba2Config::to_json_text() const { return write_config(*this, kOwnKeys); }

// ---------------------------------------------------------------- pieces

namespace mamba2 {

at::Tensor ssd_chunked(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
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

namespace {

// The scan's operands in at least float32 (float64 stays float64): shared by
// ssd_scan and the decoder's steps.
struct ScanInputs {
  at::Tensor x, B, C, dt, A, D;  // batch x L x H x P, batch x L x G x N (twice), batch x L x H, H, H
  // y (batch x L x H x P, the scan of these inputs) plus the skip D x, as batch x L x H*P.
  at::Tensor with_skip(const at::Tensor& y) const { return (y + x * D.unsqueeze(-1)).flatten(2); }
};

ScanInputs scan_inputs(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias,
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

}  // namespace

at::Tensor ssd_scan(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias, const at::Tensor& A_log,
                    const at::Tensor& B, const at::Tensor& C, const at::Tensor& D, int64_t ngroups, int64_t chunk_size,
                    at::Tensor* final_state) {
  const ScanInputs in = scan_inputs(x, dt_raw, dt_bias, A_log, B, C, D, ngroups);
  return in.with_skip(ssd_chunked(in.x, in.dt, in.A, in.B, in.C, chunk_size, final_state));
}

at::Tensor causal_depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
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

at::Tensor gated_rms_norm(const at::Tensor& y, const at::Tensor& z, const at::Tensor& weight, int64_t groups,
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

}  // namespace mamba2

// The pieces above as ops under torch.ops.tmm, so that tmm.nn's Mamba2Mixer
// computes with these definitions; CompositeImplicitAutograd: their autograd,
// shapes (Meta) and compiled graphs come from the ATen ops they are made of.
namespace {
at::Tensor ssd_chunked_op(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                          const at::Tensor& C, int64_t chunk_size) {
  return mamba2::ssd_chunked(x, dt, A, B, C, chunk_size);
}
at::Tensor ssd_scan_op(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias, const at::Tensor& A_log,
                       const at::Tensor& B, const at::Tensor& C, const at::Tensor& D, int64_t ngroups,
                       int64_t chunk_size) {
  return mamba2::ssd_scan(x, dt_raw, dt_bias, A_log, B, C, D, ngroups, chunk_size);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tmm, m) {
  m.def("mamba2_ssd_chunked(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, int chunk_size) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("mamba2_ssd_scan(Tensor x, Tensor dt_raw, Tensor dt_bias, Tensor A_log, Tensor B, Tensor C, Tensor D, "
        "int ngroups, int chunk_size) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("mamba2_causal_depthwise_conv1d(Tensor x, Tensor weight, Tensor bias) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("mamba2_gated_rms_norm(Tensor y, Tensor z, Tensor weight, int groups, float eps) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(tmm, CompositeImplicitAutograd, m) {
  m.impl("mamba2_ssd_chunked", &ssd_chunked_op);
  m.impl("mamba2_ssd_scan", &ssd_scan_op);
  m.impl("mamba2_causal_depthwise_conv1d", &mamba2::causal_depthwise_conv1d);
  m.impl("mamba2_gated_rms_norm", &mamba2::gated_rms_norm);
}

// ---------------------------------------------------------------- modules

Mamba2GatedRMSNormImpl::Mamba2GatedRMSNormImpl(int64_t dim, int64_t groups_, double eps_)
    : groups(groups_), eps(eps_) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor Mamba2GatedRMSNormImpl::forward(const at::Tensor& y, const at::Tensor& z) {
  return mamba2::gated_rms_norm(y, z, weight, groups, eps);
}

Mamba2MixerImpl::Mamba2MixerImpl(const Mamba2Config& c) : config(c) {
  const int64_t di = c.d_inner(), H = c.nheads(), GN = c.ngroups * c.d_state, conv_dim = di + 2 * GN;
  in_proj = register_module("in_proj", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, 2 * di + 2 * GN + H)
                                                             .bias(false)));
  conv1d = register_module(
      "conv1d", torch::nn::Conv1d(torch::nn::Conv1dOptions(conv_dim, conv_dim, c.d_conv).groups(conv_dim).bias(true)));

  torch::NoGradGuard no_grad;
  // softplus(dt_bias) log-uniform in [dt_min, dt_max]; inverse softplus: dt + log(1 - exp(-dt)).
  const at::Tensor dt =
      (at::rand({H}, at::kDouble) * (std::log(kDtMax) - std::log(kDtMin)) + std::log(kDtMin)).exp().clamp_min(
          kDtInitFloor);
  dt_bias = register_parameter("dt_bias", (dt + at::log(-at::expm1(-dt))).to(at::kFloat));
  A_log = register_parameter("A_log", at::empty({H}).uniform_(kAInitLo, kAInitHi).log());
  D = register_parameter("D", at::ones({H}));
  norm = register_module("norm", Mamba2GatedRMSNorm(di, c.ngroups, mamba2::kNormEps));
  out_proj = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(di, c.d_model).bias(false)));
  // mamba_ssm's rescale of the residual branches' output projections.
  out_proj->weight.div_(std::sqrt(static_cast<double>((c.d_intermediate > 0 ? 2 : 1) * c.n_layers)));
}

namespace {
// The scan's y (batch x L x d_inner) through the gated norm, in the scan's
// dtype (at least float32), then out_proj in `dtype`, the mixer input's.
at::Tensor mixer_output(Mamba2MixerImpl& m, const at::Tensor& y, const at::Tensor& z, at::ScalarType dtype) {
  return m.out_proj(m.norm(y, z.to(y.scalar_type())).to(dtype));
}
}  // namespace

at::Tensor Mamba2MixerImpl::forward(const at::Tensor& u) {  // batch x L x d
  const Mamba2Config& c = config;
  TORCH_CHECK(u.dim() == 3 && u.size(2) == c.d_model, "Mamba2Mixer: expected batch x L x ", c.d_model, ", got ",
              u.sizes());
  const int64_t di = c.d_inner(), H = c.nheads(), GN = c.ngroups * c.d_state;

  const auto parts = in_proj(u).split_with_sizes({di, di + 2 * GN, H}, -1);  // z, xBC, dt
  const at::Tensor xBC = at::silu(mamba2::causal_depthwise_conv1d(parts[1], conv1d->weight, conv1d->bias));
  const auto xbc = xBC.split_with_sizes({di, GN, GN}, -1);                     // x, B, C

  const at::Tensor y = mamba2::ssd_scan(xbc[0], parts[2], dt_bias, A_log, xbc[1], xbc[2], D, c.ngroups, c.chunk_size);
  return mixer_output(*this, y, parts[0], u.scalar_type());
}

Mamba2MixerDecodeState Mamba2MixerImpl::start_decoding(int64_t batch) const {
  const Mamba2Config& c = config;
  const auto opts = in_proj->weight.options();
  const auto ct = at::promote_types(in_proj->weight.scalar_type(), at::kFloat);  // the scan's dtype, as in forward
  return Mamba2MixerDecodeState(at::zeros({batch, c.d_conv - 1, conv1d->weight.size(0)}, opts),
                                at::zeros({batch, c.nheads(), c.headdim, c.d_state}, opts.dtype(ct)));
}

at::Tensor Mamba2MixerImpl::decode(const at::Tensor& u, Mamba2MixerDecodeState& state, int64_t position) {
  const Mamba2Config& c = config;
  const int64_t bsz = u.size(0), L = u.size(1);
  TORCH_CHECK(position == 0 || L == 1, "Mamba2Mixer::decode: after the prefill (position 0) one token at a time, got ",
              L, " at position ", position);
  const int64_t di = c.d_inner(), H = c.nheads(), P = c.headdim, G = c.ngroups, N = c.d_state, GN = G * N;
  const int64_t K = c.d_conv, R = H / G;

  const auto parts = in_proj(u).split_with_sizes({di, di + 2 * GN, H}, -1);  // z, xBC, dt
  // The conv continues from the remembered inputs (zeros at position 0, as
  // the forward's padding): the last L outputs over [remembered, new].
  const at::Tensor window = at::cat({state.conv_inputs, parts[1]}, 1);        // B x (K-1+L) x conv_dim
  state.conv_inputs = window.narrow(1, L, K - 1).clone();
  const at::Tensor conv = mamba2::causal_depthwise_conv1d(window, conv1d->weight, conv1d->bias).narrow(1, K - 1, L);
  const auto xbc = at::silu(conv).split_with_sizes({di, GN, GN}, -1);         // x, B, C

  if (position == 0) {  // the prefill: the forward's scan, keeping its final state
    const at::Tensor y = mamba2::ssd_scan(xbc[0], parts[2], dt_bias, A_log, xbc[1], xbc[2], D, G, c.chunk_size,
                                          &state.ssm);
    return mixer_output(*this, y, parts[0], u.scalar_type());
  }
  // s = exp(dt A) s + dt x B^T, y = s C, per head (group g of B and C for heads g*R .. g*R+R-1)
  const auto in = mamba2::scan_inputs(xbc[0], parts[2], dt_bias, A_log, xbc[1], xbc[2], D, G);
  const at::Tensor dt1 = in.dt.select(1, 0);                                    // B x H
  const at::Tensor s = state.ssm.view({bsz, G, R, P, N});
  s.mul_(at::exp(dt1 * in.A).view({bsz, G, R, 1, 1}));
  s.add_((in.x.select(1, 0) * dt1.unsqueeze(-1)).view({bsz, G, R, P, 1}) * in.B.select(1, 0).view({bsz, G, 1, 1, N}));
  const at::Tensor y = at::matmul(s, in.C.select(1, 0).view({bsz, G, 1, N, 1})).view({bsz, 1, H, P});
  return mixer_output(*this, in.with_skip(y), parts[0], u.scalar_type());
}

Mamba2GatedMLPImpl::Mamba2GatedMLPImpl(int64_t d_model, int64_t hidden, int64_t n_layers) {
  fc1 = register_module("fc1", torch::nn::Linear(torch::nn::LinearOptions(d_model, 2 * hidden).bias(false)));
  fc2 = register_module("fc2", torch::nn::Linear(torch::nn::LinearOptions(hidden, d_model).bias(false)));
  torch::NoGradGuard no_grad;
  fc2->weight.div_(std::sqrt(2.0 * static_cast<double>(n_layers)));
}

at::Tensor Mamba2GatedMLPImpl::forward(const at::Tensor& x) {
  const auto ag = fc1(x).chunk(2, -1);  // value, gate
  return fc2(ag[0] * at::silu(ag[1]));
}

Mamba2BlockImpl::Mamba2BlockImpl(const Mamba2Config& c) : config(c) {
  norm = torch::nn::AnyModule(RMSNorm(c.d_model, mamba2::kNormEps));
  register_module("norm", norm.ptr());
  mixer = register_module("mixer", Mamba2Mixer(c));
  if (c.d_intermediate > 0) {
    norm2 = torch::nn::AnyModule(RMSNorm(c.d_model, mamba2::kNormEps));
    register_module("norm2", norm2.ptr());
    mlp = register_module("mlp", Mamba2GatedMLP(c.d_model, c.d_intermediate, c.n_layers));
  }
}

at::Tensor Mamba2BlockImpl::forward(const at::Tensor& x) {  // batch x L x d
  const double p = config.dropout;
  at::Tensor h = x + at::dropout(mixer(norm.forward(x)), p, is_training());
  if (mlp) h = h + at::dropout(mlp(norm2.forward(h)), p, is_training());
  return h;
}

std::unique_ptr<LayerDecodeState> Mamba2BlockImpl::start_decoding(int64_t batch, int64_t /*capacity*/,
                                                                   DecodeMethod /*method*/) {
  return std::make_unique<Mamba2MixerDecodeState>(mixer->start_decoding(batch));
}

at::Tensor Mamba2BlockImpl::decode(const at::Tensor& x, LayerDecodeState& state, int64_t position) {
  at::Tensor h = x + mixer->decode(norm.forward(x), static_cast<Mamba2MixerDecodeState&>(state), position);
  if (mlp) h = h + mlp(norm2.forward(h));
  return h;
}

template <>
void Mamba2Model::build() {
  const Mamba2Config& c = config();  // validated
  {
    torch::NoGradGuard no_grad;
    embedding()->weight.normal_(0.0, 0.02);
  }
  for (int64_t i = 0; i < c.n_layers; ++i) add_block(Mamba2Block(c).ptr());
  set_final_norm("norm", torch::nn::AnyModule(RMSNorm(c.d_model, mamba2::kNormEps)));
  add_head([&] { return torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)); });
}

namespace {
// Part "mixer": tmm.nn's Mamba2Mixer takes its initial values from it.
std::shared_ptr<torch::nn::Module> build_mamba2_part(const nlohmann::json& config, const std::string& part) {
  if (part != "mixer") return nullptr;
  return Mamba2Mixer(Mamba2Config::from_json_text(config.dump())).ptr();
}

const ModelRegistration registration(
    Mamba2Config::kArch,
    [](const nlohmann::json& config) {
      return std::make_shared<Mamba2Model>(Mamba2Config::from_json_text(config.dump()));
    },
    resolver_of<Mamba2Config>(), build_mamba2_part);
}  // namespace

}  // namespace tmm::models
