#include "cpu/isa_variant.h"

#include "cpu/fft.h"
#include "cpu/fft_size.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

namespace tmm::cpu::TMM_CPU_CAPABILITY {
namespace {

// Radix-2 pass with unit twiddle on blocks of size 2 (the last DIF pass or
// the first DIT pass of a size with odd log2); its own inverse up to scale.
template <class R>
void radix2_unit(R* re, R* im, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    R* __restrict r0 = re + 2 * b * kLanes;
    R* __restrict i0 = im + 2 * b * kLanes;
    R* __restrict r1 = r0 + kLanes;
    R* __restrict i1 = i0 + kLanes;
    #pragma GCC ivdep
    for (int64_t l = 0; l < kLanes; ++l) {
      const R ar = r0[l], ai = i0[l], br = r1[l], bi = i1[l];
      r0[l] = ar + br; i0[l] = ai + bi;
      r1[l] = ar - br; i1[l] = ai - bi;
    }
  }
}

// The plans LaneFft::shared() keeps, most recently used last.
template <class R>
struct PlanCache {
  static constexpr std::size_t kPlans = 8;
  std::mutex mutex;
  std::vector<std::shared_ptr<const LaneFft<R>>> plans;
};

// Non-template functions with internal linkage: a function-local static of
// a template would be a global symbol of the variant's object, which must
// export only its kernel table (tests/cpp/check_cpu_variants.cmake).
PlanCache<float>& plan_cache(float) {
  static PlanCache<float> cache;
  return cache;
}
PlanCache<double>& plan_cache(double) {
  static PlanCache<double> cache;
  return cache;
}

}  // namespace

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

template <class R>
LaneFft<R>::LaneFft(int64_t n)
    : n_(n), block_bytes_(fft_block_bytes()), wr_(n > 0 ? n : 0), wi_(n > 0 ? n : 0), rev_(n > 0 ? n : 0), freq_(n > 0 ? n : 0) {
  if (n < 1) throw std::invalid_argument("LaneFft: size must be >= 1");
  int64_t rest = n;
  int c2 = 0, c3 = 0, c5 = 0;
  while (rest % 2 == 0) rest /= 2, ++c2;
  while (rest % 3 == 0) rest /= 3, ++c3;
  while (rest % 5 == 0) rest /= 5, ++c5;
  if (rest != 1) throw std::invalid_argument("LaneFft: size must have no prime factor above 5");
  for (; c2 >= 2; c2 -= 2) radix_.push_back(4);
  for (; c5 > 0; --c5) radix_.push_back(5);
  for (; c3 > 0; --c3) radix_.push_back(3);
  if (c2) radix_.push_back(2);
  int64_t m = n;
  for (int r : radix_) {
    block_.push_back(m);
    m /= r;
  }
  for (int64_t j = 0; j < n; ++j) {
    const long double a = -2.0L * 3.14159265358979323846264338327950288L * j / n;
    wr_[j] = R(std::cos(a));
    wi_[j] = R(std::sin(a));
  }
  // Pass s stores the outputs of residue d (of the frequency's digit s,
  // k = d0 + r0 (d1 + r1 (d2 + ...))) in sub-block perm(d) of its block;
  // radix 4 stores residues 0, 2, 1, 3 in quarters 0..3, the others in order
  // (a local array, not a static: a function-local static in this template
  // would be a global symbol of the variant's object, which must export only
  // its kernel table; tests/cpp/check_cpu_variants.cmake).
  const int kPerm4[4] = {0, 2, 1, 3};
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k, row = 0;
    for (std::size_t s = 0; s < radix_.size(); ++s) {
      const int r = radix_[s];
      const int64_t d = rem % r;
      rem /= r;
      row += (r == 4 ? kPerm4[d] : d) * (block_[s] / r);
    }
    rev_[k] = int32_t(row);
    freq_[row] = int32_t(k);
  }
}

