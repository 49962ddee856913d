// The interface every model of the zoo implements (TMM, Transformer, Hyena,
// Mamba2): token ids in, logits out, with the last hidden states exposed for
// the information-retention experiments. Parameter names are the module
// paths (e.g. "blocks.0.mixer.weight"), identical in C++ and Python, so a
// checkpoint written by one is read by the other.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "tmm/models/decoding.h"

namespace tmm::models {

struct LanguageModelOutput {
  at::Tensor logits;  // B x L x V
  at::Tensor hidden;  // B x L x d: the last hidden states (undefined unless asked)
  at::Tensor loss;    // scalar mean cross-entropy (undefined without labels)
};

class LanguageModel : public torch::nn::Module {
 public:
  // B x L int64 -> B x L x d, the states the LM head reads.
  virtual at::Tensor hidden_states(const at::Tensor& input_ids) = 0;
  // B x L x d -> B x L x V.
  virtual at::Tensor head(const at::Tensor& hidden) = 0;
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
  virtual std::string arch() const = 0;  // the config's "arch"
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_len() const = 0;   // the longest sequence it takes; <= 0: no limit

  // Incremental decoding (tmm/models/decoding.h). start_decoding prepares a
  // state for `batch` sequences of at most `capacity` tokens (<= the model's
  // max_len where it has one); Auto picks the model's fastest exact method,
  // an unsupported method is an error naming the architecture.
  std::unique_ptr<DecodeState> start_decoding(int64_t batch, int64_t capacity,
                                              DecodeMethod method = DecodeMethod::Auto);
  // Feeds B x T int64 tokens at positions [state.position(), +T) and returns
  // their logits, B x T x V. Runs without autograd.
  at::Tensor decode(DecodeState& state, const at::Tensor& input_ids);
  // The method Auto resolves to for this model and capacity; an error for a
  // method the model does not have.
  virtual DecodeMethod resolve_decode_method(DecodeMethod requested, int64_t capacity) const;

 protected:
  // The model's own decoding (methods Cached and Fast). decode_hidden is
  // called either at position 0 with any T (the prefill) or with T == 1 (a
  // step) and returns B x T x d hidden states; the position advances after.
  virtual std::unique_ptr<DecodeState> make_decode_state(int64_t batch, int64_t capacity, DecodeMethod method) = 0;
  virtual at::Tensor decode_hidden(DecodeState& state, const at::Tensor& input_ids) = 0;
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
