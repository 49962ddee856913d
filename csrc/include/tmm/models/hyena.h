// Hyena (Poli et al. 2023), the order-2 gated long-convolution baseline
// (docs/models.md): embedding, N pre-norm blocks
//   x += HyenaOperator(LN(x));  x += MLP(LN(x))   (MLP: Linear -> GELU -> Linear)
// a final LayerNorm only with "final_norm", LM head. No positional
// embeddings: the implicit filters carry position.
//
// Defaults follow the TMM authors' HyenaModel (their Hyena baseline): torch's
// default init everywhere ("init": "torch": Linear U(+-1/sqrt(fan_in)) weights
// and biases, embedding N(0, 1)) and no final norm. safari's LM
// (ConvLMHeadModel) is "init": "safari" (GPT-2 style: every Linear, the
// filter MLP's included, and the embedding N(0, 0.02^2), biases zero,
// out_proj and ffn_out N(0, (0.02 / sqrt(2 n_layers))^2)) with "final_norm":
// true and "tie_embeddings": true. "init": "kaiming": Kaiming-normal
// projections, MLP and head; torch's default filter MLP.
//
// The operator (B x L x d -> B x L x d, causal along L):
//   u          = short_conv(in_proj(x))        in_proj d -> 3d; depthwise causal conv of width w
//   x0, x1, v  = split(u)                      3 x (B x L x d)
//   v          = h (*) (v * x1) + D * (v * x1)  per-channel causal long convolution
//   y          = out_proj(v * x0)
// The long convolution (with the skip D folded into the lag-0 tap) is
// tmm::ops::causal_toeplitz with weight d x 1 x L, i.e. groups = d.
//
// The implicit filter h[c, p] for position p (generated in forward for the
// current L, independent of L: positions are normalised by max_len, so the
// first L taps are the same whatever the sequence length):
//   t_p = p / (max_len - 1),  w_p = 2 pi p / max_len
//   z_p = [t_p, cos(f_k w_p), -sin(f_k w_p)]   f = linspace(1e-4, bands-1, bands), bands = (emb_dim-1)/2
//   h[:, p] = MLP_sin(z_p) * exp(-t_p |delta_c|)  (decay only when "modulate")
// MLP_sin: Linear(emb_dim, F) -> sin(freq * .) -> [Linear(F, F) -> sin(freq * .)] x 2 -> Linear(F, d, no bias),
// one learnable frequency vector (F) shared by the three activations (safari's
// Sin module, shared there too). delta_c = linspace(ln(1e-2)/1.5, ln(1e-2)/0.3, d)
// (safari's ExponentialModulation, fixed, computed in forward).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "tmm/models/config.h"
#include "tmm/models/language_model.h"
#include "tmm/models/zoo_model.h"

namespace tmm::models {

struct HyenaOperatorDecodeState;  // one layer's incremental-decoding state (hyena.cpp)

// "torch" (the authors' HyenaModel) | "safari" (safari's LM) | "kaiming" (Kaiming-normal linear layers).
enum class HyenaInit { Torch, Safari, Kaiming };
std::string to_string(HyenaInit init);

// The common keys (CommonConfig), then Hyena's own.
struct HyenaConfig : CommonConfig {
  static constexpr const char* kArch = "hyena";
  int64_t ffn_mult = 4;          // MLP hidden width = ffn_mult * d_model
  int64_t short_filter = 3;      // width of the short depthwise causal conv
  int64_t filter_order = 64;     // hidden width F of the implicit filter's MLP
  int64_t emb_dim = 3;           // positional features fed to that MLP (odd, >= 3)
  double filter_sin_freq = 1.0;  // initial frequency of its sine activations
  bool modulate = true;          // exponential decay of the implicit filters
  bool final_norm = false;       // a LayerNorm before the head (safari's ln_f)
  HyenaInit init = HyenaInit::Torch;

  // Reads the config's JSON text, every key validated (errors name the key);
  // writes it with every key spelled out, "arch" included.
  static HyenaConfig from_json_text(const std::string& json);
  std::string to_json_text() const;
};

// The implicit long filter of one operator, and its skip term D.
class HyenaFilterImpl : public torch::nn::Module {
 public:
  explicit HyenaFilterImpl(const HyenaConfig& c);
  // L x emb_dim positional features z (float32, or float64 for a float64
  // filter) on the parameters' device.
  at::Tensor positional_features(int64_t L) const;
  // L x d decay exp(-t_p |delta_c|) (ones when not "modulate"), like positional_features.
  at::Tensor decay(int64_t L) const;
  // d x L filter h (without D), in the parameters' dtype.
  at::Tensor implicit_filter(int64_t L);
  // d x 1 x L causal_toeplitz weight: h with D added to the lag-0 tap.
  at::Tensor toeplitz_weight(int64_t L);
  // v: B x L x d -> h (*) v + D * v, through tmm::ops::causal_toeplitz (groups = d).
  at::Tensor forward(const at::Tensor& v);
  // The MLP's tensors w0, b0, w1, b1, w2, b2, w3 (torch.ops.tmm.hyena_filter's `mlp`).
  std::vector<at::Tensor> mlp_tensors() const;

