// Multi-lane complex FFT of power-of-two size, written for convolution.
//
// Data is split complex and lane-minor: element t of lane l lives at
// re[t*lanes + l], im[t*lanes + l]. Every butterfly works on whole rows of
// `lanes` values with one scalar twiddle, so the inner loops are plain SIMD
// over lanes (adjacent channels of a B x L x C tensor) with no transposes.
//
// forward() is decimation in frequency: natural order in, bit-reversed order
// out (frequency k sits in row row_of(k)). inverse() is decimation in time:
// bit-reversed in, natural out, unnormalised (a round trip scales by n). A
// convolution multiplies pointwise in between and never pays for a
// permutation. Large transforms recurse into quarters once the working set
// fits in cache.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/isa_variant.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {

template <class R>
class LaneFft {
 public:
  explicit LaneFft(int64_t n);

  int64_t size() const { return n_; }
  int64_t row_of(int64_t k) const { return rev_[k]; }

  void forward(R* re, R* im, int64_t lanes) const;  // exp(-2 pi i jk/n)
  void inverse(R* re, R* im, int64_t lanes) const;  // exp(+2 pi i jk/n)

  // The zero-padded variants a causal convolution needs (n >= 2L - 1):
  // forward_padded() treats rows [n/2, n) as zero without reading them, and
  // inverse_truncated() produces only rows [0, n/2). Each skips half of the
  // largest pass. Both need n >= 4.
  void forward_padded(R* re, R* im, int64_t lanes) const;
  void inverse_truncated(R* re, R* im, int64_t lanes) const;

 private:
  void forward_block(R* re, R* im, int64_t lanes, int64_t m) const;
  void inverse_block(R* re, R* im, int64_t lanes, int64_t m) const;
  void dif4(R* re, R* im, int64_t lanes, int64_t m, int64_t blocks) const;
  void dit4(R* re, R* im, int64_t lanes, int64_t m, int64_t blocks) const;
  void dif4_upper_zero(R* re, R* im, int64_t lanes) const;
  void dit4_lower_only(R* re, R* im, int64_t lanes) const;

  int64_t n_;
  std::vector<R> wr_, wi_;     // exp(-2 pi i j/n), j < n
  std::vector<int32_t> rev_;   // bit reversal of k
};

// Smallest power of two >= n (n >= 1).
int64_t next_pow2(int64_t n);

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
