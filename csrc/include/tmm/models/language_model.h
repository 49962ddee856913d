// The interface every model of the zoo implements (TMM, Transformer, Hyena,
// Mamba2), and the skeleton they share: token ids in, logits out, with the
// last hidden states exposed for the information-retention experiments.
//
//   hidden = final_norm(blocks(embed(ids)))      B x L x d (final_norm: where the model has one)
//   logits = head(hidden)                         B x L x V (head: the embedding matrix when tied)
//
// LanguageModel owns the embedding, the blocks, the final norm, the
// optionally tied head and the per-layer decoding states; each model supplies
// its config, its blocks (LanguageModelBlock) and its final norm.
// Parameter names are the module paths (e.g. "blocks.0.mixer.weight"),
// identical in C++ and Python, so a checkpoint written by one is read by the
// other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "tmm/models/config.h"
#include "tmm/models/decoding.h"
#include "tmm/models/distill.h"

namespace tmm::models {

struct LanguageModelOutput {
  at::Tensor logits;  // B x L x V
  at::Tensor hidden;  // B x L x d: the last hidden states (undefined unless asked)
  at::Tensor loss;    // scalar mean cross-entropy (undefined without labels)
};

// What one block remembers while decoding (a KV cache, mixer inputs, a
// recurrent state): each block type defines its own.
struct LayerDecodeState {
  virtual ~LayerDecodeState() = default;
  virtual int64_t state_bytes() const { return 0; }  // of the tensors it holds
};

// The decoding state of methods Cached and Fast: one LayerDecodeState per
// block. Public so callers can see what decoding holds in memory.
class LayerwiseDecodeState : public DecodeState {
 public:
  using DecodeState::DecodeState;
  // Block i's state as its block's type (e.g. TransformerKVCache).
  template <class T>
  T& layer(size_t i) const {
    TORCH_CHECK(i < layers.size(), "decode state: no layer ", i, " (it has ", layers.size(), ")");
    auto* s = dynamic_cast<T*>(layers[i].get());
    TORCH_CHECK(s != nullptr, "decode state: layer ", i, " holds another type of state");
    return *s;
  }
  int64_t state_bytes() const override;  // the layers' sum
  std::vector<std::unique_ptr<LayerDecodeState>> layers;
};

// One of a model's blocks: B x L x d -> B x L x d, causal along L.
class LanguageModelBlock : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // A fresh decoding state for `batch` sequences of at most `capacity`
  // tokens, for method Cached or Fast (the latter only where the model's
  // resolve_decode_method allows it).
  virtual std::unique_ptr<LayerDecodeState> start_decoding(int64_t batch, int64_t capacity, DecodeMethod method) = 0;
  // x: B x T x d at positions [position, position + T): position 0 (the
  // prefill, any T) or T == 1 (a step); `state` is the one this block made.
  // Eval mode only (no dropout).
  virtual at::Tensor decode(const at::Tensor& x, LayerDecodeState& state, int64_t position) = 0;
  // Whether the block has long convolutions (TMM's Toeplitz mixers, Hyena's
  // filters), decoded by methods Fast and Distilled; none by default.
  virtual bool has_long_kernels() const { return false; }
  // The block's long convolution kernels (names relative to the block); none by default.
  virtual std::vector<LongKernel> long_kernels() { return {}; }
  // A state for method Distilled, the block's kernels taken from `d` under
  // `prefix` + their names; an error for a block without long kernels.
  virtual std::unique_ptr<LayerDecodeState> start_distilled_decoding(int64_t batch, int64_t capacity,
                                                                     const Distillation& d,
                                                                     const std::string& prefix);
};

class LanguageModel : public torch::nn::Module {
 public:
  // B x L int64 -> B x L x d, the states the LM head reads (after the final
  // norm where the model has one).
  at::Tensor hidden_states(const at::Tensor& input_ids);
  // B x L x d -> B x L x V.
  at::Tensor head(const at::Tensor& hidden);
  // The validated configuration, as JSON text with every key spelled out
  // (including "arch"): what config.json of a checkpoint holds.
  virtual std::string config_json() const = 0;