template <class R>
std::shared_ptr<const LaneFft<R>> LaneFft<R>::shared(int64_t n) {
  PlanCache<R>& cache = plan_cache(R());
  const int64_t block_bytes = fft_block_bytes();
  auto same = [&](const std::shared_ptr<const LaneFft<R>>& p) {
    return p->n_ == n && p->block_bytes_ == block_bytes;
  };
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = std::find_if(cache.plans.begin(), cache.plans.end(), same);
    if (it != cache.plans.end()) {
      std::rotate(it, it + 1, cache.plans.end());
      return cache.plans.back();
    }
  }
  // Not make_shared: its type tag is a unique global symbol that no variant may define.
  std::shared_ptr<const LaneFft<R>> plan(new LaneFft<R>(n));  // outside the lock: other sizes need not wait
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (std::find_if(cache.plans.begin(), cache.plans.end(), same) == cache.plans.end()) {
    if (cache.plans.size() == PlanCache<R>::kPlans) cache.plans.erase(cache.plans.begin());
    cache.plans.push_back(plan);
  }
  return plan;
}

// One radix-4 DIF pass over `blocks` consecutive blocks of m rows. Outputs
// of residue 0, 2, 1, 3 go to quarters 0..3, so that for a power of two
// radix-4 passes and a final radix-2 pass leave the spectrum in bit-reversed
// order (row_of() holds the order for any size).
template <class R>
void LaneFft<R>::dif4(R* re, R* im, int64_t m, int64_t blocks) const {
  const int64_t q = m / 4, step = n_ / m;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * kLanes;
      R* __restrict i0 = im + row * kLanes;
      R* __restrict r1 = r0 + q * kLanes;
      R* __restrict i1 = i0 + q * kLanes;
      R* __restrict r2 = r1 + q * kLanes;
      R* __restrict i2 = i1 + q * kLanes;
      R* __restrict r3 = r2 + q * kLanes;
      R* __restrict i3 = i2 + q * kLanes;
      const R w1r = wr_[j * step], w1i = wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = wi_[2 * j * step];
      const R w3r = wr_[3 * j * step], w3i = wi_[3 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
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
void LaneFft<R>::dit4(R* re, R* im, int64_t m, int64_t blocks) const {
  const int64_t q = m / 4, step = n_ / m;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * kLanes;
      R* __restrict i0 = im + row * kLanes;
      R* __restrict r1 = r0 + q * kLanes;
      R* __restrict i1 = i0 + q * kLanes;
      R* __restrict r2 = r1 + q * kLanes;
      R* __restrict i2 = i1 + q * kLanes;
      R* __restrict r3 = r2 + q * kLanes;
      R* __restrict i3 = i2 + q * kLanes;
      const R w1r = wr_[j * step], w1i = -wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = -wi_[2 * j * step];
      const R w3r = wr_[3 * j * step], w3i = -wi_[3 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
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

// Radix-3 DIF pass: y_d[j] = w_m^{jd} sum_q x[j + q m/3] exp(-2 pi i qd/3),
// residue d to third d.
template <class R>
void LaneFft<R>::dif3(R* re, R* im, int64_t m, int64_t blocks) const {
  const int64_t q = m / 3, step = n_ / m;
  const R c = R(0.866025403784438646763723170752936183L);  // sin(2 pi/3)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * kLanes;
      R* __restrict i0 = im + row * kLanes;
      R* __restrict r1 = r0 + q * kLanes;
      R* __restrict i1 = i0 + q * kLanes;
      R* __restrict r2 = r1 + q * kLanes;
      R* __restrict i2 = i1 + q * kLanes;
      const R w1r = wr_[j * step], w1i = wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = wi_[2 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
        const R x0r = r0[l], x0i = i0[l];
        const R ar = r1[l] + r2[l], ai = i1[l] + i2[l];
        const R br = c * (r1[l] - r2[l]), bi = c * (i1[l] - i2[l]);
        const R tr = x0r - R(0.5) * ar, ti = x0i - R(0.5) * ai;
        const R y1r = tr + bi, y1i = ti - br;  // t - i c (x1 - x2)
        const R y2r = tr - bi, y2i = ti + br;  // t + i c (x1 - x2)
        r0[l] = x0r + ar; i0[l] = x0i + ai;
        r1[l] = y1r * w1r - y1i * w1i; i1[l] = y1r * w1i + y1i * w1r;
        r2[l] = y2r * w2r - y2i * w2i; i2[l] = y2r * w2i + y2i * w2r;
      }
    }
  }
}

// The transpose of dif3 with conjugate twiddles.
template <class R>
void LaneFft<R>::dit3(R* re, R* im, int64_t m, int64_t blocks) const {
  const int64_t q = m / 3, step = n_ / m;
  const R c = R(0.866025403784438646763723170752936183L);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * kLanes;
      R* __restrict i0 = im + row * kLanes;
      R* __restrict r1 = r0 + q * kLanes;
      R* __restrict i1 = i0 + q * kLanes;
      R* __restrict r2 = r1 + q * kLanes;
      R* __restrict i2 = i1 + q * kLanes;
      const R w1r = wr_[j * step], w1i = -wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = -wi_[2 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
        const R a0r = r0[l], a0i = i0[l];
        const R a1r = r1[l] * w1r - i1[l] * w1i, a1i = r1[l] * w1i + i1[l] * w1r;
        const R a2r = r2[l] * w2r - i2[l] * w2i, a2i = r2[l] * w2i + i2[l] * w2r;
        const R sr = a1r + a2r, si = a1i + a2i;
        const R dr = c * (a1r - a2r), di = c * (a1i - a2i);
        const R tr = a0r - R(0.5) * sr, ti = a0i - R(0.5) * si;
        r0[l] = a0r + sr; i0[l] = a0i + si;
        r1[l] = tr - di; i1[l] = ti + dr;  // t + i c (a1 - a2)
        r2[l] = tr + di; i2[l] = ti - dr;  // t - i c (a1 - a2)
      }
    }
  }
}

