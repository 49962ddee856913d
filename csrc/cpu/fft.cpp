#include "cpu/isa_variant.h"

#include "cpu/fft.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tmm::cpu::TMM_CPU_CAPABILITY {
namespace {

// Sub-transforms whose rows fit in this many bytes run all their passes
// while in cache (about half of a core's L2).
constexpr int64_t kCacheBytes = 256 * 1024;

// Radix-2 pass with unit twiddle on blocks of size 2 (the last DIF pass or
// the first DIT pass of a size with odd log2); its own inverse up to scale.
template <class R>
void radix2_unit(R* re, R* im, int64_t lanes, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    R* __restrict r0 = re + 2 * b * lanes;
    R* __restrict i0 = im + 2 * b * lanes;
    R* __restrict r1 = r0 + lanes;
    R* __restrict i1 = i0 + lanes;
    #pragma GCC ivdep
    for (int64_t l = 0; l < lanes; ++l) {
      const R ar = r0[l], ai = i0[l], br = r1[l], bi = i1[l];
      r0[l] = ar + br; i0[l] = ai + bi;
      r1[l] = ar - br; i1[l] = ai - bi;
    }
  }
}

}  // namespace

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

template <class R>
LaneFft<R>::LaneFft(int64_t n) : n_(n), wr_(n), wi_(n), rev_(n) {
  if (n < 1 || (n & (n - 1))) throw std::invalid_argument("LaneFft: size must be a power of two");
  for (int64_t j = 0; j < n; ++j) {
    const long double a = -2.0L * 3.14159265358979323846264338327950288L * j / n;
    wr_[j] = R(std::cos(a));
    wi_[j] = R(std::sin(a));
  }
  int bits = 0;
  while ((int64_t(1) << bits) < n) ++bits;
  for (int64_t k = 0; k < n; ++k) {
    int64_t r = 0;
    for (int b = 0; b < bits; ++b) r |= ((k >> b) & 1) << (bits - 1 - b);
    rev_[k] = int32_t(r);
  }
}

// One radix-4 DIF pass over `blocks` consecutive blocks of m rows. Outputs
// of residue 0, 2, 1, 3 go to quarters 0..3, so that mixed radix-4 and a final
// radix-2 pass leave the spectrum in bit-reversed order.
template <class R>
void LaneFft<R>::dif4(R* re, R* im, int64_t lanes, int64_t m, int64_t blocks) const {
  const int64_t q = m / 4, step = n_ / m;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * lanes;
      R* __restrict i0 = im + row * lanes;
      R* __restrict r1 = r0 + q * lanes;
      R* __restrict i1 = i0 + q * lanes;
      R* __restrict r2 = r1 + q * lanes;
      R* __restrict i2 = i1 + q * lanes;
      R* __restrict r3 = r2 + q * lanes;
      R* __restrict i3 = i2 + q * lanes;
      const R w1r = wr_[j * step], w1i = wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = wi_[2 * j * step];
      const R w3r = wr_[3 * j * step], w3i = wi_[3 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < lanes; ++l) {
        const R t0r = r0[l] + r2[l], t0i = i0[l] + i2[l];
        const R t1r = r0[l] - r2[l], t1i = i0[l] - i2[l];
        const R t2r = r1[l] + r3[l], t2i = i1[l] + i3[l];
        const R t3r = i1[l] - i3[l], t3i = r3[l] - r1[l];  // -i (x1 - x3)
        const R y0r = t0r + t2r, y0i = t0i + t2i;
        const R y2r = t0r - t2r, y2i = t0i - t2i;
        const R y1r = t1r + t3r, y1i = t1i + t3i;
        const R y3r = t1r - t3r, y3i = t1i - t3i;
        r0[l] = y0r; i0[l] = y0i;
        r1[l] = y2r * w2r - y2i * w2i; i1[l] = y2r * w2i + y2i * w2r;
        r2[l] = y1r * w1r - y1i * w1i; i2[l] = y1r * w1i + y1i * w1r;
        r3[l] = y3r * w3r - y3i * w3i; i3[l] = y3r * w3i + y3i * w3r;
      }
    }
  }
}

