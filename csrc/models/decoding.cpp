// LanguageModel's decoding entry points: argument checks, the Recompute
// baseline every model has, the per-layer state loop, and the split of a
// multi-token call after the prefill into single steps, so each block only
// implements prefill and step.
#include "tmm/models/decoding.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "tmm/models/language_model.h"

namespace tmm::models {
namespace {

// The baseline: remembers the tokens and runs the full forward each time.
struct RecomputeState : DecodeState {
  RecomputeState(int64_t batch, int64_t capacity) : DecodeState(batch, capacity, DecodeMethod::Recompute) {}
  at::Tensor tokens;  // B x position
};

}  // namespace

DecodeMethod parse_decode_method(const std::string& name) {
  if (name == "auto") return DecodeMethod::Auto;
  if (name == "recompute") return DecodeMethod::Recompute;
  if (name == "cached") return DecodeMethod::Cached;
  if (name == "fast") return DecodeMethod::Fast;
  TORCH_CHECK(false, "decode method: expected auto, recompute, cached or fast, got \"", name, "\"");
}

std::string to_string(DecodeMethod method) {
  switch (method) {
    case DecodeMethod::Auto: return "auto";
    case DecodeMethod::Recompute: return "recompute";
    case DecodeMethod::Cached: return "cached";
    case DecodeMethod::Fast: return "fast";
  }
  return "?";
}

DecodeMethod LanguageModel::resolve_decode_method(DecodeMethod requested, int64_t /*capacity*/) const {
  TORCH_CHECK(requested != DecodeMethod::Fast, "decode method \"fast\" is for the long-convolution models (tmm, hyena); ",
              arch(), " has auto, recompute and cached");
  return requested == DecodeMethod::Auto ? DecodeMethod::Cached : requested;
}

std::unique_ptr<DecodeState> LanguageModel::make_decode_state(int64_t batch, int64_t capacity, DecodeMethod method) {
  auto state = std::make_unique<LayerwiseDecodeState>(batch, capacity, method);
  for (const auto& block : blocks_) state->layers.push_back(block->start_decoding(batch, capacity, method));
  return state;
}

at::Tensor LanguageModel::decode_hidden(LayerwiseDecodeState& state, const at::Tensor& input_ids) {
  at::Tensor h = embed_->forward(input_ids);  // B x T x d
  for (size_t i = 0; i < blocks_.size(); ++i) h = blocks_[i]->decode(h, *state.layers[i], state.position());
  return final_norm_.is_empty() ? h : final_norm_.forward(h);
}

std::unique_ptr<DecodeState> LanguageModel::start_decoding(int64_t batch, int64_t capacity, DecodeMethod method) {
  TORCH_CHECK(batch >= 1, "start_decoding: batch must be >= 1, got ", batch);
  TORCH_CHECK(capacity >= 1, "start_decoding: capacity must be >= 1, got ", capacity);
  TORCH_CHECK(max_len() <= 0 || capacity <= max_len(), "start_decoding: capacity ", capacity,
              " exceeds the model's max_len ", max_len(), " (prompt plus new tokens must fit)");
  const DecodeMethod resolved = resolve_decode_method(method, capacity);
  std::unique_ptr<DecodeState> state;
  if (resolved == DecodeMethod::Recompute) {
    state = std::make_unique<RecomputeState>(batch, capacity);
  } else {
    torch::NoGradGuard no_grad;
    state = make_decode_state(batch, capacity, resolved);
  }
  state->owner_ = this;
  return state;
}

at::Tensor LanguageModel::decode(DecodeState& state, const at::Tensor& input_ids) {
  TORCH_CHECK(state.owner_ == this, "decode: the state was made by another model (use this model's start_decoding)");
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.size(0) == state.batch_size() && input_ids.size(1) >= 1,
              "decode: input_ids must be B x T with B = ", state.batch_size(), " (the state's batch) and T >= 1, got ",
              input_ids.sizes());
  const int64_t T = input_ids.size(1);
  TORCH_CHECK(state.position() + T <= state.capacity(), "decode: ", state.position(), " tokens fed plus ", T,
              " new exceed the state's capacity ", state.capacity());
  check_input_ids(input_ids, vocab_size(), /*max_len=*/0);
  TORCH_CHECK(!is_training(), "decode: the model is in training mode (dropout); call eval() first");
  torch::NoGradGuard no_grad;

  if (state.method() == DecodeMethod::Recompute) {
    auto& s = static_cast<RecomputeState&>(state);
    s.tokens = s.tokens.defined() ? at::cat({s.tokens, input_ids}, 1) : input_ids.contiguous();
    state.position_ += T;
    return forward(s.tokens).narrow(1, state.position_ - T, T);
  }
  auto& layerwise = static_cast<LayerwiseDecodeState&>(state);
  at::Tensor hidden;
  if (state.position() == 0 || T == 1) {
    hidden = decode_hidden(layerwise, input_ids);
    state.position_ += T;
  } else {  // more tokens after the prefill: one step each
    std::vector<at::Tensor> steps;
    for (int64_t t = 0; t < T; ++t) {
      steps.push_back(decode_hidden(layerwise, input_ids.narrow(1, t, 1)));
      state.position_ += 1;
    }
    hidden = at::cat(steps, 1);
  }
  return head(hidden);
}

}  // namespace tmm::models
