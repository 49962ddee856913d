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
