// FFT path of the CPU causal-Toeplitz kernels: the tile machinery shared by
// the forward (toeplitz_fft_forward.cpp) and the backward
// (toeplitz_fft_backward.cpp).
//
// A causal convolution of length L equals a circular one of size
// n >= 2L-1 on zero-padded inputs; n is the cheapest multiple of 4 with no
// prime factor above 5 (fft_size.h). A tile of 2P = 32
// adjacent channels is packed into P complex lanes (column j as the real
// part, column P+j as the imaginary part), so one complex FFT transforms two
// real channels. The pair of frequencies (k, n-k) separates the two real
// spectra:
//   X_a[k] = (Z[k] + conj Z[n-k]) / 2,   X_b[k] = (Z[k] - conj Z[n-k]) / 2i
// and Y_a + i Y_b recombines two real outputs into one inverse transform.
// Per tile: load + transform, product with the group's spectra, inverse
// transform, bias, store; nothing of size B x n x C is ever materialised.
//
// Forward:      Y_c  = sum_i W_{g,i} X_{c-(K-1)+i}
// grad_x:       GX_c = sum_i conj(W_{g,i}) GY_{c+(K-1)-i}       (same group)
// grad_weight:  GW_{g,i} = sum_{b, c in g} GY_c conj(X_{c-(K-1)+i}),
//               reduced in the frequency domain, then one inverse per (g,i).
//
// A tile whose outputs share one spectrum (K = 1, one group) skips the
// separation: Y = W Z works on the packed lanes directly.
#pragma once

#include "cpu/isa_variant.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cpu/channel_tiles.h"
#include "cpu/fft.h"
#include "cpu/fft_size.h"
#include "cpu/toeplitz_cpu.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {

constexpr int64_t kCols = 2 * kLanes;  // channels per tile (kLanes: fft.h)
static_assert(kCols > 2 * (kMaxTileTaps - 1), "tiles must keep most columns for outputs");

// Circular size for a causal convolution of length L: n >= 2L - 1 and even,
// so the zero padding fills at least the upper half (forward_padded's
// contract).
inline int64_t conv_size(int64_t L) { return causal_fft_size(L); }

// Visits the frequency pairs (k, n-k) for k in [0, n/2] as buffer rows.
template <class R, class F>
void for_each_pair(const LaneFft<R>& fft, F&& f) {
  const int64_t n = fft.size();
  for (int64_t k = 0; k <= n / 2; ++k) f(k, fft.row_of(k), fft.row_of(k == 0 ? 0 : n - k));
}

// fft.convolve_padded on a tile's buffer with a callable product(lo, hi)
// over row ranges.
template <class R, class Buffer, class F>
void convolve_padded(const LaneFft<R>& fft, Buffer& buf, F& product) {
  fft.convolve_padded(buf.re.data(), buf.im.data(),
                      [](void* f, int64_t lo, int64_t hi) { (*static_cast<F*>(f))(lo, hi); }, &product);
}

constexpr int64_t kPrefetchSteps = 32;  // time steps a tile's load runs ahead (16 and 64: the same)

// Prefetches the cache lines of p[0, count) into all cache levels.
template <class T>
inline void prefetch_range(const T* p, int64_t count) {
  const char* first = reinterpret_cast<const char*>(p);
  const char* last = reinterpret_cast<const char*>(p + count) - 1;
  for (const char* line = first; line <= last; line += 64) __builtin_prefetch(line);
  __builtin_prefetch(last);
}