// Radix-5 DIF pass, residue d to fifth d.
template <class R>
void LaneFft<R>::dif5(R* re, R* im, int64_t m, int64_t blocks) const {
  const int64_t q = m / 5, step = n_ / m;
  const R c1 = R(0.309016994374947424102293417182819059L);   // cos(2 pi/5)
  const R c2 = R(-0.809016994374947424102293417182819059L);  // cos(4 pi/5)
  const R s1 = R(0.951056516295153572116439333379382143L);   // sin(2 pi/5)
  const R s2 = R(0.587785252292473129168705954639072769L);   // sin(4 pi/5)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * kLanes;
      R* __restrict i0 = im + row * kLanes;
      R* __restrict r1 = r0 + q * kLanes;
      R* __restrict i1 = i0 + q * kLanes;
      R* __restrict r2 = r1 + q * kLanes;
      R* __restrict i2 = i1 + q * kLanes;
      R* __restrict r3 = r2 + q * kLanes;
      R* __restrict i3 = i2 + q * kLanes;
      R* __restrict r4 = r3 + q * kLanes;
      R* __restrict i4 = i3 + q * kLanes;
      const R w1r = wr_[j * step], w1i = wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = wi_[2 * j * step];
      const R w3r = wr_[3 * j * step], w3i = wi_[3 * j * step];
      const R w4r = wr_[4 * j * step], w4i = wi_[4 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
        const R x0r = r0[l], x0i = i0[l];
        const R a1r = r1[l] + r4[l], a1i = i1[l] + i4[l];
        const R b1r = r1[l] - r4[l], b1i = i1[l] - i4[l];
        const R a2r = r2[l] + r3[l], a2i = i2[l] + i3[l];
        const R b2r = r2[l] - r3[l], b2i = i2[l] - i3[l];
        const R t1r = x0r + c1 * a1r + c2 * a2r, t1i = x0i + c1 * a1i + c2 * a2i;
        const R t2r = x0r + c2 * a1r + c1 * a2r, t2i = x0i + c2 * a1i + c1 * a2i;
        const R u1r = s1 * b1r + s2 * b2r, u1i = s1 * b1i + s2 * b2i;
        const R u2r = s2 * b1r - s1 * b2r, u2i = s2 * b1i - s1 * b2i;
        const R y1r = t1r + u1i, y1i = t1i - u1r;  // t1 - i u1
        const R y4r = t1r - u1i, y4i = t1i + u1r;  // t1 + i u1
        const R y2r = t2r + u2i, y2i = t2i - u2r;  // t2 - i u2
        const R y3r = t2r - u2i, y3i = t2i + u2r;  // t2 + i u2
        r0[l] = x0r + a1r + a2r; i0[l] = x0i + a1i + a2i;
        r1[l] = y1r * w1r - y1i * w1i; i1[l] = y1r * w1i + y1i * w1r;
        r2[l] = y2r * w2r - y2i * w2i; i2[l] = y2r * w2i + y2i * w2r;
        r3[l] = y3r * w3r - y3i * w3i; i3[l] = y3r * w3i + y3i * w3r;
        r4[l] = y4r * w4r - y4i * w4i; i4[l] = y4r * w4i + y4i * w4r;
      }
    }
  }
}

