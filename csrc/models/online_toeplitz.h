// Causal Toeplitz mixing (tmm::ops::causal_toeplitz) fed a few positions at
// a time, for incremental decoding of TMM and Hyena. Two exact methods:
//
// - cached: keep the inputs; step t costs O(t C): row t of the Toeplitz matrix
//   against all inputs so far (a matrix product over the cache).
// - fast (FutureFill): keep, for every future position, the sum of the
//   contributions of the inputs already "flushed" to it. After generated
//   input a-1 (counted from the end of the prompt), the block of the last
//   m = 2^ctz(a) inputs is convolved by FFT (the op itself) onto the next m
//   positions. Every pair (input s, output t > s) is covered exactly once
//   (by the block of the highest bit in which s and t differ), so step t only
//   adds its own lag-0 term: O(n log^2 n) for n tokens instead of O(n^2).
//   The prompt's contributions to all future positions come from one FFT.
//
// A lower-triangular matrix mixer (TMM's "masked" ablation, G x N x N) is
// also accepted, with the cached method only.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "tmm/models/decoding.h"

namespace tmm::models {

// What Auto means for a long-convolution model (TMM, Hyena): fast from a
// capacity of 1024 on, cached below (scripts/bench_decode.py measures where
// fast wins); other methods are kept.
inline DecodeMethod long_conv_decode_method(DecodeMethod requested, int64_t capacity) {
  if (requested != DecodeMethod::Auto) return requested;
  return capacity >= 1024 ? DecodeMethod::Fast : DecodeMethod::Cached;
}

// A causal sequence mixer fed a few positions at a time: the exact
// OnlineToeplitz below, or DistilledToeplitz (distilled_toeplitz.h).
class OnlineMixer {
 public:
  virtual ~OnlineMixer() = default;
  // x: B x T x C at the next T positions: any T for the first call (the
  // prompt), T == 1 after it. Returns B x T x C.
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The bytes of every tensor this state holds.
  virtual int64_t state_bytes() const = 0;
};

// y[b,g,c] = sum_i z[b,g,i,c-(K-1)+i] (B x G x K x Cg -> B x G*Cg): tap i of
// a K-tap kernel reads the channel K-1-i below.
at::Tensor combine_taps(const at::Tensor& z);

class OnlineToeplitz : public OnlineMixer {
 public:
  enum class Kind { Toeplitz, Matrix };
  // weight and bias as the op takes them (G x K x N and G x N; bias may be
  // undefined), or a Matrix mixer (G x N x N), for `batch` sequences of
  // `channels` channels and at most `capacity` positions (<= N).
  OnlineToeplitz(Kind kind, at::Tensor weight, at::Tensor bias, int64_t batch, int64_t channels, int64_t capacity,
                 bool fast);

  // x: B x T x C at the next T positions: the first call (the prompt) mixed
  // by the full op, later ones a position at a time. Returns B x T x C.
  at::Tensor forward(const at::Tensor& x) override;
  int64_t state_bytes() const override;
  int64_t position() const { return position_; }

 private:
  at::Tensor prefill(const at::Tensor& x);
  at::Tensor step_cached(const at::Tensor& x);  // B x C -> B x C
  at::Tensor step_fast(const at::Tensor& x);
  void flush(int64_t a);                        // FutureFill: the block ending at generated input a

  Kind kind_;
  bool fast_;
  int64_t batch_, channels_, capacity_, groups_, taps_, position_ = 0, prompt_ = 0;
  at::Tensor weight_, bias_;
  at::Tensor rows_;    // cached: G x K x capacity, taps flipped so that row t is a contiguous slice
  at::Tensor inputs_;  // B x G x capacity x Cg: every input so far, grouped for one matmul per step
  at::Tensor future_;  // fast: B x capacity x C, flushed contributions plus bias
};

}  // namespace tmm::models
