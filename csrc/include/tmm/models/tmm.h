// The Toeplitz MLP Mixer (docs/models.md): embedding, N blocks of
// x += FFN(norm(x)); x += Toeplitz(norm(x)) (feed-forward first by default),
// LM head; no final norm unless "final_norm" (an extension). No positional
// embeddings: the Toeplitz structure carries position. The mixing is
// tmm::ops::causal_toeplitz.
//
// Init, as the authors' ToeplitzMixers code: Kaiming-normal (fan-in, gain
// sqrt 2) Linear weights, zero biases; Toeplitz vectors N(0, 2/N) per tap
// (their kernel weight is k x N, so fan-in N); the masked mixer's matrix and
// per-position bias U(+-1/sqrt(N)) (their lower-triangular Conv1d(N, N, 1)
// keeps torch's default init); embedding N(0, 1), or N(0, 2/d) when tied (their
// tie_io re-initialises the shared weight Kaiming). "init": "scaled" (an
// extension) divides each residual branch's last weight by sqrt(2 n_layers).
#pragma once

#include <memory>
#include <string>

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "tmm/models/config.h"
#include "tmm/models/language_model.h"
#include "tmm/models/zoo_model.h"

namespace tmm::models {

struct TMMMixerDecodeState;  // one layer's incremental-decoding state (tmm.cpp)

// The token mixer: "toeplitz" | "expanded" (Toeplitz-SiLU-Toeplitz) |
// "frozen" (fixed Toeplitz vectors) | "masked" (a full lower-triangular matrix).
enum class TMMMixerKind { Toeplitz, Expanded, Frozen, Masked };
// "ffn_first" (the authors') | "mixer_first".
enum class TMMBlockOrder { FfnFirst, MixerFirst };
// "kaiming" (the authors') | "scaled": as kaiming, then ffn_out.weight and the
// mixer's last weight (out_proj.weight with heads; the Toeplitz vectors, both
// with "expanded", when flat) divided by sqrt(2 n_layers), GPT-2 style.
enum class TMMInit { Kaiming, Scaled };
std::string to_string(TMMMixerKind kind);
std::string to_string(TMMBlockOrder order);
std::string to_string(TMMInit init);

// The common keys (CommonConfig), then TMM's own.
struct TMMConfig : CommonConfig {
  static constexpr const char* kArch = "tmm";
  int64_t heads = 0;   // 0: flat (one kernel, no projections); h: h heads with in/out projections
  int64_t kernel = 1;  // channel width k of the kernel variant
  TMMMixerKind mixer = TMMMixerKind::Toeplitz;
  int64_t ffn_mult = 4;
  Activation activation = Activation::SiLU;
  TMMBlockOrder block_order = TMMBlockOrder::FfnFirst;
  NormKind norm = NormKind::LayerNorm;
  // Dropout between the expanded mixer's SiLU and its second Toeplitz layer
  // (the authors' heads version: 0.1); training mode only. Resolved by
  // from_json_text: 0.1 for "expanded" unless set, 0 for the other mixers
  // (which reject a nonzero value).
  double mixer_dropout = -1.0;
  bool final_norm = false;  // an extension: a norm of kind `norm` before the head ("final_norm")
  TMMInit init = TMMInit::Kaiming;

  // Reads the config's JSON text, every key validated (errors name the key);
  // writes it with every key spelled out, "arch" included.
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
  // Method Distilled: the kernels "mixer.weight" (and "mixer.weight2") of `d` under `prefix`.
  std::unique_ptr<TMMMixerDecodeState> start_distilled_decoding(int64_t batch, int64_t capacity,
                                                                const Distillation& d,
                                                                const std::string& prefix) const;
  std::vector<LongKernel> long_kernels() const;  // none for "masked"

 private:
  TMMConfig c_;
  int64_t groups_;
  torch::nn::Linear in_proj_{nullptr}, out_proj_{nullptr};
  at::Tensor weight_, bias_, weight2_, bias2_;  // G x K x N (masked: G x N x N), G x N
};
TORCH_MODULE(ToeplitzMixer);

class TMMBlockImpl : public LanguageModelBlock {
 public:
  explicit TMMBlockImpl(const TMMConfig& c);
  at::Tensor forward(const at::Tensor& x) override;
  std::unique_ptr<LayerDecodeState> start_decoding(int64_t batch, int64_t capacity, DecodeMethod method) override;
  at::Tensor decode(const at::Tensor& x, LayerDecodeState& state, int64_t position) override;
  // Long kernels: the mixer's (none for "masked").
  bool has_long_kernels() const override;
  std::vector<LongKernel> long_kernels() override;
  std::unique_ptr<LayerDecodeState> start_distilled_decoding(int64_t batch, int64_t capacity, const Distillation& d,
                                                             const std::string& prefix) override;
  ToeplitzMixer mixer() const { return mixer_; }

 private:
  TMMConfig c_;
  torch::nn::AnyModule ffn_norm_, mixer_norm_;
  torch::nn::Linear ffn_in_{nullptr}, ffn_out_{nullptr};
  ToeplitzMixer mixer_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(TMMBlock);

// Parameter names: embed.weight, blocks.<i>.{ffn_norm, mixer_norm}.weight
// (and .bias for LayerNorm), blocks.<i>.{ffn_in, ffn_out}.{weight, bias},
// blocks.<i>.mixer.{weight, bias} (plus weight2, bias2 when "expanded";
// in_proj, out_proj with heads; buffers weight and bias when "frozen"),
// final_norm.{weight, bias} (with "final_norm"), head.weight (absent when tied).
using TMMModel = ZooModel<TMMConfig, TMMBlock>;
template <> void TMMModel::build();  // in its .cpp

}  // namespace tmm::models