// The transpose of dif4 with conjugate twiddles.
template <class R>
void LaneFft<R>::dit4(R* re, R* im, int64_t lanes, int64_t m, int64_t blocks) const {
  const int64_t q = m / 4, step = n_ / m;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * lanes;
      R* __restrict i0 = im + row * lanes;
      R* __restrict r1 = r0 + q * lanes;
      R* __restrict i1 = i0 + q * lanes;
      R* __restrict r2 = r1 + q * lanes;
      R* __restrict i2 = i1 + q * lanes;
      R* __restrict r3 = r2 + q * lanes;
      R* __restrict i3 = i2 + q * lanes;
      const R w1r = wr_[j * step], w1i = -wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = -wi_[2 * j * step];
      const R w3r = wr_[3 * j * step], w3i = -wi_[3 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < lanes; ++l) {
        const R a0r = r0[l], a0i = i0[l];
        const R a2r = r1[l] * w2r - i1[l] * w2i, a2i = r1[l] * w2i + i1[l] * w2r;
        const R a1r = r2[l] * w1r - i2[l] * w1i, a1i = r2[l] * w1i + i2[l] * w1r;
        const R a3r = r3[l] * w3r - i3[l] * w3i, a3i = r3[l] * w3i + i3[l] * w3r;
        const R u0r = a0r + a2r, u0i = a0i + a2i;
        const R u1r = a0r - a2r, u1i = a0i - a2i;
        const R u2r = a1r + a3r, u2i = a1i + a3i;
        const R u3r = a3i - a1i, u3i = a1r - a3r;  // +i (a1 - a3)
        r0[l] = u0r + u2r; i0[l] = u0i + u2i;
        r1[l] = u1r + u3r; i1[l] = u1i + u3i;
        r2[l] = u0r - u2r; i2[l] = u0i - u2i;
        r3[l] = u1r - u3r; i3[l] = u1i - u3i;
      }
    }
  }
}

// dif4 over the whole transform when rows [n/2, n) are zero: x2 = x3 = 0.
template <class R>
void LaneFft<R>::dif4_upper_zero(R* re, R* im, int64_t lanes) const {
  const int64_t q = n_ / 4;
  for (int64_t j = 0; j < q; ++j) {
    R* __restrict r0 = re + j * lanes;
    R* __restrict i0 = im + j * lanes;
    R* __restrict r1 = r0 + q * lanes;
    R* __restrict i1 = i0 + q * lanes;
    R* __restrict r2 = r1 + q * lanes;
    R* __restrict i2 = i1 + q * lanes;
    R* __restrict r3 = r2 + q * lanes;
    R* __restrict i3 = i2 + q * lanes;
    const R w1r = wr_[j], w1i = wi_[j];
    const R w2r = wr_[2 * j], w2i = wi_[2 * j];
    const R w3r = wr_[3 * j], w3i = wi_[3 * j];
    #pragma GCC ivdep
    for (int64_t l = 0; l < lanes; ++l) {
      const R x0r = r0[l], x0i = i0[l], x1r = r1[l], x1i = i1[l];
      const R y2r = x0r - x1r, y2i = x0i - x1i;
      const R y1r = x0r + x1i, y1i = x0i - x1r;
      const R y3r = x0r - x1i, y3i = x0i + x1r;
      r0[l] = x0r + x1r; i0[l] = x0i + x1i;
      r1[l] = y2r * w2r - y2i * w2i; i1[l] = y2r * w2i + y2i * w2r;
      r2[l] = y1r * w1r - y1i * w1i; i2[l] = y1r * w1i + y1i * w1r;
      r3[l] = y3r * w3r - y3i * w3i; i3[l] = y3r * w3i + y3i * w3r;
    }
  }
}

