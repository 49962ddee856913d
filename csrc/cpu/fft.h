// Multi-lane complex FFT of mixed-radix size (n = 2^a 3^b 5^c), written for
// convolution.
//
// Data is split complex and lane-minor: element t of lane l lives at
// re[t*kLanes + l], im[t*kLanes + l]. Every butterfly works on whole rows of
// kLanes values with scalar twiddles, so the inner loops are plain SIMD
// over lanes (adjacent channels of a B x L x C tensor) with no transposes;
// the row width is a compile-time constant, so a row's butterfly is
// straight-line vector code (one AVX-512 register of floats per row).
//
// The passes, in forward order: radix 4 while 4 divides the rest, then 5,
// then 3, then one radix-2 pass if a factor 2 is left (always the last, on
// blocks of 2, twiddle-free). forward() is decimation in frequency: natural
// order in, digit-reversed order out (frequency k sits in row row_of(k)).
// inverse() is decimation in time, the passes' transposes in reverse order:
// digit-reversed in, natural out, unnormalised (a round trip scales by n). A
// convolution multiplies pointwise in between and never pays for a
// permutation. Large transforms recurse into sub-blocks once the working
// set fits in cache. For a power of two the passes (and so the results) are
// those of the radix-4/2 transform this replaced.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/isa_variant.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {

constexpr int64_t kLanes = 16;  // complex lanes per row

template <class R>
class LaneFft {
 public:
  // std::invalid_argument unless n >= 1 has no prime factor above 5.
  explicit LaneFft(int64_t n);

  // The plan of size n from a process-wide cache of the most recent ones
  // (a plan's twiddles cost n long-double sines and cosines: 35 ms at
  // n = 131072, more than a whole call at small L). Thread-safe.
  static std::shared_ptr<const LaneFft> shared(int64_t n);

  int64_t size() const { return n_; }
  int64_t row_of(int64_t k) const { return rev_[k]; }
  int64_t freq_of(int64_t row) const { return freq_[row]; }  // the inverse of row_of

  void forward(R* re, R* im) const;  // exp(-2 pi i jk/n)
  void inverse(R* re, R* im) const;  // exp(+2 pi i jk/n)

  // The zero-padded variants a causal convolution needs (n >= 2L - 1):
  // forward_padded() treats rows [n/2, n) as zero without reading them, and
  // inverse_truncated() produces only rows [0, n/2). Each skips half of the
  // first (largest) radix-4 pass. Both need 4 to divide n.
  void forward_padded(R* re, R* im) const;
  void inverse_truncated(R* re, R* im) const;

  // forward_padded, product(ctx, row_begin, row_end) on consecutive row
  // ranges that together cover [0, n), then inverse_truncated, ordered so
  // that each range is multiplied and transformed back while it is still in
  // cache: for a transform larger than the cache, one sweep over memory
  // fewer than the three calls, and no product in digit-reversed order over
  // the whole buffer. The results are bitwise those of the three calls.
  using RowProduct = void (*)(void* ctx, int64_t row_begin, int64_t row_end);
  void convolve_padded(R* re, R* im, RowProduct product, void* ctx) const;

 private:
  void convolve_block(R* re, R* im, int stage, int64_t row0, RowProduct product, void* ctx) const;
  void forward_block(R* re, R* im, int stage) const;
  void inverse_block(R* re, R* im, int stage) const;
  void dif_pass(int stage, R* re, R* im, int64_t blocks) const;
  void dit_pass(int stage, R* re, R* im, int64_t blocks) const;
  void dif4(R* re, R* im, int64_t m, int64_t blocks) const;
  void dit4(R* re, R* im, int64_t m, int64_t blocks) const;
  void dif3(R* re, R* im, int64_t m, int64_t blocks) const;
  void dit3(R* re, R* im, int64_t m, int64_t blocks) const;
  void dif5(R* re, R* im, int64_t m, int64_t blocks) const;
  void dit5(R* re, R* im, int64_t m, int64_t blocks) const;
  void dif4_upper_zero(R* re, R* im) const;
  void dit4_lower_only(R* re, R* im) const;

  int64_t n_;
  int64_t block_bytes_;         // larger blocks recurse (fft_block_bytes())
  std::vector<int> radix_;      // radix of pass s, forward order
  std::vector<int64_t> block_;  // block size pass s works on (block_[0] = n)
  std::vector<R> wr_, wi_;      // exp(-2 pi i j/n), j < n
  std::vector<int32_t> rev_;    // row of frequency k
  std::vector<int32_t> freq_;   // frequency in row r
};

// Smallest power of two >= n (n >= 1).
int64_t next_pow2(int64_t n);

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
