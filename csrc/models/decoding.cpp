// LanguageModel's decoding entry points: argument checks, the Recompute
// baseline every model has, the per-layer state loop, and the split of a
// multi-token call after the prefill into single steps, so each block only
// implements prefill and step.
#include "tmm/models/decoding.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "tmm/models/language_model.h"
#include "models/online_toeplitz.h"

namespace tmm::models {
namespace {

// The baseline: remembers the tokens and runs the full forward each time.
struct RecomputeState : DecodeState {
  RecomputeState(int64_t batch, int64_t capacity) : DecodeState(batch, capacity, DecodeMethod::Recompute) {}
  at::Tensor tokens;  // B x position
};

}  // namespace

int64_t LayerwiseDecodeState::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& layer : layers) bytes += layer->state_bytes();
  return bytes;
}

std::unique_ptr<LayerDecodeState> LanguageModelBlock::start_distilled_decoding(int64_t, int64_t,
                                                                               const Distillation&,
                                                                               const std::string& prefix) {
  TORCH_CHECK(false, "decode method \"distilled\": block ", prefix, " has no long convolution to distil");
}

std::vector<LongKernel> LanguageModel::long_kernels() {
  std::vector<LongKernel> out;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    for (auto& k : blocks_[i]->long_kernels()) {
      k.name = "blocks." + std::to_string(i) + "." + k.name;
      out.push_back(std::move(k));
    }
  }
  return out;
}

void LanguageModel::set_distillation(std::shared_ptr<const Distillation> distillation) {
  torch::NoGradGuard no_grad;
  if (distillation) {
    for (const auto& k : long_kernels()) {
      const DistilledKernel& d = distillation->kernel(k.name);
      TORCH_CHECK(d.lambda.size(0) == k.weight.size(0) && d.lambda.size(1) == k.weight.size(1) &&
                      d.length == k.weight.size(2),
                  "set_distillation: kernel '", k.name, "' was fitted as ", d.lambda.size(0), " x ",
                  d.lambda.size(1), " x ", d.length, ", the model's is ", k.weight.sizes());
    }
  }
  distillation_ = std::move(distillation);
}

DecodeMethod parse_decode_method(const std::string& name) {
  if (name == "auto") return DecodeMethod::Auto;
  if (name == "recompute") return DecodeMethod::Recompute;
  if (name == "cached") return DecodeMethod::Cached;
  if (name == "fast") return DecodeMethod::Fast;
  if (name == "distilled") return DecodeMethod::Distilled;
  TORCH_CHECK(false, "decode method: expected auto, recompute, cached, fast or distilled, got \"", name, "\"");
}

std::string to_string(DecodeMethod method) {
  switch (method) {
    case DecodeMethod::Auto: return "auto";
    case DecodeMethod::Recompute: return "recompute";
    case DecodeMethod::Cached: return "cached";
    case DecodeMethod::Fast: return "fast";
    case DecodeMethod::Distilled: return "distilled";
  }
  return "?";
}

DecodeMethod LanguageModel::resolve_decode_method(DecodeMethod requested, int64_t capacity) const {
  const bool long_convolutions = std::any_of(blocks_.begin(), blocks_.end(),
                                             [](const auto& block) { return block->has_long_kernels(); });
  if (long_convolutions) return long_conv_decode_method(requested, capacity);
  TORCH_CHECK(requested != DecodeMethod::Fast && requested != DecodeMethod::Distilled, "decode method \"",
              to_string(requested), "\" is for the long-convolution models (tmm's Toeplitz mixers, hyena); this ",
              arch(), " model has none: auto, recompute and cached");
  return requested == DecodeMethod::Auto ? DecodeMethod::Cached : requested;
}

std::unique_ptr<DecodeState> LanguageModel::make_decode_state(int64_t batch, int64_t capacity, DecodeMethod method) {
  auto state = std::make_unique<LayerwiseDecodeState>(batch, capacity, method);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (method == DecodeMethod::Distilled) {
      const std::string prefix = "blocks." + std::to_string(i) + ".";
      state->layers.push_back(blocks_[i]->start_distilled_decoding(batch, capacity, *distillation_, prefix));
    } else {
      state->layers.push_back(blocks_[i]->start_decoding(batch, capacity, method));
    }
  }
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
  TORCH_CHECK(resolved != DecodeMethod::Distilled || distillation_ != nullptr,
              "decode method \"distilled\": the model has no distillation (fit one with tmm.distill / "
              "tmm::models::distill, or load one saved beside the checkpoint)");
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