  // B x L int64 -> B x L x V.
  at::Tensor forward(const at::Tensor& input_ids);
  // Logits, plus the mean cross-entropy against labels (B x L int64, -100 =
  // ignored) when given, plus the hidden states when asked.
  LanguageModelOutput forward_with(const at::Tensor& input_ids,
                                   const std::optional<at::Tensor>& labels = std::nullopt,
                                   bool return_hidden = false);
  int64_t parameter_count() const;
  std::string arch() const { return arch_; }  // the config's "arch"
  const CommonConfig& common_config() const { return common_; }
  int64_t vocab_size() const { return common_.vocab_size; }
  int64_t max_len() const { return common_.max_len; }  // the longest sequence it takes; <= 0: no limit
  torch::nn::Embedding embedding() const { return embed_; }  // "embed"
  // The blocks in order ("blocks.<i>"); each model's block(i) gives its own type.
  const std::vector<std::shared_ptr<LanguageModelBlock>>& blocks() const { return blocks_; }

  // Incremental decoding (tmm/models/decoding.h). start_decoding prepares a
  // state for `batch` sequences of at most `capacity` tokens (<= the model's
  // max_len); Auto picks the model's fastest exact method, an unsupported
  // method is an error naming the architecture.
  std::unique_ptr<DecodeState> start_decoding(int64_t batch, int64_t capacity,
                                              DecodeMethod method = DecodeMethod::Auto);
  // Feeds B x T int64 tokens at positions [state.position(), +T) and returns
  // their logits, B x T x V. Runs without autograd.
  at::Tensor decode(DecodeState& state, const at::Tensor& input_ids);
  // The method Auto resolves to for this model and capacity; an error for a
  // method the model does not have. With long convolutions (a block's
  // has_long_kernels): Fast from a capacity of 1024 on, Cached below, every
  // method on request; without: Cached (Recompute on request).
  virtual DecodeMethod resolve_decode_method(DecodeMethod requested, int64_t capacity) const;

  // Its long convolution kernels (TMM's Toeplitz vectors, Hyena's filters at
  // max_len), named by parameter path: what distill() fits.
  std::vector<LongKernel> long_kernels();
  // The distillation decode method "distilled" runs (checked against
  // long_kernels' shapes; null: none). Fitted for the weights as they are:
  // refit after changing them.
  void set_distillation(std::shared_ptr<const Distillation> distillation);
  std::shared_ptr<const Distillation> distillation() const { return distillation_; }

 protected:
  // The skeleton, built in this order, which fixes the parameter order and
  // the initialisation's random draws. This constructor registers "embed"
  // (torch's Embedding, N(0, 1)) and the empty list "blocks"; the model's
  // constructor then applies its own initialisation to what it needs, calls
  // add_block n_layers times, set_final_norm if it has one, and add_head.
  LanguageModel(std::string arch, const CommonConfig& common);
  void add_block(std::shared_ptr<LanguageModelBlock> block);
  // The norm applied after the last block, registered under `name`.
  void set_final_norm(const std::string& name, torch::nn::AnyModule norm);
  // Registers "head" (d -> V, no bias) as make_head builds it, unless the
  // embeddings are tied: then make_head is not called (nor its random draws).
  void add_head(const std::function<torch::nn::Linear()>& make_head);

 private:
  // Methods Cached and Fast: decode_hidden is called either at position 0
  // with any T (the prefill) or with T == 1 (a step) and returns B x T x d
  // hidden states; the position advances after.
  std::unique_ptr<DecodeState> make_decode_state(int64_t batch, int64_t capacity, DecodeMethod method);
  at::Tensor decode_hidden(LayerwiseDecodeState& state, const at::Tensor& input_ids);

  std::string arch_;
  CommonConfig common_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::ModuleList block_list_;                        // "blocks", what the module tree holds
  std::vector<std::shared_ptr<LanguageModelBlock>> blocks_;  // the same blocks, typed
  torch::nn::AnyModule final_norm_;                         // empty: none
  torch::nn::Linear head_{nullptr};                         // null when tied
  std::shared_ptr<const Distillation> distillation_;         // for decode method "distilled"
};

// Checks input_ids: B x L, int64, values in [0, vocab), L <= max_len
// (max_len <= 0: no limit). Errors name the argument and what it got.
void check_input_ids(const at::Tensor& input_ids, int64_t vocab_size, int64_t max_len);

// Builds an untrained model from its JSON configuration (text). The "arch"
// key picks the model; an unknown, missing, mistyped or impossible key is an
// error naming the key.
std::shared_ptr<LanguageModel> build_model(const std::string& config_json);

// The architectures build_model knows.
std::vector<std::string> architectures();

}  // namespace tmm::models