  torch::nn::ModuleList mlp;  // Linear(emb_dim, F), Linear(F, F) x 2, Linear(F, d, no bias)
  at::Tensor freq;            // F: frequencies of the sine activations
  at::Tensor D;               // d: skip term

 private:
  HyenaConfig c_;
};
TORCH_MODULE(HyenaFilter);

// Depthwise causal conv along L: B x L x C -> B x L x C,
//   y[b,t,c] = bias[c] + sum_{j<w} weight[c,0,j] * u[b,t-(w-1)+j,c]   (u = 0 before t = 0)
// i.e. torch's Conv1d(C, C, w, groups=C) on the input zero-padded by w-1 on the left.
class ShortConvImpl : public torch::nn::Module {
 public:
  ShortConvImpl(int64_t channels, int64_t width);
  at::Tensor forward(const at::Tensor& u);
  // The same on the next positions, u B x T x C; `last` (B x (w-1) x C, zeros
  // at the start) holds the previous inputs and is advanced.
  at::Tensor decode(const at::Tensor& u, at::Tensor& last);

  at::Tensor weight;  // C x 1 x w
  at::Tensor bias;    // C
};
TORCH_MODULE(ShortConv);

// The order-2 Hyena operator: B x L x d -> B x L x d.
class HyenaOperatorImpl : public torch::nn::Module {
 public:
  explicit HyenaOperatorImpl(const HyenaConfig& c);
  at::Tensor forward(const at::Tensor& x);
  // Incremental decoding (decoding.h): x B x T x d at the state's next positions.
  std::unique_ptr<HyenaOperatorDecodeState> start_decoding(int64_t batch, int64_t capacity, bool fast);
  // Method Distilled: the long convolution as `kernel` (fitted from long_kernel).
  std::unique_ptr<HyenaOperatorDecodeState> start_distilled_decoding(int64_t batch, int64_t capacity,
                                                                     const DistilledKernel& kernel);
  at::Tensor decode(const at::Tensor& x, HyenaOperatorDecodeState& state);
  // "filter": the long convolution over `length` positions, D the exact direct term.
  LongKernel long_kernel(int64_t length);

  torch::nn::Linear in_proj{nullptr}, out_proj{nullptr};
  ShortConv short_filter{nullptr};  // over the 3d channels of in_proj's output
  HyenaFilter filter{nullptr};

 private:
  int64_t max_len_;
  bool modulate_;
};
TORCH_MODULE(HyenaOperator);

class HyenaBlockImpl : public LanguageModelBlock {
 public:
  explicit HyenaBlockImpl(const HyenaConfig& c);
  at::Tensor forward(const at::Tensor& x) override;
  std::unique_ptr<LayerDecodeState> start_decoding(int64_t batch, int64_t capacity, DecodeMethod method) override;
  at::Tensor decode(const at::Tensor& x, LayerDecodeState& state, int64_t position) override;
  // long_kernels: "mixer.filter", the filter over max_len positions.
  bool has_long_kernels() const override;
  std::vector<LongKernel> long_kernels() override;
  std::unique_ptr<LayerDecodeState> start_distilled_decoding(int64_t batch, int64_t capacity, const Distillation& d,
                                                             const std::string& prefix) override;

  torch::nn::LayerNorm mixer_norm{nullptr}, ffn_norm{nullptr};
  HyenaOperator mixer{nullptr};
  torch::nn::Linear ffn_in{nullptr}, ffn_out{nullptr};

 private:
  int64_t max_len_;
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(HyenaBlock);

// Parameter names: embed.weight, blocks.<i>.{mixer_norm, ffn_norm}.{weight,
// bias}, blocks.<i>.mixer.{in_proj, out_proj}.{weight, bias},
// blocks.<i>.mixer.short_filter.{weight, bias},
// blocks.<i>.mixer.filter.{mlp.<j>.weight, mlp.<j>.bias (j < 3), freq, D},
// blocks.<i>.{ffn_in, ffn_out}.{weight, bias}, final_norm.{weight, bias}
// (with "final_norm"), head.weight (absent when tied).
using HyenaModel = ZooModel<HyenaConfig, HyenaBlock>;
template <> void HyenaModel::build();  // in its .cpp

}  // namespace tmm::models