// The transpose of dif5 with conjugate twiddles.
template <class R>
void LaneFft<R>::dit5(R* re, R* im, int64_t m, int64_t blocks) const {
  const int64_t q = m / 5, step = n_ / m;
  const R c1 = R(0.309016994374947424102293417182819059L);
  const R c2 = R(-0.809016994374947424102293417182819059L);
  const R s1 = R(0.951056516295153572116439333379382143L);
  const R s2 = R(0.587785252292473129168705954639072769L);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < q; ++j) {
      const int64_t row = b * m + j;
      R* __restrict r0 = re + row * kLanes;
      R* __restrict i0 = im + row * kLanes;
      R* __restrict r1 = r0 + q * kLanes;
      R* __restrict i1 = i0 + q * kLanes;
      R* __restrict r2 = r1 + q * kLanes;
      R* __restrict i2 = i1 + q * kLanes;
      R* __restrict r3 = r2 + q * kLanes;
      R* __restrict i3 = i2 + q * kLanes;
      R* __restrict r4 = r3 + q * kLanes;
      R* __restrict i4 = i3 + q * kLanes;
      const R w1r = wr_[j * step], w1i = -wi_[j * step];
      const R w2r = wr_[2 * j * step], w2i = -wi_[2 * j * step];
      const R w3r = wr_[3 * j * step], w3i = -wi_[3 * j * step];
      const R w4r = wr_[4 * j * step], w4i = -wi_[4 * j * step];
      #pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
        const R x0r = r0[l], x0i = i0[l];
        const R x1r = r1[l] * w1r - i1[l] * w1i, x1i = r1[l] * w1i + i1[l] * w1r;
        const R x2r = r2[l] * w2r - i2[l] * w2i, x2i = r2[l] * w2i + i2[l] * w2r;
        const R x3r = r3[l] * w3r - i3[l] * w3i, x3i = r3[l] * w3i + i3[l] * w3r;
        const R x4r = r4[l] * w4r - i4[l] * w4i, x4i = r4[l] * w4i + i4[l] * w4r;
        const R a1r = x1r + x4r, a1i = x1i + x4i;
        const R b1r = x1r - x4r, b1i = x1i - x4i;
        const R a2r = x2r + x3r, a2i = x2i + x3i;
        const R b2r = x2r - x3r, b2i = x2i - x3i;
        const R t1r = x0r + c1 * a1r + c2 * a2r, t1i = x0i + c1 * a1i + c2 * a2i;
        const R t2r = x0r + c2 * a1r + c1 * a2r, t2i = x0i + c2 * a1i + c1 * a2i;
        const R u1r = s1 * b1r + s2 * b2r, u1i = s1 * b1i + s2 * b2i;
        const R u2r = s2 * b1r - s1 * b2r, u2i = s2 * b1i - s1 * b2i;
        r0[l] = x0r + a1r + a2r; i0[l] = x0i + a1i + a2i;
        r1[l] = t1r - u1i; i1[l] = t1i + u1r;  // t1 + i u1
        r4[l] = t1r + u1i; i4[l] = t1i - u1r;  // t1 - i u1
        r2[l] = t2r - u2i; i2[l] = t2i + u2r;  // t2 + i u2
        r3[l] = t2r + u2i; i3[l] = t2i - u2r;  // t2 - i u2
      }
    }
  }
}