// dit4 over the whole transform producing only rows [0, n/2).
template <class R>
void LaneFft<R>::dit4_lower_only(R* re, R* im, int64_t lanes) const {
  const int64_t q = n_ / 4;
  for (int64_t j = 0; j < q; ++j) {
    R* __restrict r0 = re + j * lanes;
    R* __restrict i0 = im + j * lanes;
    R* __restrict r1 = r0 + q * lanes;
    R* __restrict i1 = i0 + q * lanes;
    const R* __restrict r2 = r1 + q * lanes;
    const R* __restrict i2 = i1 + q * lanes;
    const R* __restrict r3 = r2 + q * lanes;
    const R* __restrict i3 = i2 + q * lanes;
    const R w1r = wr_[j], w1i = -wi_[j];
    const R w2r = wr_[2 * j], w2i = -wi_[2 * j];
    const R w3r = wr_[3 * j], w3i = -wi_[3 * j];
    #pragma GCC ivdep
    for (int64_t l = 0; l < lanes; ++l) {
      const R a0r = r0[l], a0i = i0[l];
      const R a2r = r1[l] * w2r - i1[l] * w2i, a2i = r1[l] * w2i + i1[l] * w2r;
      const R a1r = r2[l] * w1r - i2[l] * w1i, a1i = r2[l] * w1i + i2[l] * w1r;
      const R a3r = r3[l] * w3r - i3[l] * w3i, a3i = r3[l] * w3i + i3[l] * w3r;
      r0[l] = a0r + a2r + a1r + a3r; i0[l] = a0i + a2i + a1i + a3i;
      r1[l] = a0r - a2r + a3i - a1i; i1[l] = a0i - a2i + a1r - a3r;
    }
  }
}

template <class R>
void LaneFft<R>::forward_block(R* re, R* im, int64_t lanes, int64_t m) const {
  if (m >= 16 && m * lanes * 2 * int64_t(sizeof(R)) > kCacheBytes) {
    dif4(re, im, lanes, m, 1);
    for (int64_t part = 0; part < 4; ++part)
      forward_block(re + part * (m / 4) * lanes, im + part * (m / 4) * lanes, lanes, m / 4);
    return;
  }
  int64_t s = m;
  for (; s >= 4; s /= 4) dif4(re, im, lanes, s, m / s);
  if (s == 2) radix2_unit(re, im, lanes, m / 2);
}

template <class R>
void LaneFft<R>::inverse_block(R* re, R* im, int64_t lanes, int64_t m) const {
  if (m >= 16 && m * lanes * 2 * int64_t(sizeof(R)) > kCacheBytes) {
    for (int64_t part = 0; part < 4; ++part)
      inverse_block(re + part * (m / 4) * lanes, im + part * (m / 4) * lanes, lanes, m / 4);
    dit4(re, im, lanes, m, 1);
    return;
  }
  int64_t s = 1;
  while (s * 4 <= m) s *= 4;  // the largest radix-4 block
  if (s != m) radix2_unit(re, im, lanes, m / 2);
  for (int64_t t = (s == m ? 4 : 8); t <= m; t *= 4) dit4(re, im, lanes, t, m / t);
}

template <class R>
void LaneFft<R>::forward(R* re, R* im, int64_t lanes) const {
  forward_block(re, im, lanes, n_);
}

template <class R>
void LaneFft<R>::inverse(R* re, R* im, int64_t lanes) const {
  inverse_block(re, im, lanes, n_);
}

template <class R>
void LaneFft<R>::forward_padded(R* re, R* im, int64_t lanes) const {
  if (n_ < 4) throw std::invalid_argument("LaneFft::forward_padded: size must be >= 4");
  dif4_upper_zero(re, im, lanes);
  for (int64_t part = 0; part < 4; ++part)
    forward_block(re + part * (n_ / 4) * lanes, im + part * (n_ / 4) * lanes, lanes, n_ / 4);
}

template <class R>
void LaneFft<R>::inverse_truncated(R* re, R* im, int64_t lanes) const {
  if (n_ < 4) throw std::invalid_argument("LaneFft::inverse_truncated: size must be >= 4");
  for (int64_t part = 0; part < 4; ++part)
    inverse_block(re + part * (n_ / 4) * lanes, im + part * (n_ / 4) * lanes, lanes, n_ / 4);
  dit4_lower_only(re, im, lanes);
}

template class LaneFft<float>;
template class LaneFft<double>;

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
