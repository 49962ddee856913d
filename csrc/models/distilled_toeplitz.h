// Decode method "distilled" (distill.h): a causal Toeplitz mixer run with a
// state whose size does not depend on the context. Per kernel and channel:
// a ring buffer of the last W inputs for the exact taps t < W, and r complex
// modes h_i <- lambda_i h_i + x[t - W] for the tail, read out as
// Re(sum_i R_i h_i). A step costs O((W + r) C) whatever the position.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>

#include "models/online_toeplitz.h"
#include "tmm/models/distill.h"

namespace tmm::models {

class DistilledToeplitz : public OnlineMixer {
 public:
  // `kernel` fitted from a G x K x N Toeplitz weight; bias G x N or undefined,
  // for `batch` sequences of `channels` channels and `capacity` positions.
  DistilledToeplitz(const DistilledKernel& kernel, at::Tensor bias, at::ScalarType dtype, at::Device device,
                    int64_t batch, int64_t channels, int64_t capacity);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t state_bytes() const override;

 private:
  at::Tensor prefill(const at::Tensor& x);
  at::Tensor step(const at::Tensor& x);  // B x C -> B x C

  DistilledKernel kernel_;  // a copy (its tensors shared): the state outlives no distillation
  int64_t batch_, channels_, capacity_, groups_, taps_, window_, position_ = 0;
  at::Tensor bias_;
  at::Tensor doubled_taps_;  // G x K x 2W: the window's taps flipped, twice (a rotation is a slice)
  at::Tensor direct_;        // 1 x G x K x 1 (W = 0 with a direct term) or undefined
  at::Tensor lambda_, residue_;  // 1 x G x K x 1 x r, 1 x G x K x r x 1 (complex)
  at::Tensor ring_;          // state: B x G x W x Cg, input s at slot s mod W
  at::Tensor modes_;         // state: B x G x K x Cg x r (complex): the tail's recurrence
};

// The mixer for decode method "distilled": DistilledToeplitz, or the exact
// cached decoder when the window covers the whole capacity (no tail to run).
std::unique_ptr<OnlineMixer> make_distilled_mixer(const DistilledKernel& kernel, const at::Tensor& weight,
                                                  const at::Tensor& bias, int64_t batch, int64_t channels,
                                                  int64_t capacity);

}  // namespace tmm::models
