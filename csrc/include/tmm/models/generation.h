// Text generation with any model of the zoo: batched prompts of different
// lengths, greedy or sampled (temperature, top-k, top-p, seed), stop tokens,
// through incremental decoding (decoding.h). Python's tmm.models
// LanguageModel.generate calls this same code.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tmm/models/language_model.h"

namespace tmm::models {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token, the lowest id on ties)
  int64_t top_k = 0;         // sample among the k most likely tokens; 0: all
  double top_p = 1.0;        // ... among the fewest most likely tokens holding this probability; 1: all
  uint64_t seed = 0;         // sequence i draws from its own generator seeded by (seed, i)
};

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  std::vector<int64_t> stop_tokens;  // a sequence ends with the first of these it generates (kept)
  DecodeMethod method = DecodeMethod::Auto;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  // the new tokens of each prompt
  std::vector<std::string> finish_reasons;   // "stop" (a stop token), "length" (max_new_tokens) or "callback"
  DecodeMethod method = DecodeMethod::Auto;  // the method used (Auto resolved)
  double prefill_seconds = 0;                // the batched prefill of the shortest prompt's length
  std::vector<double> step_seconds;          // each single-position decode step after it
};

// Called after each sampling round with the token each sequence got (-1 for
// one still reading its prompt or already finished); returning false stops
// generation (finish reason "callback").
using TokenCallback = std::function<bool(const std::vector<int64_t>& new_tokens)>;

// Prompts: non-empty token id lists. All sequences advance together: the
// shortest prompt's length is prefilled at once, longer prompts are then fed
// their own tokens while shorter ones already generate. Needs the model's
// max_len >= longest prompt + max_new_tokens - 1 (the last token is never fed
// back). Runs in eval mode (no dropout) whatever the model's mode; each
// module's train/eval flag is restored afterwards.
GenerateResult generate(LanguageModel& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options, const TokenCallback& on_tokens = nullptr);

// Draws one token from a row of logits under SamplingOptions.
class Sampler {
 public:
  Sampler(const SamplingOptions& options, uint64_t stream);
  int64_t sample(const float* logits, int64_t vocab);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::pair<double, int64_t>> scratch_;  // (probability, id)
};

// Checks sampling options; errors name the option and the value.
void check_sampling_options(const SamplingOptions& options);

}  // namespace tmm::models
