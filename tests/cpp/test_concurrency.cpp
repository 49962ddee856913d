// Concurrency: the op (forward and backward, direct and FFT paths, float32
// and float64) and the models (forward and incremental decoding) called from
// several threads at once give exactly the results of serial calls. The op
// keeps no CPU-side caches (the CUDA plan pool is bounded and locked:
// csrc/ops/causal_toeplitz_cuda.cpp), so this guards against any shared
// scratch state creeping in.
#include <atomic>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/csrc/autograd/grad_mode.h>
#include <tmm/tmm.h>

#include "tmm/models/language_model.h"

namespace {

struct Job {
  at::Tensor x, w, b, gy;
  std::vector<at::Tensor> expected;  // y, gx, gw, gb from a serial run

  std::vector<at::Tensor> run() const {
    at::Tensor y = tmm::ops::causal_toeplitz(x, w, b);
    auto [gx, gw, gb] = tmm::ops::causal_toeplitz_backward(gy, x, w);
    return {y, gx, gw, gb};
  }
};

Job make_job(int64_t i) {
  // Shapes cycle through the direct path (tiny L), the FFT path, groups and taps.
  const int64_t L = std::vector<int64_t>{3, 37, 256, 1000}[i % 4];
  const int64_t C = 8, G = i % 3 == 0 ? 1 : 2, K = i % 2 == 0 ? 1 : 3;
  const auto dtype = i % 5 == 0 ? at::kDouble : at::kFloat;
  Job j;
  j.x = at::randn({2, L, C}, dtype);
  j.w = at::randn({G, K, L + 5}, dtype);
  j.b = at::randn({G, L + 5}, dtype);
  j.gy = at::randn({2, L, C}, dtype);
  j.expected = j.run();
  return j;
}

}  // namespace

TEST_CASE("concurrency: the op from several threads equals serial calls", "[concurrency]") {
  at::manual_seed(11);
  std::vector<Job> jobs;
  for (int64_t i = 0; i < 16; ++i) jobs.push_back(make_job(i));
  constexpr int kThreads = 6, kRounds = 8;
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRounds; ++r) {
          for (size_t k = 0; k < jobs.size(); ++k) {
            const Job& job = jobs[(k + size_t(t) * 5) % jobs.size()];
            const auto got = job.run();
            for (size_t o = 0; o < got.size(); ++o) {
              if (!at::equal(got[o], job.expected[o])) ++mismatches;
            }
          }
        }
      } catch (...) {
        ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(mismatches == 0);
}

TEST_CASE("concurrency: one model, forward and decoding from several threads", "[concurrency]") {
  torch::NoGradGuard no_grad;
  at::manual_seed(5);
  for (const char* config :
       {R"({"arch": "tmm", "vocab_size": 50, "d_model": 16, "n_layers": 2, "max_len": 64, "heads": 2})",
        R"({"arch": "hyena", "vocab_size": 50, "d_model": 16, "n_layers": 2, "max_len": 64})"}) {
    INFO(config);
    auto model = tmm::models::build_model(config);
    model->eval();
    const at::Tensor ids = at::randint(50, {4, 64}, at::kLong);
    const at::Tensor expected = model->forward(ids);
    std::atomic<int> mismatches{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        try {
          torch::NoGradGuard guard;  // grad mode is thread-local
          if (!at::equal(model->forward(ids), expected)) ++mismatches;
          // Each thread its own decode state over the same model.
          auto method = t % 2 ? tmm::models::DecodeMethod::Fast : tmm::models::DecodeMethod::Cached;
          auto state = model->start_decoding(4, 64, method);
          std::vector<at::Tensor> steps{model->decode(*state, ids.narrow(1, 0, 9))};
          for (int64_t p = 9; p < 64; ++p) steps.push_back(model->decode(*state, ids.narrow(1, p, 1)));
          if (!at::allclose(at::cat(steps, 1), expected, 1e-4, 1e-4)) ++mismatches;
        } catch (...) {
          ++errors;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(errors == 0);
    CHECK(mismatches == 0);
  }
}
