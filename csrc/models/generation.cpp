#include "tmm/models/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace tmm::models {

void check_sampling_options(const SamplingOptions& o) {
  TORCH_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, "temperature: expected a finite value >= 0, got ",
              o.temperature);
  TORCH_CHECK(o.top_k >= 0, "top_k: expected >= 0 (0 = off), got ", o.top_k);
  TORCH_CHECK(o.top_p > 0 && o.top_p <= 1, "top_p: expected a value in (0, 1], got ", o.top_p);
}

Sampler::Sampler(const SamplingOptions& options, uint64_t stream) : options_(options) {
  std::seed_seq seq{uint32_t(options.seed), uint32_t(options.seed >> 32), uint32_t(stream), uint32_t(stream >> 32)};
  rng_.seed(seq);
}

int64_t Sampler::sample(const float* logits, int64_t vocab) {
  if (options_.temperature == 0) return std::max_element(logits, logits + vocab) - logits;
  auto& c = scratch_;
  c.clear();
  for (int64_t i = 0; i < vocab; ++i) c.emplace_back(double(logits[i]) / options_.temperature, i);
  // Most likely first; ties by id, so the order (and the draw) is deterministic.
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  const int64_t k = options_.top_k > 0 ? std::min(options_.top_k, vocab) : vocab;
  std::partial_sort(c.begin(), c.begin() + k, c.end(), by_logit);
  c.resize(k);
  TORCH_CHECK(std::isfinite(c.front().first), "generate: the logits are not finite (got ", c.front().first,
              " as the largest); the model produced NaN or Inf");
  const double top = c.front().first;
  double total = 0;
  for (auto& [p, id] : c) total += (p = std::exp(p - top));
  // top-p: the fewest leading tokens whose probability reaches top_p.
  double kept = 0;
  size_t n = 0;
  while (n < c.size() && (n == 0 || kept < options_.top_p * total)) kept += c[n++].first;
  const double u = std::uniform_real_distribution<double>(0.0, kept)(rng_);
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += c[i].first;
    if (u < acc) return c[i].second;
  }
  return c[n - 1].second;
}

namespace {

// Generation is inference whatever mode the model is in (build_model and
// load_checkpoint give it in training mode): dropout off while it runs, each
// module's own flag restored afterwards. A model already in eval mode is not
// touched, so concurrent generation from it writes nothing.
class EvalModeForGeneration {
 public:
  explicit EvalModeForGeneration(torch::nn::Module& model)
      : model_(model), children_(model.modules(/*include_self=*/false)) {
    was_training_.push_back(model.is_training());
    for (const auto& m : children_) was_training_.push_back(m->is_training());
    changed_ = std::find(was_training_.begin(), was_training_.end(), true) != was_training_.end();
    if (changed_) model.eval();
  }
  ~EvalModeForGeneration() {
    if (!changed_) return;
    // train() is recursive and children_ is in pre-order, so each module's
    // own call comes after its parent's.
    model_.train(was_training_[0]);
    for (size_t i = 0; i < children_.size(); ++i) children_[i]->train(was_training_[i + 1]);
  }
  EvalModeForGeneration(const EvalModeForGeneration&) = delete;
  EvalModeForGeneration& operator=(const EvalModeForGeneration&) = delete;

 private:
  torch::nn::Module& model_;
  std::vector<std::shared_ptr<torch::nn::Module>> children_;
  std::vector<bool> was_training_;  // the model's, then children_'s
  bool changed_ = false;
};

}  // namespace

GenerateResult generate(LanguageModel& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options, const TokenCallback& on_tokens) {
  using clock = std::chrono::steady_clock;
  check_sampling_options(options.sampling);
  TORCH_CHECK(!prompts.empty(), "generate: expected at least one prompt");
  TORCH_CHECK(options.max_new_tokens >= 1, "max_new_tokens: expected >= 1, got ", options.max_new_tokens);
  const int64_t B = int64_t(prompts.size()), V = model.vocab_size();
  size_t shortest = prompts[0].size(), longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    TORCH_CHECK(!prompts[b].empty(), "generate: prompt ", b, " is empty; every prompt needs at least one token");
    for (int64_t id : prompts[b]) {
      TORCH_CHECK(id >= 0 && id < V, "generate: prompt ", b, " has token id ", id, ", expected ids in [0, ", V, ")");
    }
    shortest = std::min(shortest, prompts[b].size());
    longest = std::max(longest, prompts[b].size());
  }
  const int64_t capacity = int64_t(longest) + options.max_new_tokens - 1;
  TORCH_CHECK(model.max_len() <= 0 || capacity <= model.max_len(), "generate: the longest prompt (", longest,
              " tokens) plus max_new_tokens (", options.max_new_tokens, ") need ", capacity,
              " positions, more than the model's max_len ", model.max_len());

  torch::NoGradGuard no_grad;
  EvalModeForGeneration eval_mode(model);
  GenerateResult result;
  result.tokens.resize(B);
  result.finish_reasons.assign(B, "");
  std::vector<Sampler> samplers;
  for (int64_t b = 0; b < B; ++b) samplers.emplace_back(options.sampling, uint64_t(b));
  auto state = model.start_decoding(B, capacity, options.method);
  result.method = state->method();

  const auto params = model.parameters();
  const at::Device device = params.empty() ? at::Device(at::kCPU) : params[0].device();
  const int64_t P = int64_t(shortest);
  at::Tensor prefix = at::empty({B, P}, at::kLong);
  for (int64_t b = 0; b < B; ++b) std::copy_n(prompts[b].begin(), P, prefix[b].data_ptr<int64_t>());
  auto start = clock::now();
  at::Tensor logits = model.decode(*state, prefix.to(device));
  at::Tensor last = logits.select(1, P - 1).to(at::kCPU, at::kFloat).contiguous();
  result.prefill_seconds = std::chrono::duration<double>(clock::now() - start).count();

  std::vector<int64_t> next(B);
  int64_t finished = 0;
  for (int64_t pos = P;; ++pos) {
    // The token at position pos of each sequence: its prompt's, or sampled.
    std::vector<int64_t> emitted(B, -1);
    for (int64_t b = 0; b < B; ++b) {
      if (pos < int64_t(prompts[b].size())) {
        next[b] = prompts[b][pos];
      } else if (result.finish_reasons[b].empty()) {
        const int64_t id = samplers[b].sample(last[b].data_ptr<float>(), V);
        result.tokens[b].push_back(id);
        emitted[b] = next[b] = id;
        const bool stop = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) !=
                          options.stop_tokens.end();
        if (stop || int64_t(result.tokens[b].size()) == options.max_new_tokens) {
          result.finish_reasons[b] = stop ? "stop" : "length";
          ++finished;
        }
      }  // a finished sequence keeps feeding its last token; its outputs are ignored
    }
    if (on_tokens && !on_tokens(emitted)) {
      for (auto& r : result.finish_reasons) if (r.empty()) r = "callback";
      break;
    }
    if (finished == B) break;
    start = clock::now();
    const at::Tensor step = at::tensor(next, at::kLong).view({B, 1}).to(device);
    last = model.decode(*state, step).select(1, 0).to(at::kCPU, at::kFloat).contiguous();
    result.step_seconds.push_back(std::chrono::duration<double>(clock::now() - start).count());
  }
  return result;
}

}  // namespace tmm::models