// dif4 over the whole transform when rows [n/2, n) are zero: x2 = x3 = 0.
template <class R>
void LaneFft<R>::dif4_upper_zero(R* re, R* im) const {
  const int64_t q = n_ / 4;
  for (int64_t j = 0; j < q; ++j) {
    R* __restrict r0 = re + j * kLanes;
    R* __restrict i0 = im + j * kLanes;
    R* __restrict r1 = r0 + q * kLanes;
    R* __restrict i1 = i0 + q * kLanes;
    R* __restrict r2 = r1 + q * kLanes;
    R* __restrict i2 = i1 + q * kLanes;
    R* __restrict r3 = r2 + q * kLanes;
    R* __restrict i3 = i2 + q * kLanes;
    const R w1r = wr_[j], w1i = wi_[j];
    const R w2r = wr_[2 * j], w2i = wi_[2 * j];
    const R w3r = wr_[3 * j], w3i = wi_[3 * j];
    #pragma GCC ivdep
    for (int64_t l = 0; l < kLanes; ++l) {
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
void LaneFft<R>::dit4_lower_only(R* re, R* im) const {
  const int64_t q = n_ / 4;
  for (int64_t j = 0; j < q; ++j) {
    R* __restrict r0 = re + j * kLanes;
    R* __restrict i0 = im + j * kLanes;
    R* __restrict r1 = r0 + q * kLanes;
    R* __restrict i1 = i0 + q * kLanes;
    const R* __restrict r2 = r1 + q * kLanes;
    const R* __restrict i2 = i1 + q * kLanes;
    const R* __restrict r3 = r2 + q * kLanes;
    const R* __restrict i3 = i2 + q * kLanes;
    const R w1r = wr_[j], w1i = -wi_[j];
    const R w2r = wr_[2 * j], w2i = -wi_[2 * j];
    const R w3r = wr_[3 * j], w3i = -wi_[3 * j];
    #pragma GCC ivdep
    for (int64_t l = 0; l < kLanes; ++l) {
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
void LaneFft<R>::dif_pass(int s, R* re, R* im, int64_t blocks) const {
  switch (radix_[s]) {
    case 4: return dif4(re, im, block_[s], blocks);
    case 5: return dif5(re, im, block_[s], blocks);
    case 3: return dif3(re, im, block_[s], blocks);
    default: return radix2_unit(re, im, blocks);  // the last pass, blocks of 2
  }
}

template <class R>
void LaneFft<R>::dit_pass(int s, R* re, R* im, int64_t blocks) const {
  switch (radix_[s]) {
    case 4: return dit4(re, im, block_[s], blocks);
    case 5: return dit5(re, im, block_[s], blocks);
    case 3: return dit3(re, im, block_[s], blocks);
    default: return radix2_unit(re, im, blocks);
  }
}

// Passes [stage, end) on one block of block_[stage] rows: depth first (one
// pass, then each sub-block) while the block is larger than the cache and
// more than one pass is left, breadth first below.
template <class R>
void LaneFft<R>::forward_block(R* re, R* im, int stage) const {
  const int passes = int(radix_.size());
  if (stage >= passes) return;
  const int64_t m = block_[stage];
  if (stage + 1 < passes && m * kLanes * 2 * int64_t(sizeof(R)) > block_bytes_) {
    dif_pass(stage, re, im, 1);
    const int64_t sub = m / radix_[stage];
    for (int64_t part = 0; part < radix_[stage]; ++part)
      forward_block(re + part * sub * kLanes, im + part * sub * kLanes, stage + 1);
    return;
  }
  for (int s = stage; s < passes; ++s) dif_pass(s, re, im, m / block_[s]);
}

template <class R>
void LaneFft<R>::inverse_block(R* re, R* im, int stage) const {
  const int passes = int(radix_.size());
  if (stage >= passes) return;
  const int64_t m = block_[stage];
  if (stage + 1 < passes && m * kLanes * 2 * int64_t(sizeof(R)) > block_bytes_) {
    const int64_t sub = m / radix_[stage];
    for (int64_t part = 0; part < radix_[stage]; ++part)
      inverse_block(re + part * sub * kLanes, im + part * sub * kLanes, stage + 1);
    dit_pass(stage, re, im, 1);
    return;
  }
  for (int s = passes - 1; s >= stage; --s) dit_pass(s, re, im, m / block_[s]);
}

template <class R>
void LaneFft<R>::forward(R* re, R* im) const {
  forward_block(re, im, 0);
}

template <class R>
void LaneFft<R>::inverse(R* re, R* im) const {
  inverse_block(re, im, 0);
}

template <class R>
void LaneFft<R>::forward_padded(R* re, R* im) const {
  if (n_ % 4) throw std::invalid_argument("LaneFft::forward_padded: 4 must divide the size");
  dif4_upper_zero(re, im);
  for (int64_t part = 0; part < 4; ++part)
    forward_block(re + part * (n_ / 4) * kLanes, im + part * (n_ / 4) * kLanes, 1);
}

template <class R>
void LaneFft<R>::inverse_truncated(R* re, R* im) const {
  if (n_ % 4) throw std::invalid_argument("LaneFft::inverse_truncated: 4 must divide the size");
  for (int64_t part = 0; part < 4; ++part)
    inverse_block(re + part * (n_ / 4) * kLanes, im + part * (n_ / 4) * kLanes, 1);
  dit4_lower_only(re, im);
}

// Passes [stage, end) forward, the product, the same passes back, on one
// block of rows starting at row0; depth first like forward_block.
template <class R>
void LaneFft<R>::convolve_block(R* re, R* im, int stage, int64_t row0, RowProduct product,
                                void* ctx) const {
  const int passes = int(radix_.size());
  const int64_t m = stage < passes ? block_[stage] : 1;
  if (stage + 1 < passes && m * kLanes * 2 * int64_t(sizeof(R)) > block_bytes_) {
    dif_pass(stage, re, im, 1);
    const int64_t sub = m / radix_[stage];
    for (int64_t part = 0; part < radix_[stage]; ++part)
      convolve_block(re + part * sub * kLanes, im + part * sub * kLanes, stage + 1, row0 + part * sub, product,
                     ctx);
    dit_pass(stage, re, im, 1);
    return;
  }
  for (int s = stage; s < passes; ++s) dif_pass(s, re, im, m / block_[s]);
  product(ctx, row0, row0 + m);
  for (int s = passes - 1; s >= stage; --s) dit_pass(s, re, im, m / block_[s]);
}

template <class R>
void LaneFft<R>::convolve_padded(R* re, R* im, RowProduct product, void* ctx) const {
  if (n_ % 4) throw std::invalid_argument("LaneFft::convolve_padded: 4 must divide the size");
  dif4_upper_zero(re, im);
  const int64_t q = n_ / 4;
  for (int64_t part = 0; part < 4; ++part)
    convolve_block(re + part * q * kLanes, im + part * q * kLanes, 1, part * q, product, ctx);
  dit4_lower_only(re, im);
}

template class LaneFft<float>;
template class LaneFft<double>;

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
