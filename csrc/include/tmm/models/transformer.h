// The Transformer baseline, Llama-style (docs/models.md):
//   h = embed(ids)                                     B x L x d
//   n_layers times, pre-norm:
//     h += wo(attention(rope(wq(n)), rope(wk(n)), wv(n)))  with n = RMSNorm(h)
//     h += w2(silu(w1(n)) * w3(n))                          with n = RMSNorm(h)  (SwiGLU)
//   logits = head(RMSNorm(h))                          B x L x V
// Attention is causal, multi-head, scaled dot-product (1/sqrt(head_dim)),
// through at::scaled_dot_product_attention. With "window" w > 0 it is the
// sliding-window (local) variant: token t attends to s in (t - w, t], so after
// n_layers layers position t sees tokens t - n_layers*(w-1) .. t and no
// further back. RoPE (rotate-half / GPT-NeoX pairing: dimension i is rotated
// with i + head_dim/2 by the angle pos * rope_theta^(-2i/head_dim)) is computed
// in every forward from the positions; there is no positional table, learned
// or cached. No biases anywhere, as in Llama.
//
// Config keys (besides the common vocab_size, d_model, n_layers, max_len,
// dropout, tie_embeddings):
//   n_heads     required: query heads
//   n_kv_heads  key/value heads (grouped-query attention, as Llama's
//               num_key_value_heads): 0 (default) = n_heads; must divide
//               n_heads; query head j reads key/value head j / (n_heads / n_kv_heads)
//   head_dim    0 (default) = d_model / n_heads (then n_heads must divide
//               d_model); > 0 sets it as Llama's head_dim; even (RoPE)
//   norm_eps    RMSNorm epsilon of every norm, default 1e-6 (Llama's
//               rms_norm_eps as the authors' baseline sets it)
//   rope_theta  RoPE base, default 10000
//   window      0 (default): full causal attention; w > 0: sliding window
//   ffn_mult    default 4: SwiGLU hidden width as Llama rounds it,
//               round_up_8(floor(2/3 * ffn_mult * d_model)) (1368 for d=512);
//               so the three SwiGLU matrices hold about as many parameters as
//               a plain ffn_mult*d MLP's two
//   ffn_hidden  default 0 = derived from ffn_mult as above; > 0 sets the hidden
//               width directly and ffn_mult is then not used (the authors'
//               Llama baseline: 4 * d_model). config_json() writes the width
//               actually built.
// config_json() also writes the n_kv_heads and head_dim actually built, so a
// config written before these keys existed means what it meant then.
// dropout (default 0) applies to the attention probabilities and to each
// residual branch's output, in training mode only.
//   init        "llama" (default, HF LlamaForCausalLM's _init_weights as the
//               authors' baseline runs it): every Linear and the embedding
//               N(0, 0.02^2); "kaiming": every Linear Kaiming-normal fan-in
//               (make_linear), embedding N(0, 1).
//               RMSNorm weights 1 either way. Only the build uses it.
// Parameter names: embed.weight, blocks.<i>.attn_norm.weight,
// blocks.<i>.attn.{wq,wk,wv,wo}.weight, blocks.<i>.mlp_norm.weight,
// blocks.<i>.mlp.{w1,w2,w3}.weight, norm.weight, head.weight (absent when tied).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "tmm/models/config.h"
#include "tmm/models/language_model.h"
#include "tmm/models/zoo_model.h"

namespace tmm::models {

class RMSNormImpl;

// "llama": N(0, 0.02^2) weights (HF Llama); "kaiming": Kaiming-normal Linear, N(0, 1) embedding.
enum class TransformerInit { Llama, Kaiming };
std::string to_string(TransformerInit init);

// The common keys (CommonConfig), then the Transformer's own.
struct TransformerConfig : CommonConfig {
  static constexpr const char* kArch = "transformer";
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;   // resolved by from_json_text: n_heads unless set
  int64_t head_dim = 0;     // resolved by from_json_text: d_model / n_heads unless set
  double norm_eps = 1e-6;
  TransformerInit init = TransformerInit::Llama;
  double rope_theta = 10000.0;
  int64_t window = 0;       // 0: full causal attention; w > 0: attend to (t - w, t]
  double ffn_mult = 4.0;
  int64_t ffn_hidden = 0;   // resolved by from_json_text: always > 0 afterwards

  // from_json_text also resolves n_kv_heads, head_dim and ffn_hidden.
  // Reads the config's JSON text, every key validated (errors name the key);
  // writes it with every key spelled out, "arch" included.
  static TransformerConfig from_json_text(const std::string& json);
  std::string to_json_text() const;
};

// Llama's SwiGLU width: round_up(floor(2/3 * ffn_mult * d_model), 8).
int64_t llama_ffn_hidden(int64_t d_model, double ffn_mult);

// One layer's key/value cache for incremental decoding: keys and values are
// B x H_kv x slots x hd (the key/value heads only, as grouped-query attention saves), keys rotated (RoPE) at their absolute positions.
// Without a window, slots = capacity and position p sits in slot p; with a
// window w, slots = min(w, capacity), a ring holding the last w positions
// (position p in slot p % slots): attention does not depend on key order.
struct TransformerKVCache : LayerDecodeState {
  TransformerKVCache(at::Tensor keys_, at::Tensor values_) : keys(std::move(keys_)), values(std::move(values_)) {}
  at::Tensor keys, values;
};

// Multi-head (grouped-query) causal self-attention with RoPE: B x L x d -> B x L x d.
// wq: d -> H*hd, wk and wv: d -> H_kv*hd, wo: H*hd -> d.
class TransformerAttentionImpl : public torch::nn::Module {
 public:
  explicit TransformerAttentionImpl(const TransformerConfig& c);
  at::Tensor forward(const at::Tensor& x);
  // Incremental decoding (decoding.h): an empty cache for `batch` sequences of
  // at most `capacity` tokens, in the weights' dtype and device.
  TransformerKVCache start_decoding(int64_t batch, int64_t capacity) const;
  // x: B x T x d at positions [position, position + T); either position 0
  // (the prefill, through the full attention) or T == 1 (a step).
  at::Tensor decode(const at::Tensor& x, TransformerKVCache& cache, int64_t position);

  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_, window_;
  double rope_theta_, dropout_;
};
TORCH_MODULE(TransformerAttention);

// SwiGLU feed-forward: w2(silu(w1 x) * w3 x), B x L x d -> B x L x d.
class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t d_model, int64_t hidden);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(SwiGLU);

class TransformerBlockImpl : public LanguageModelBlock {
 public:
  explicit TransformerBlockImpl(const TransformerConfig& c);
  at::Tensor forward(const at::Tensor& x) override;
  // Decoding: method Cached, a TransformerKVCache.
  std::unique_ptr<LayerDecodeState> start_decoding(int64_t batch, int64_t capacity, DecodeMethod method) override;
  at::Tensor decode(const at::Tensor& x, LayerDecodeState& state, int64_t position) override;

  std::shared_ptr<RMSNormImpl> attn_norm, mlp_norm;
  TransformerAttention attn{nullptr};
  SwiGLU mlp{nullptr};

 private:
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(TransformerBlock);

using TransformerModel = ZooModel<TransformerConfig, TransformerBlock>;
template <> void TransformerModel::build();  // in its .cpp

}  // namespace tmm::models
