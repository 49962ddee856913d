// Incremental decoding: feeding a model its tokens a few at a time, keeping
// per-layer state so each new position costs what the architecture allows
// instead of a full forward over everything so far.
//
//   auto state = model.start_decoding(/*batch=*/B, /*capacity=*/P + N);
//   at::Tensor logits = model.decode(*state, prompt);   // B x P x V (prefill)
//   logits = model.decode(*state, next);                 // B x 1 x V (a step)
//
// decode() returns, for every position it is fed, the logits forward() gives
// at that position on the whole sequence fed so far (float tolerance).
#pragma once

#include <cstdint>
#include <string>

namespace tmm::models {

enum class DecodeMethod {
  Auto,       // the fastest exact method the model has
  Recompute,  // the full forward over all tokens fed so far at every call (the baseline)
  Cached,     // per-layer caches: KV (Transformer), mixer inputs (TMM, Hyena), recurrent state (Mamba2)
  Fast,       // TMM and Hyena: online blocked FFT convolution (FutureFill), O(n log^2 n) for n tokens
  Distilled,  // TMM and Hyena, approximate: each long kernel as a small state-space model (distill.h), fixed state
};

// "auto" | "recompute" | "cached" | "fast" | "distilled"; anything else is an error naming it.
DecodeMethod parse_decode_method(const std::string& name);
std::string to_string(DecodeMethod method);

class LanguageModel;

// What a model remembers of the tokens fed so far, for a batch of sequences
// that advance together. Made by LanguageModel::start_decoding and only
// usable with the model that made it.
class DecodeState {
 public:
  DecodeState(int64_t batch, int64_t capacity, DecodeMethod method)
      : batch_(batch), capacity_(capacity), method_(method) {}
  virtual ~DecodeState() = default;
  DecodeState(const DecodeState&) = delete;
  DecodeState& operator=(const DecodeState&) = delete;

  int64_t batch_size() const { return batch_; }
  int64_t capacity() const { return capacity_; }  // the most tokens this state can hold
  int64_t position() const { return position_; }  // tokens fed so far
  DecodeMethod method() const { return method_; }  // never Auto
  // The bytes of the tensors this state holds (its per-layer caches and
  // recurrent states), measured on them.
  virtual int64_t state_bytes() const { return 0; }

 private:
  friend class LanguageModel;
  const LanguageModel* owner_ = nullptr;
  int64_t batch_, capacity_, position_ = 0;
  DecodeMethod method_;
};

}  // namespace tmm::models
