// Hyena (Poli et al. 2023), the order-2 gated long-convolution baseline of
// docs/models.md ("Hyena"): embedding, N pre-norm blocks
//   x += HyenaOperator(LN(x));  x += MLP(LN(x))   (MLP: Linear -> GELU -> Linear)
// a final LayerNorm, LM head. No positional embeddings: the implicit filters
// carry position.
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

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "tmm/models/language_model.h"

namespace tmm::models {

struct HyenaOperatorDecodeState;  // one layer's incremental-decoding state (hyena.cpp)

struct HyenaConfig {
  int64_t vocab_size = 0, d_model = 0, n_layers = 0, max_len = 0;
  double dropout = 0.0;
  bool tie_embeddings = false;
  int64_t ffn_mult = 4;          // MLP hidden width = ffn_mult * d_model
  int64_t short_filter = 3;      // width of the short depthwise causal conv
  int64_t filter_order = 64;     // hidden width F of the implicit filter's MLP
  int64_t emb_dim = 3;           // positional features fed to that MLP (odd, >= 3)
  double filter_sin_freq = 1.0;  // initial frequency of its sine activations
  bool modulate = true;          // exponential decay of the implicit filters

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
  at::Tensor decode(const at::Tensor& x, HyenaOperatorDecodeState& state);

  torch::nn::Linear in_proj{nullptr}, out_proj{nullptr};
  ShortConv short_filter{nullptr};  // over the 3d channels of in_proj's output
  HyenaFilter filter{nullptr};
};
TORCH_MODULE(HyenaOperator);

class HyenaBlockImpl : public torch::nn::Module {
 public:
  explicit HyenaBlockImpl(const HyenaConfig& c);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor decode(const at::Tensor& x, HyenaOperatorDecodeState& state);

  torch::nn::LayerNorm mixer_norm{nullptr}, ffn_norm{nullptr};
  HyenaOperator mixer{nullptr};
  torch::nn::Linear ffn_in{nullptr}, ffn_out{nullptr};

 private:
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(HyenaBlock);

class Hyena : public LanguageModel {
 public:
  explicit Hyena(const HyenaConfig& config);
  at::Tensor hidden_states(const at::Tensor& input_ids) override;
  at::Tensor head(const at::Tensor& hidden) override;
  std::string config_json() const override { return config_.to_json_text(); }
  std::string arch() const override { return "hyena"; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_len() const override { return config_.max_len; }
  const HyenaConfig& config() const { return config_; }
  HyenaBlock block(int64_t i) const { return blocks_->ptr<HyenaBlockImpl>(i); }
  DecodeMethod resolve_decode_method(DecodeMethod requested, int64_t capacity) const override;

 protected:
  std::unique_ptr<DecodeState> make_decode_state(int64_t batch, int64_t capacity, DecodeMethod method) override;
  at::Tensor decode_hidden(DecodeState& state, const at::Tensor& input_ids) override;

 private:
  HyenaConfig config_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::ModuleList blocks_;
  torch::nn::LayerNorm final_norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace tmm::models
