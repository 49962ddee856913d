// Mamba2 (Dao and Gu 2024, "Transformers are SSMs"): the state-space-duality
// (SSD) baseline of the zoo, written with LibTorch tensor ops only (no CUDA
// dependency; runs wherever ATen runs, in any floating dtype).
//
// Model: Embedding(V, d) -> N blocks -> RMSNorm -> Linear(d, V, no bias).
// Block (pre-norm): x += Mixer(RMSNorm(x)); with "d_intermediate" > 0 also
// x += GatedMLP(RMSNorm(x)) (off by default: Mamba 2 has no MLP).
//
// Mixer, per token (d_inner = expand * d, H = d_inner / headdim heads of
// size P = headdim, G = ngroups groups of B and C, N = d_state):
//   [z, xBC, dt] = in_proj(u)            sizes d_inner, d_inner + 2GN, H
//   xBC = silu(causal depthwise conv1d(xBC))   width d_conv, with bias
//   [x, B, C] = xBC                      sizes d_inner, GN, GN
//   dt = softplus(dt + dt_bias),  A = -exp(A_log)          (per head)
//   h_t = exp(A dt_t) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t
//        (head h reads group h / (H/G) of B and C; h_t is P x N per head)
//   out = out_proj(rmsnorm(y * silu(z)) * norm.weight)
//        (gated RMSNorm, normalised per group of d_inner / G channels)
// The recurrence is computed with the chunked SSD algorithm: inside a chunk
// of Q = chunk_size tokens as a masked quadratic form, across chunks by a
// recurrence over the chunk-boundary states. The scan runs in float32 (in
// float64 for float64 models), as the reference kernels do.
//
// Parameter names follow mamba_ssm's (embed.weight, blocks.<i>.norm.weight,
// blocks.<i>.mixer.{in_proj.weight, conv1d.weight, conv1d.bias, dt_bias,
// A_log, D, norm.weight, out_proj.weight}, norm.weight, head.weight), and so
// does the initialisation (see mamba2.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "tmm/models/config.h"
#include "tmm/models/language_model.h"
#include "tmm/models/zoo_model.h"

namespace tmm::models {

// The common keys (CommonConfig; dropout acts on each residual branch's
// output; n_layers >= 1), then Mamba2's own.
struct Mamba2Config : CommonConfig {
  static constexpr const char* kArch = "mamba2";
  int64_t d_state = 64;       // N
  int64_t d_conv = 4;         // width of the causal depthwise conv
  int64_t expand = 2;         // d_inner = expand * d_model
  int64_t headdim = 64;       // P; d_inner % headdim == 0
  int64_t ngroups = 1;        // G; nheads % ngroups == 0
  int64_t chunk_size = 64;    // Q of the chunked scan (any length works)
  int64_t d_intermediate = 0; // hidden size of the optional gated MLP; 0 = none

  int64_t d_inner() const { return expand * d_model; }
  int64_t nheads() const { return d_inner() / headdim; }

  // Reads the config's JSON text, every key validated (errors name the key);
  // writes it with every key spelled out, "arch" included.
  static Mamba2Config from_json_text(const std::string& json);
  std::string to_json_text() const;
};

namespace mamba2 {

// mamba_ssm's RMSNorm and RMSNormGated eps: every norm of the model (a
// constant of the forward, not a config key; tmm._C._norm_eps()["mamba2"]).
inline constexpr double kNormEps = 1e-5;

}  // namespace mamba2

// Gated RMSNorm with its weight (d_inner), as in mamba_ssm's RMSNormGated.
class Mamba2GatedRMSNormImpl : public torch::nn::Module {
 public:
  Mamba2GatedRMSNormImpl(int64_t dim, int64_t groups, double eps);
  at::Tensor forward(const at::Tensor& y, const at::Tensor& z);

  at::Tensor weight;  // dim
  int64_t groups;
  double eps;
};
TORCH_MODULE(Mamba2GatedRMSNorm);

// One mixer's incremental-decoding state: a fixed size, whatever the position.
struct Mamba2MixerDecodeState : LayerDecodeState {
  Mamba2MixerDecodeState(at::Tensor conv_inputs_, at::Tensor ssm_)
      : conv_inputs(std::move(conv_inputs_)), ssm(std::move(ssm_)) {}
  at::Tensor conv_inputs;  // B x (d_conv - 1) x conv_dim: the conv's last inputs (zeros before position 0)
  at::Tensor ssm;          // B x H x P x N: the SSM state s, in the scan's dtype
};

// The SSD mixer: B x L x d -> B x L x d.
class Mamba2MixerImpl : public torch::nn::Module {
 public:
  explicit Mamba2MixerImpl(const Mamba2Config& config);
  at::Tensor forward(const at::Tensor& u);
  // Incremental decoding (decoding.h): a zero state for `batch` sequences.
  Mamba2MixerDecodeState start_decoding(int64_t batch) const;
  // u: B x T x d at positions [position, position + T); either position 0
  // (the prefill, through the chunked scan) or T == 1 (a step of the recurrence).
  at::Tensor decode(const at::Tensor& u, Mamba2MixerDecodeState& state, int64_t position);

  Mamba2Config config;
  torch::nn::Linear in_proj{nullptr};   // d -> 2 d_inner + 2 G N + H
  torch::nn::Conv1d conv1d{nullptr};    // depthwise over d_inner + 2 G N channels (weights only; see forward)
  at::Tensor dt_bias;                   // H
  at::Tensor A_log;                     // H
  at::Tensor D;                         // H
  Mamba2GatedRMSNorm norm{nullptr};     // d_inner, groups of d_inner / G
  torch::nn::Linear out_proj{nullptr};  // d_inner -> d
};
TORCH_MODULE(Mamba2Mixer);

// The optional MLP (mamba_ssm's GatedMLP): fc2(a * silu(gate)), [a, gate] = fc1(x).
class Mamba2GatedMLPImpl : public torch::nn::Module {
 public:
  Mamba2GatedMLPImpl(int64_t d_model, int64_t hidden, int64_t n_layers);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear fc1{nullptr};  // d -> 2 hidden
  torch::nn::Linear fc2{nullptr};  // hidden -> d
};
TORCH_MODULE(Mamba2GatedMLP);

class Mamba2BlockImpl : public LanguageModelBlock {
 public:
  explicit Mamba2BlockImpl(const Mamba2Config& config);
  at::Tensor forward(const at::Tensor& x) override;
  // Decoding: method Cached, a Mamba2MixerDecodeState.
  std::unique_ptr<LayerDecodeState> start_decoding(int64_t batch, int64_t capacity, DecodeMethod method) override;
  at::Tensor decode(const at::Tensor& x, LayerDecodeState& state, int64_t position) override;

  Mamba2Config config;
  torch::nn::AnyModule norm;  // RMSNorm(d)
  Mamba2Mixer mixer{nullptr};
  torch::nn::AnyModule norm2;  // RMSNorm(d), only with the MLP
  Mamba2GatedMLP mlp{nullptr};
};
TORCH_MODULE(Mamba2Block);

using Mamba2Model = ZooModel<Mamba2Config, Mamba2Block>;
template <> void Mamba2Model::build();  // in its .cpp

}  // namespace tmm::models
