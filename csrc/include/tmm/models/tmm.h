// The Toeplitz MLP Mixer (docs/models.md, "TMM"): embedding, N
// blocks of x += FFN(norm(x)); x += Toeplitz(norm(x)) (feed-forward first by
// default), LM head. No positional embeddings: the Toeplitz structure carries
// position. The mixing is tmm::ops::causal_toeplitz.
#pragma once

#include <memory>
#include <string>

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "tmm/models/language_model.h"

namespace tmm::models {

struct TMMMixerDecodeState;  // one layer's incremental-decoding state (tmm.cpp)

struct TMMConfig {
  int64_t vocab_size = 0, d_model = 0, n_layers = 0, max_len = 0;
  int64_t heads = 0;             // 0: flat (one kernel, no projections); h: h heads with in/out projections
  int64_t kernel = 1;            // channel width k of the kernel variant
  std::string mixer = "toeplitz";  // toeplitz | expanded (Toeplitz-SiLU-Toeplitz) | frozen | masked
  int64_t ffn_mult = 4;
  std::string activation = "silu";
  double dropout = 0.0;
  std::string block_order = "ffn_first";  // ffn_first (the authors') | mixer_first
  std::string norm = "layernorm";         // layernorm | rmsnorm
  bool tie_embeddings = false;

  static TMMConfig from_json_text(const std::string& json);
  std::string to_json_text() const;
};

// The token mixer: B x L x d -> B x L x d, causal along L.
class ToeplitzMixerImpl : public torch::nn::Module {
 public:
  explicit ToeplitzMixerImpl(const TMMConfig& c);
  at::Tensor forward(const at::Tensor& x);
  // Incremental decoding (decoding.h): x B x T x d at the state's next positions.
  std::unique_ptr<TMMMixerDecodeState> start_decoding(int64_t batch, int64_t capacity, bool fast) const;
  at::Tensor decode(const at::Tensor& x, TMMMixerDecodeState& state);

 private:
  at::Tensor mix(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const;
  TMMConfig c_;
  int64_t groups_;
  torch::nn::Linear in_proj_{nullptr}, out_proj_{nullptr};
  at::Tensor weight_, bias_, weight2_, bias2_;  // G x K x N (masked: G x N x N), G x N
};
TORCH_MODULE(ToeplitzMixer);

class TMMBlockImpl : public torch::nn::Module {
 public:
  explicit TMMBlockImpl(const TMMConfig& c);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor decode(const at::Tensor& x, TMMMixerDecodeState& state);
  ToeplitzMixer mixer() const { return mixer_; }

 private:
  TMMConfig c_;
  torch::nn::AnyModule ffn_norm_, mixer_norm_;
  torch::nn::Linear ffn_in_{nullptr}, ffn_out_{nullptr};
  ToeplitzMixer mixer_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(TMMBlock);

class TMM : public LanguageModel {
 public:
  explicit TMM(const TMMConfig& config);
  at::Tensor hidden_states(const at::Tensor& input_ids) override;
  at::Tensor head(const at::Tensor& hidden) override;
  std::string config_json() const override { return config_.to_json_text(); }
  std::string arch() const override { return "tmm"; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_len() const override { return config_.max_len; }
  const TMMConfig& config() const { return config_; }
  DecodeMethod resolve_decode_method(DecodeMethod requested, int64_t capacity) const override;

 protected:
  std::unique_ptr<DecodeState> make_decode_state(int64_t batch, int64_t capacity, DecodeMethod method) override;
  at::Tensor decode_hidden(DecodeState& state, const at::Tensor& input_ids) override;

 private:
  TMMConfig config_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::ModuleList blocks_;
  torch::nn::Linear head_{nullptr};
};

}  // namespace tmm::models
