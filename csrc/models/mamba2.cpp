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
#include <torch/nn/init.h>

#include "models/config_reader.h"
#include "models/layers.h"
#include "models/registry.h"
#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::models {

namespace {

constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtInitFloor = 1e-4;
constexpr double kAInitLo = 1.0, kAInitHi = 16.0;

}  // namespace

// ---------------------------------------------------------------- config

namespace {
constexpr auto kOwnKeys = [](auto& c, auto&& k) {
  k("d_state", c.d_state);
  k("d_conv", c.d_conv);
  k("expand", c.expand);
  k("headdim", c.headdim);
  k("ngroups", c.ngroups);
  k("chunk_size", c.chunk_size);
  k("d_intermediate", c.d_intermediate);
};
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

// ---------------------------------------------------------------- modules

Mamba2GatedRMSNormImpl::Mamba2GatedRMSNormImpl(int64_t dim, int64_t groups_, double eps_)
    : groups(groups_), eps(eps_) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor Mamba2GatedRMSNormImpl::forward(const at::Tensor& y, const at::Tensor& z) {
  return ops::parts::mamba2_gated_rms_norm(y, z, weight, groups, eps);
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
  return ops::parts::mamba2_output(y, z, m.norm->weight, m.out_proj->weight, m.norm->groups, m.norm->eps, dtype);
}
}  // namespace

at::Tensor Mamba2MixerImpl::forward(const at::Tensor& u) {  // batch x L x d
  return ops::mamba2_mixer(u, in_proj->weight, conv1d->weight, conv1d->bias, dt_bias, A_log, D, norm->weight,
                           out_proj->weight, norm->groups, config.chunk_size, norm->eps);
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
  const at::Tensor conv = ops::parts::mamba2_causal_depthwise_conv1d(window, conv1d->weight, conv1d->bias).narrow(1, K - 1, L);
  const auto xbc = at::silu(conv).split_with_sizes({di, GN, GN}, -1);         // x, B, C

  if (position == 0) {  // the prefill: the forward's scan, keeping its final state
    const at::Tensor y = ops::parts::mamba2_ssd_scan(xbc[0], parts[2], dt_bias, A_log, xbc[1], xbc[2], D, G,
                                                    c.chunk_size, &state.ssm);
    return mixer_output(*this, y, parts[0], u.scalar_type());
  }
  // s = exp(dt A) s + dt x B^T, y = s C, per head (group g of B and C for heads g*R .. g*R+R-1)
  const auto in = ops::parts::mamba2_scan_inputs(xbc[0], parts[2], dt_bias, A_log, xbc[1], xbc[2], D, G);
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