// Allocates a tile buffer on 2 MiB boundaries and asks Linux for huge pages
// there: a long transform's passes stride over megabytes, one 4 KiB page
// (and TLB entry) per few rows otherwise.
template <class R>
struct HugePageAllocator {
  using value_type = R;
  static constexpr std::size_t kHuge = std::size_t(2) << 20;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  R* allocate(std::size_t count) {
    const std::size_t bytes = count * sizeof(R);
    if (bytes < kHuge) return static_cast<R*>(::operator new(bytes));
    void* p = nullptr;
    if (posix_memalign(&p, kHuge, bytes)) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
    return static_cast<R*>(p);
  }
  void deallocate(R* p, std::size_t count) {
    if (count * sizeof(R) < kHuge) ::operator delete(p);
    else std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

// A tile's transform buffer: n rows of kLanes complex values.
template <class R>
struct TileBuffer {
  int64_t n;
  std::vector<R, HugePageAllocator<R>> re, im;
  explicit TileBuffer(int64_t n_) : n(n_), re(n_ * kLanes), im(n_ * kLanes) {}

  // Loads kCols columns of src[b] from channel c0 on (the re half from c0,
  // the im half from c0 + kLanes), one time step at a time with both halves
  // together, prefetching kPrefetchSteps steps ahead: in B x L x C the steps
  // are C values apart, each a new cache line (a new page every few), which
  // the hardware prefetchers do not follow. Rows [L, n) are zero (those past
  // n/2 implicitly, see LaneFft::forward_padded).
  template <class T>
  void load(const T* src, const int64_t* stride, int64_t b, const ToeplitzShape& s, int64_t c0) {
    const int64_t lo = std::max<int64_t>(0, -c0), hi = std::min(kCols, s.C - c0);
    const T* first = src + b * stride[0] + c0 * stride[2];
    const bool dense = lo == 0 && hi == kCols && stride[2] == 1;
    for (int64_t t = 0; t < s.L; ++t) {
      const T* in = first + t * stride[1];
      if (stride[2] == 1 && t + kPrefetchSteps < s.L) prefetch_range(in + kPrefetchSteps * stride[1] + lo, hi - lo);
      R* __restrict r = re.data() + t * kLanes;
      R* __restrict i = im.data() + t * kLanes;
      if (dense) {
        if constexpr (std::is_same_v<T, R>) {  // whole vectors (the loop below compiles to scalar moves)
          std::memcpy(r, in, kLanes * sizeof(R));
          std::memcpy(i, in + kLanes, kLanes * sizeof(R));
        } else {
#pragma GCC ivdep
          for (int64_t m = 0; m < kLanes; ++m) {
            r[m] = R(kernels::to_float(in[m]));
            i[m] = R(kernels::to_float(in[kLanes + m]));
          }
        }
        continue;
      }
      for (int64_t m = 0; m < kCols; ++m) {
        const R v = m >= lo && m < hi ? R(kernels::to_float(in[m * stride[2]])) : R(0);
        (m < kLanes ? r[m] : i[m - kLanes]) = v;
      }
    }
    std::fill(re.begin() + s.L * kLanes, re.begin() + n / 2 * kLanes, R(0));
    std::fill(im.begin() + s.L * kLanes, im.begin() + n / 2 * kLanes, R(0));
  }

  // The spectra of the kCols real columns at frequency k (rows p, q) as
  // split arrays xr[m], xi[m].
  void separate(int64_t p, int64_t q, R* __restrict xr, R* __restrict xi) const {
    const R* __restrict zpr = re.data() + p * kLanes;
    const R* __restrict zpi = im.data() + p * kLanes;
    const R* __restrict zqr = re.data() + q * kLanes;
    const R* __restrict zqi = im.data() + q * kLanes;
#pragma GCC ivdep
    for (int64_t j = 0; j < kLanes; ++j) {
      xr[j] = R(0.5) * (zpr[j] + zqr[j]);
      xi[j] = R(0.5) * (zpi[j] - zqi[j]);
      xr[j + kLanes] = R(0.5) * (zpi[j] + zqi[j]);
      xi[j + kLanes] = R(0.5) * (zqr[j] - zpr[j]);
    }
  }

  // Writes the spectra yr[m], yi[m] of kCols real columns at rows p, q.
  void recombine(int64_t p, int64_t q, const R* __restrict yr, const R* __restrict yi) {
    R* __restrict zpr = re.data() + p * kLanes;
    R* __restrict zpi = im.data() + p * kLanes;
    R* __restrict zqr = re.data() + q * kLanes;
    R* __restrict zqi = im.data() + q * kLanes;
    if (p == q) {  // k = 0 or n/2: the spectrum of a real signal is real there
#pragma GCC ivdep
      for (int64_t j = 0; j < kLanes; ++j) {
        zpr[j] = yr[j];
        zpi[j] = yr[j + kLanes];
      }
      return;
    }
#pragma GCC ivdep
    for (int64_t j = 0; j < kLanes; ++j) {
      const R ar = yr[j], ai = yi[j], br = yr[j + kLanes], bi = yi[j + kLanes];
      zpr[j] = ar - bi;
      zpi[j] = ai + br;
      zqr[j] = ar + bi;
      zqi[j] = br - ai;
    }
  }
};

// Spectra of the weight rows, k in [0, n/2]: re/im[(i*half + k)*G + g].
template <class R>
struct WeightSpectra {
  int64_t half = 0, G = 0;
  std::vector<R> re, im;
  const R* re_at(int64_t i, int64_t k) const { return re.data() + (i * half + k) * G; }
  const R* im_at(int64_t i, int64_t k) const { return im.data() + (i * half + k) * G; }

  // Group g's spectrum of tap 0 times `scale` in the row that holds
  // frequency k of an n-point transform: W[k] up to n/2, conj W[n-k] above
  // (the weight is real), with no imaginary part at 0 and n/2.
  void at_frequency(int64_t k, int64_t n, int64_t g, R scale, R& wr, R& wi) const {
    const bool upper = 2 * k > n;
    const int64_t f = upper ? n - k : k;
    wr = re_at(0, f)[g] * scale;
    wi = f == 0 || 2 * f == n ? R(0) : im_at(0, f)[g] * scale;
    if (upper) wi = -wi;
  }
};

template <class T, class R>
WeightSpectra<R> weight_spectra(const T* w, const int64_t* ws, const ToeplitzShape& s,
                                const LaneFft<R>& fft, const ParallelFor& pf) {
  const int64_t n = fft.size(), rows = s.G * s.K;
  WeightSpectra<R> out;
  out.half = n / 2 + 1;
  out.G = s.G;
  // kCols of padding: per-channel tiles read whole rows of kCols entries,
  // past the last group for the last tile (its columns there hold zeros).
  out.re.resize(out.half * rows + kCols);
  out.im.resize(out.half * rows + kCols);
  pf((rows + kCols - 1) / kCols, [&](int64_t begin, int64_t end) {
    TileBuffer<R> buf(n);
    R xr[kCols], xi[kCols];
    for (int64_t bt = begin; bt < end; ++bt) {
      std::fill(buf.re.begin(), buf.re.begin() + n / 2 * kLanes, R(0));
      std::fill(buf.im.begin(), buf.im.begin() + n / 2 * kLanes, R(0));
      const int64_t cols = std::min(kCols, rows - bt * kCols);
      for (int64_t m = 0; m < cols; ++m) {
        const int64_t r = bt * kCols + m;
        const T* row = w + (r / s.K) * ws[0] + (r % s.K) * ws[1];
        R* dst = m < kLanes ? buf.re.data() + m : buf.im.data() + m - kLanes;
        for (int64_t t = 0; t < s.L; ++t) dst[t * kLanes] = R(kernels::to_float(row[t * ws[2]]));
      }
      fft.forward_padded(buf.re.data(), buf.im.data());
      for_each_pair(fft, [&](int64_t k, int64_t p, int64_t q) {
        buf.separate(p, q, xr, xi);
        for (int64_t m = 0; m < cols; ++m) {
          const int64_t r = bt * kCols + m, g = r / s.K, i = r % s.K;
          out.re[(i * out.half + k) * s.G + g] = xr[m];
          out.im[(i * out.half + k) * s.G + g] = xi[m];
        }
      });
    }
  });
  return out;
}

// The spectra of the groups that own a uniform tile (one spectrum for all
// its outputs), laid out in the transform's row order: tap 0, times `scale`,
// conjugated for grad_x. The product between the transforms then streams
// them beside the rows (convolve_padded) instead of looking W[k] up at
// scattered frequencies, and vectorises over lanes.
template <class R>
struct RowSpectra {
  int64_t n = 0;
  std::vector<int64_t> slot;  // per group; -1 where no tile is uniform over it
  std::vector<R> re, im;      // [slot][row]
  const R* re_of(int64_t g) const { return re.data() + slot[g] * n; }
  const R* im_of(int64_t g) const { return im.data() + slot[g] * n; }
};

template <class R>
RowSpectra<R> row_spectra(const WeightSpectra<R>& W, const LaneFft<R>& fft, const ToeplitzShape& s,
                          const ChannelTiles& tiles, R scale, bool conj) {
  RowSpectra<R> out;
  out.n = fft.size();
  out.slot.assign(s.G, -1);
  int64_t used = 0;
  for (int64_t t = 0; t < tiles.count; ++t) {
    const TileColumns cols(s, tiles, t);
    if (cols.group_hi >= 0 && cols.uniform(s.K) && out.slot[cols.group_lo] < 0) out.slot[cols.group_lo] = used++;
  }
  out.re.resize(used * out.n);
  out.im.resize(used * out.n);
  for (int64_t g = 0; g < s.G; ++g) {
    if (out.slot[g] < 0) continue;
    R* re = out.re.data() + out.slot[g] * out.n;
    R* im = out.im.data() + out.slot[g] * out.n;
    for (int64_t row = 0; row < out.n; ++row) {
      W.at_frequency(fft.freq_of(row), out.n, g, scale, re[row], im[row]);
      if (conj) im[row] = -im[row];
    }
  }
  return out;
}

// A tile row as one value (GCC's and Clang's vector extension: one AVX-512
// register of floats, split in halves or quarters on narrower ISAs).
template <class R>
struct RowOf;
template <>
struct RowOf<float> {
  typedef float type __attribute__((vector_size(kLanes * sizeof(float))));
};
template <>
struct RowOf<double> {
  typedef double type __attribute__((vector_size(kLanes * sizeof(double))));
};
template <class R>
using RowVec = typename RowOf<R>::type;

// The sum of a row's kLanes values, pairwise (halves, then their halves,
// ...): one order of additions on every instruction set.
template <class R>
inline R lane_sum(const RowVec<R>& v) {
  R part[kLanes];
  std::memcpy(part, &v, sizeof part);
  for (int64_t width = kLanes / 2; width >= 1; width /= 2)
    for (int64_t j = 0; j < width; ++j) part[j] += part[j + width];
  return part[0];
}

// y = w z in rows [lo, hi), w a row spectrum (RowSpectra), z and y a tile's
// rows (y may be z). On whole-row values: as an element loop GCC compiled
// it to scalar code behind a check that y does not overlap z.
template <class R>
void multiply_rows(const R* __restrict wr, const R* __restrict wi, const TileBuffer<R>& z, TileBuffer<R>& y,
                   int64_t lo, int64_t hi) {
  for (int64_t row = lo; row < hi; ++row) {
    const R a = wr[row], b = wi[row];
    RowVec<R> cr, ci;
    std::memcpy(&cr, z.re.data() + row * kLanes, sizeof cr);
    std::memcpy(&ci, z.im.data() + row * kLanes, sizeof ci);
    const RowVec<R> yr = cr * a - ci * b, yi = cr * b + ci * a;
    std::memcpy(y.re.data() + row * kLanes, &yr, sizeof yr);
    std::memcpy(y.im.data() + row * kLanes, &yi, sizeof yi);
  }
}

// Per-tile coefficients that make the general product branch-free.
template <class R>
struct TileCoefs {
  int64_t group_index[kCols];  // the column's group (0 where it has no channel)
  R tap_mask[kMaxTileTaps][kCols];     // [i][m]: output column m uses tap i
  R grad_x_mask[kMaxTileTaps][kCols];  // [i][m]: column m receives tap i from output column m+halo-i

  // One channel per group (Hyena's filters, K = 1): column m's spectrum is
  // row entry first(t) + m, read contiguously by per_channel_product.
  bool per_channel;

  TileCoefs(const ToeplitzShape& s, const ChannelTiles& tiles, const TileColumns& cols)
      : per_channel(s.group_channels() == 1) {
    for (int64_t m = 0; m < kCols; ++m) group_index[m] = std::max<int64_t>(0, cols.group[m]);
    for (int64_t i = 0; i < s.K; ++i) {
      for (int64_t m = 0; m < kCols; ++m) {
        const int64_t out = m + tiles.halo - i;
        tap_mask[i][m] = R(m >= tiles.halo && cols.group[m] >= 0 && i >= cols.first_tap[m]);
        grad_x_mask[i][m] = R(m < tiles.step && cols.group[m] >= 0 && out < kCols && cols.group[out] == cols.group[m]);
      }
    }
  }
};

// y[m] += mask[m] * W * x[m + shift] for m in [m_lo, m_hi), where W is the
// spectrum of tap i of column m's group at frequency k (conjugated for
// kConj), all in split complex.
template <bool kConj, class R>
void multiply_accumulate(const WeightSpectra<R>& W, const TileCoefs<R>& coef, int64_t i, int64_t k,
                         const R* __restrict mask, int64_t m_lo, int64_t m_hi, int64_t shift,
                         const R* __restrict xr, const R* __restrict xi, R* __restrict yr, R* __restrict yi) {
  const R sign = kConj ? R(-1) : R(1);
  const R* __restrict wr = W.re_at(i, k);
  const R* __restrict wi = W.im_at(i, k);
#pragma GCC ivdep
  for (int64_t m = m_lo; m < m_hi; ++m) {
    const R gr = wr[coef.group_index[m]] * mask[m], gi = sign * wi[coef.group_index[m]] * mask[m];
    yr[m] += gr * xr[m + shift] - gi * xi[m + shift];
    yi[m] += gr * xi[m + shift] + gi * xr[m + shift];
  }
}

// Packed product for one-channel-per-group tiles (K = 1): lane j carries
// channels j and j+16 with spectra Wa and Wb. With S = (Wa+Wb)/2 and
// D = (Wa-Wb)/2 the product of both separated channels, recombined, is
//   Zy[k] = S Z[k] + D conj Z[n-k],   Zy[n-k] = conj(S) Z[n-k] + conj(D) conj Z[k],
// so the separation is folded into the multiply. kConj uses conj(W) (grad_x).
// Reads z (rows p, q of `in`) and writes rows p, q of `out` (may be `in`).
template <bool kConj, class R>
void per_channel_product(const R* __restrict war, const R* __restrict wai, R scale, int64_t p, int64_t q,
                         const TileBuffer<R>& in, TileBuffer<R>& out) {
  const R sign = kConj ? R(-1) : R(1);
  const R* zpr = in.re.data() + p * kLanes;
  const R* zpi = in.im.data() + p * kLanes;
  const R* zqr = in.re.data() + q * kLanes;
  const R* zqi = in.im.data() + q * kLanes;
  R* ypr = out.re.data() + p * kLanes;
  R* ypi = out.im.data() + p * kLanes;
  R* yqr = out.re.data() + q * kLanes;
  R* yqi = out.im.data() + q * kLanes;
  if (p == q) {  // k = 0 or n/2: real spectra, Zy = Wa Re Z + i Wb Im Z
#pragma GCC ivdep
    for (int64_t j = 0; j < kLanes; ++j) {
      const R zr = zpr[j], zi = zpi[j];
      ypr[j] = war[j] * scale * zr;
      ypi[j] = war[j + kLanes] * scale * zi;
    }
    return;
  }
#pragma GCC ivdep
  for (int64_t j = 0; j < kLanes; ++j) {
    const R sr = R(0.5) * scale * (war[j] + war[j + kLanes]);
    const R si = R(0.5) * scale * sign * (wai[j] + wai[j + kLanes]);
    const R dr = R(0.5) * scale * (war[j] - war[j + kLanes]);
    const R di = R(0.5) * scale * sign * (wai[j] - wai[j + kLanes]);
    const R ar = zpr[j], ai = zpi[j], br = zqr[j], bi = zqi[j];
    ypr[j] = sr * ar - si * ai + dr * br + di * bi;  // S a + D conj(b)
    ypi[j] = sr * ai + si * ar + di * br - dr * bi;
    yqr[j] = sr * br + si * bi + dr * ar - di * ai;  // conj(S) b + conj(D) conj(a)
    yqi[j] = sr * bi - si * br - di * ar - dr * ai;
  }
}

// Writes the 64 bytes at src to dst (both 64-byte aligned) with a
// non-temporal store: no read of the line before the write, and the line
// does not displace the tile's buffers from the caches.
inline void stream_line(void* dst, const void* src) {
#if defined(__AVX512F__)
  _mm512_stream_si512(static_cast<__m512i*>(dst), _mm512_load_si512(src));
#elif defined(__AVX__)
  for (int k = 0; k < 2; ++k)
    _mm256_stream_si256(static_cast<__m256i*>(dst) + k, _mm256_load_si256(static_cast<const __m256i*>(src) + k));
#elif defined(__SSE2__)
  for (int k = 0; k < 4; ++k)
    _mm_stream_si128(static_cast<__m128i*>(dst) + k, _mm_load_si128(static_cast<const __m128i*>(src) + k));
#else
  std::memcpy(dst, src, 64);
#endif
}

// Writes columns [m_lo, m_hi) of the transformed tile (rows t < L) to
// out[b, t, c0 + m] of a contiguous B x L x C tensor, row by row, adding
// bias_at(m, t). When the output exceeds the last-level cache, whole rows
// of whole cache lines are streamed (stream_line): the tile writes one row
// per time step, C values from the next, and nothing of it would stay cached.
template <class T, class R, class Bias>
void store_columns(T* out, const ToeplitzShape& s, int64_t b, int64_t c0, int64_t m_lo, int64_t m_hi,
                   const TileBuffer<R>& buf, Bias&& bias_at) {
  constexpr int64_t kRowBytes = kCols * int64_t(sizeof(T));
  const bool stream = kRowBytes % 64 == 0 && m_lo == 0 && m_hi == kCols && s.C * int64_t(sizeof(T)) % 64 == 0 &&
                      s.B * s.L * s.C * int64_t(sizeof(T)) > last_level_cache_bytes() &&
                      reinterpret_cast<std::uintptr_t>(out + b * s.L * s.C + c0) % 64 == 0;
  for (int64_t t = 0; t < s.L; ++t) {
    T* row = out + (b * s.L + t) * s.C + c0;
    const R* re = buf.re.data() + t * kLanes;
    const R* im = buf.im.data() + t * kLanes;
    if (stream) {
      alignas(64) T line[kCols];
#pragma GCC ivdep
      for (int64_t m = 0; m < kLanes; ++m) line[m] = store_as<T>(re[m] + bias_at(m, t));
#pragma GCC ivdep
      for (int64_t m = kLanes; m < kCols; ++m) line[m] = store_as<T>(im[m - kLanes] + bias_at(m, t));
      for (int64_t at = 0; at < kRowBytes; at += 64)
        stream_line(reinterpret_cast<char*>(row) + at, reinterpret_cast<const char*>(line) + at);
      continue;
    }
    const int64_t re_hi = std::min(m_hi, kLanes), im_lo = std::max(m_lo, kLanes);
#pragma GCC ivdep
    for (int64_t m = m_lo; m < re_hi; ++m) row[m] = store_as<T>(re[m] + bias_at(m, t));
#pragma GCC ivdep
    for (int64_t m = im_lo; m < m_hi; ++m) row[m] = store_as<T>(im[m - kLanes] + bias_at(m, t));
  }
#if defined(__SSE2__)
  if (stream) _mm_sfence();  // the streamed lines are visible before the caller's join
#endif
}

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
