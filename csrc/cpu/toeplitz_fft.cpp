// FFT path of the CPU causal-Toeplitz kernels.
//
// A causal convolution of length L equals a circular one of size
// n = max(4, next_pow2(2L-1)) on zero-padded inputs. A tile of 2P adjacent channels is
// packed into P complex lanes (column j as the real part, column P+j as the
// imaginary part), so one complex FFT transforms two real channels. The pair
// of frequencies (k, n-k) separates the two real spectra:
//   X_a[k] = (Z[k] + conj Z[n-k]) / 2,   X_b[k] = (Z[k] - conj Z[n-k]) / 2i
// and Y_a + i Y_b recombines the outputs into one inverse transform.
// Per tile: load + transform, product with the group's spectra, inverse
// transform, bias, store; nothing of size B x n x C is ever materialised.
//
// Forward:      Y_c  = sum_i W_{g,i} X_{c-(K-1)+i}
// grad_x:       GX_c = sum_i conj(W_{g,i}) GY_{c+(K-1)-i}       (same group)
// grad_weight:  GW_{g,i} = sum_{b, c in g} GY_c conj(X_{c-(K-1)+i}),
//               reduced in the frequency domain, then one inverse per (g,i).
#include <algorithm>
#include <vector>

#include "cpu/channel_tiles.h"
#include "cpu/fft.h"
#include "cpu/toeplitz_cpu.h"

namespace tmm::cpu {
namespace {

constexpr int64_t kLanes = 16;  // complex lanes per tile: 32 channels

template <class R>
struct Cplx { R re, im; };

// Split complex spectra of real sequences for k in [0, n/2], natural order.
template <class R>
struct HalfSpectra {
  int64_t half = 0;  // n/2 + 1
  std::vector<R> re, im;
};

// Visits the frequency pairs (k, n-k) for k in [0, n/2] as buffer rows.
template <class R, class F>
void for_each_pair(const LaneFft<R>& fft, F&& f) {
  const int64_t n = fft.size();
  for (int64_t k = 0; k <= n / 2; ++k) f(k, fft.row_of(k), fft.row_of((n - k) & (n - 1)));
}

// Separates the two real spectra held in lane j of rows p, q.
template <class R>
inline void separate(const R* re, const R* im, int64_t p, int64_t q, int64_t j,
                     Cplx<R>& a, Cplx<R>& b) {
  const R zpr = re[p * kLanes + j], zpi = im[p * kLanes + j];
  const R zqr = re[q * kLanes + j], zqi = im[q * kLanes + j];
  a = {R(0.5) * (zpr + zqr), R(0.5) * (zpi - zqi)};
  b = {R(0.5) * (zpi + zqi), R(0.5) * (zqr - zpr)};
}

// Writes Y_a + i Y_b (spectra of real outputs) into lane j of rows p, q.
template <class R>
inline void recombine(R* re, R* im, int64_t p, int64_t q, int64_t j, Cplx<R> a, Cplx<R> b) {
  if (p == q) a.im = b.im = R(0);  // k = 0 or n/2: the spectrum of a real signal is real
  re[p * kLanes + j] = a.re - b.im;
  im[p * kLanes + j] = a.im + b.re;
  re[q * kLanes + j] = a.re + b.im;
  im[q * kLanes + j] = b.re - a.im;
}

template <class R>
inline Cplx<R> mul(Cplx<R> x, Cplx<R> y) { return {x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re}; }
template <class R>
inline Cplx<R> mul_conj(Cplx<R> x, Cplx<R> y) { return {x.re * y.re + x.im * y.im, x.im * y.re - x.re * y.im}; }  // x * conj(y)
template <class R>
inline Cplx<R> conj_mul(Cplx<R> w, Cplx<R> x) { return mul_conj(x, w); }  // conj(w) * x

// A tile's transform buffer: n rows of kLanes complex values.
template <class R>
struct TileBuffer {
  std::vector<R> re, im;
  explicit TileBuffer(int64_t n) : re(n * kLanes), im(n * kLanes) {}

  // Loads 2*kLanes columns of src[b] starting at channel c0, zero-padded to n rows.
  template <class T>
  void load(const T* src, const int64_t* stride, int64_t b, const ToeplitzShape& s, int64_t c0) {
    load_columns(src, stride, b, s.L, s.C, c0, kLanes, re.data(), kLanes);
    load_columns(src, stride, b, s.L, s.C, c0 + kLanes, kLanes, im.data(), kLanes);
    const int64_t half = int64_t(re.size()) / 2;  // rows [n/2, n): implicit zeros
    std::fill(re.begin() + s.L * kLanes, re.begin() + half, R(0));
    std::fill(im.begin() + s.L * kLanes, im.begin() + half, R(0));
  }
};

// Spectra of the weight rows r = g*K + i: W[(i*half + k)*G + g].
template <class T, class R>
HalfSpectra<R> weight_spectra(const T* w, const int64_t* ws, const ToeplitzShape& s,
                              const LaneFft<R>& fft, const ParallelFor& pf) {
  const int64_t n = fft.size(), rows = s.G * s.K;
  HalfSpectra<R> out;
  out.half = n / 2 + 1;
  out.re.resize(out.half * rows);
  out.im.resize(out.half * rows);
  const int64_t batches = (rows + 2 * kLanes - 1) / (2 * kLanes);
  pf(batches, [&](int64_t begin, int64_t end) {
    TileBuffer<R> buf(n);
    for (int64_t bt = begin; bt < end; ++bt) {
      std::fill(buf.re.begin(), buf.re.begin() + n / 2 * kLanes, R(0));
      std::fill(buf.im.begin(), buf.im.begin() + n / 2 * kLanes, R(0));
      for (int64_t col = 0; col < 2 * kLanes; ++col) {
        const int64_t r = bt * 2 * kLanes + col;
        if (r >= rows) break;
        const T* row = w + (r / s.K) * ws[0] + (r % s.K) * ws[1];
        R* dst = col < kLanes ? buf.re.data() + col : buf.im.data() + col - kLanes;
        for (int64_t t = 0; t < s.L; ++t) dst[t * kLanes] = R(kernels::to_float(row[t * ws[2]]));
      }
      fft.forward_padded(buf.re.data(), buf.im.data(), kLanes);
      for_each_pair(fft, [&](int64_t k, int64_t p, int64_t q) {
        for (int64_t j = 0; j < kLanes; ++j) {
          Cplx<R> a, b;
          separate(buf.re.data(), buf.im.data(), p, q, j, a, b);
          for (int64_t h = 0; h < 2; ++h) {
            const int64_t r = bt * 2 * kLanes + j + h * kLanes;
            if (r >= rows) continue;
            const int64_t g = r / s.K, i = r % s.K;
            const Cplx<R> v = h ? b : a;
            out.re[(i * out.half + k) * s.G + g] = v.re;
            out.im[(i * out.half + k) * s.G + g] = v.im;
          }
        }
      });
    }
  });
  return out;
}

template <class R>
inline Cplx<R> spectrum_at(const HalfSpectra<R>& w, int64_t G, int64_t i, int64_t k, int64_t g) {
  const int64_t at = (i * w.half + k) * G + g;
  return {w.re[at], w.im[at]};
}

// Column m of the tile as (lane, half): columns [0, P) are real parts.
inline int64_t lane_of(int64_t m) { return m % kLanes; }

// Circular size for a causal convolution of length L: n >= 2L - 1, so the
// zero padding takes at least the upper half (forward_padded's contract).
inline int64_t conv_size(int64_t L) { return std::max<int64_t>(4, next_pow2(2 * L - 1)); }

// Writes columns [m_lo, m_hi) of the transformed tile (rows t < L) to
// out[b, t, c0 + m] of a contiguous B x L x C tensor, row by row, adding
// bias_of(m)[t] when given.
template <class T, class R, class Bias>
void store_columns(T* out, const ToeplitzShape& s, int64_t b, int64_t c0, int64_t m_lo, int64_t m_hi,
                   const R* re, const R* im, Bias&& bias_at) {
  for (int64_t t = 0; t < s.L; ++t) {
    T* row = out + (b * s.L + t) * s.C + c0;
    for (int64_t m = m_lo; m < std::min(m_hi, kLanes); ++m) row[m] = store_as<T>(re[t * kLanes + m] + bias_at(m, t));
    for (int64_t m = std::max(m_lo, kLanes); m < m_hi; ++m)
      row[m] = store_as<T>(im[t * kLanes + m - kLanes] + bias_at(m, t));
  }
}

}  // namespace

template <class T>
void toeplitz_forward_fft(const ToeplitzForwardParams<T>& p, const ParallelFor& pf) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const LaneFft<R> fft(conv_size(s.L));
  const int64_t n = fft.size();
  const HalfSpectra<R> W = weight_spectra(p.weight, p.w_stride, s, fft, pf);
  const ChannelTiles tiles(s, 2 * kLanes);
  const R scale = R(1) / R(n);

  pf(s.B * tiles.count, [&](int64_t begin, int64_t end) {
    TileBuffer<R> buf(n);
    std::vector<Cplx<R>> X(2 * kLanes), Y(2 * kLanes);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / tiles.count, t = item % tiles.count;
      const TileColumns cols(s, tiles, t);
      if (cols.group_hi < 0) continue;  // owns no output channel
      buf.load(p.x, p.x_stride, b, s, tiles.first(t));
      fft.forward_padded(buf.re.data(), buf.im.data(), kLanes);
      R* re = buf.re.data();
      R* im = buf.im.data();
      if (cols.uniform(s.K)) {
        // One spectrum for the whole tile: multiply the packed lanes directly.
        for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
          const Cplx<R> w = spectrum_at(W, s.G, 0, k, cols.group_lo);
          const R wr = w.re * scale, wi = (pr == qr ? R(0) : w.im * scale);
          for (int64_t j = 0; j < kLanes; ++j) {
            const R zr = re[pr * kLanes + j], zi = im[pr * kLanes + j];
            re[pr * kLanes + j] = zr * wr - zi * wi;
            im[pr * kLanes + j] = zr * wi + zi * wr;
          }
          if (pr == qr) return;
          for (int64_t j = 0; j < kLanes; ++j) {
            const R zr = re[qr * kLanes + j], zi = im[qr * kLanes + j];
            re[qr * kLanes + j] = zr * wr + zi * wi;
            im[qr * kLanes + j] = zi * wr - zr * wi;
          }
        });
      } else {
        for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
          for (int64_t j = 0; j < kLanes; ++j) separate(re, im, pr, qr, j, X[j], X[j + kLanes]);
          for (int64_t m = 0; m < 2 * kLanes; ++m) {
            Cplx<R> acc{0, 0};
            if (m >= tiles.halo && cols.group[m] >= 0) {
              for (int64_t i = cols.first_tap[m]; i < s.K; ++i) {
                const Cplx<R> v = mul(spectrum_at(W, s.G, i, k, cols.group[m]), X[m - tiles.halo + i]);
                acc.re += v.re;
                acc.im += v.im;
              }
            }
            Y[m] = {acc.re * scale, acc.im * scale};
          }
          for (int64_t j = 0; j < kLanes; ++j) recombine(re, im, pr, qr, j, Y[j], Y[j + kLanes]);
        });
      }
      fft.inverse_truncated(re, im, kLanes);
      const int64_t c0 = tiles.first(t);
      const int64_t m_lo = std::max(tiles.halo, -c0), m_hi = std::min(2 * kLanes, s.C - c0);
      if (p.bias) {
        store_columns(p.y, s, b, c0, m_lo, m_hi, re, im, [&](int64_t m, int64_t tt) {
          return R(kernels::to_float(p.bias[cols.group[m] * p.bias_stride[0] + tt * p.bias_stride[1]]));
        });
      } else {
        store_columns(p.y, s, b, c0, m_lo, m_hi, re, im, [](int64_t, int64_t) { return R(0); });
      }
    }
  });
}

template <class T>
void toeplitz_backward_fft(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const LaneFft<R> fft(conv_size(s.L));
  const int64_t n = fft.size(), half = n / 2 + 1;
  const bool want_gx = p.grad_x != nullptr, want_gw = p.grad_weight != nullptr;
  HalfSpectra<R> W;
  if (want_gx) W = weight_spectra(p.weight, p.w_stride, s, fft, pf);
  const ChannelTiles tiles(s, 2 * kLanes);
  const R scale = R(1) / R(n);

  // Items: a tile and a chunk of the batch. The chunking depends on shapes
  // only, so the grad_weight reduction order is the same for any thread count.
  const int64_t chunks = std::min<int64_t>(s.B, std::max<int64_t>(1, 16 / tiles.count));
  const int64_t per_chunk = (s.B + chunks - 1) / chunks;
  const int64_t items = tiles.count * chunks;
  // grad_weight partial spectra of each item: owned groups x K x half.
  std::vector<int64_t> acc_offset(items + 1, 0), acc_group_lo(items, 0), acc_groups(items, 0);
  if (want_gw) {
    for (int64_t it = 0; it < items; ++it) {
      const TileColumns cols(s, tiles, it / chunks);
      acc_group_lo[it] = cols.group_lo;
      acc_groups[it] = cols.group_hi < 0 ? 0 : cols.owned_groups();
      acc_offset[it + 1] = acc_offset[it] + acc_groups[it] * s.K * half;
    }
  }
  std::vector<R> acc_re(acc_offset[items], R(0)), acc_im(acc_offset[items], R(0));

  pf(items, [&](int64_t begin, int64_t end) {
    TileBuffer<R> xb(n), gb(n);
    std::vector<Cplx<R>> X(2 * kLanes), GY(2 * kLanes), GX(2 * kLanes);
    std::vector<R> lane_re, lane_im;  // uniform tiles: grad_weight per lane
    for (int64_t it = begin; it < end; ++it) {
      const int64_t t = it / chunks, chunk = it % chunks;
      const TileColumns cols(s, tiles, t);
      const bool uniform = cols.uniform(s.K);
      const int64_t c0 = tiles.first(t);
      R* are = acc_re.data() + acc_offset[it];
      R* aim = acc_im.data() + acc_offset[it];
      if (uniform && want_gw) {
        lane_re.assign(half * kLanes, R(0));
        lane_im.assign(half * kLanes, R(0));
      }
      for (int64_t b = chunk * per_chunk; b < std::min(s.B, (chunk + 1) * per_chunk); ++b) {
        gb.load(p.grad_y, p.gy_stride, b, s, c0);
        fft.forward_padded(gb.re.data(), gb.im.data(), kLanes);
        if (want_gw) {
          xb.load(p.x, p.x_stride, b, s, c0);
          fft.forward_padded(xb.re.data(), xb.im.data(), kLanes);
        }
        R* xre = xb.re.data();
        R* xim = xb.im.data();
        const R* gre = gb.re.data();
        const R* gim = gb.im.data();
        if (uniform) {
          // One group, one tap: work on the packed lanes without separating.
          //   sum_c GY_c conj(X_c) = (Zg[k] conj Zx[k] + conj Zg[n-k] Zx[n-k]) / 2
          //   GX = conj(W) Zg at k, W Zg at n-k (conj W[n-k] = W[k])
          for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
            const R* __restrict gpr = gre + pr * kLanes;
            const R* __restrict gpi = gim + pr * kLanes;
            const R* __restrict gqr = gre + qr * kLanes;
            const R* __restrict gqi = gim + qr * kLanes;
            R* __restrict xpr = xre + pr * kLanes;
            R* __restrict xpi = xim + pr * kLanes;
            R* __restrict xqr = xre + qr * kLanes;
            R* __restrict xqi = xim + qr * kLanes;
            if (want_gw) {
              R* __restrict lr = lane_re.data() + k * kLanes;
              R* __restrict li = lane_im.data() + k * kLanes;
              for (int64_t j = 0; j < kLanes; ++j) {
                lr[j] += R(0.5) * (gpr[j] * xpr[j] + gpi[j] * xpi[j] + gqr[j] * xqr[j] + gqi[j] * xqi[j]);
                li[j] += R(0.5) * (gpi[j] * xpr[j] - gpr[j] * xpi[j] + gqr[j] * xqi[j] - gqi[j] * xqr[j]);
              }
            }
            if (want_gx) {
              const Cplx<R> w = spectrum_at(W, s.G, 0, k, cols.group_lo);
              const R wr = w.re * scale, wi = (pr == qr ? R(0) : w.im * scale);
              for (int64_t j = 0; j < kLanes; ++j) {
                xpr[j] = gpr[j] * wr + gpi[j] * wi;
                xpi[j] = gpi[j] * wr - gpr[j] * wi;
              }
              for (int64_t j = 0; j < kLanes; ++j) {
                xqr[j] = gqr[j] * wr - gqi[j] * wi;
                xqi[j] = gqr[j] * wi + gqi[j] * wr;
              }
            }
          });
        } else {
        for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
          for (int64_t j = 0; j < kLanes; ++j)
            separate(gb.re.data(), gb.im.data(), pr, qr, j, GY[j], GY[j + kLanes]);
          if (want_gw) {
            for (int64_t j = 0; j < kLanes; ++j) separate(xre, xim, pr, qr, j, X[j], X[j + kLanes]);
            for (int64_t m = tiles.halo; m < 2 * kLanes; ++m) {
              if (cols.group[m] < 0) continue;
              const int64_t row0 = (cols.group[m] - acc_group_lo[it]) * s.K;
              for (int64_t i = cols.first_tap[m]; i < s.K; ++i) {
                const Cplx<R> v = mul_conj(GY[m], X[m - tiles.halo + i]);
                are[(row0 + i) * half + k] += v.re;
                aim[(row0 + i) * half + k] += v.im;
              }
            }
          }
          if (want_gx) {
            for (int64_t m = 0; m < 2 * kLanes; ++m) {
              Cplx<R> acc{0, 0};
              const int64_t g = cols.group[m];
              if (m < tiles.step && g >= 0) {
                for (int64_t i = 0; i < s.K; ++i) {
                  const int64_t out = m + tiles.halo - i;  // the output column fed by tap i
                  if (cols.group[out] != g) continue;
                  const Cplx<R> v = conj_mul(spectrum_at(W, s.G, i, k, g), GY[out]);
                  acc.re += v.re;
                  acc.im += v.im;
                }
              }
              GX[m] = {acc.re * scale, acc.im * scale};
            }
            for (int64_t j = 0; j < kLanes; ++j) recombine(xre, xim, pr, qr, j, GX[j], GX[j + kLanes]);
          }
        });
        }
        if (!want_gx) continue;
        fft.inverse_truncated(xre, xim, kLanes);
        store_columns(p.grad_x, s, b, c0, std::max<int64_t>(0, -c0), std::min(tiles.step, s.C - c0), xre, xim,
                      [](int64_t, int64_t) { return R(0); });
      }
      if (uniform && want_gw) {  // the lanes' sum is the item's (g, 0) spectrum
        for (int64_t k = 0; k < half; ++k) {
          R sr = 0, si = 0;
          for (int64_t j = 0; j < kLanes; ++j) {
            sr += lane_re[k * kLanes + j];
            si += lane_im[k * kLanes + j];
          }
          are[k] = sr;
          aim[k] = si;
        }
      }
    }
  });
  if (!want_gw) return;

  // Reduce the items' partial spectra per (g, i) in item order, then one
  // inverse transform per row, two rows per complex lane.
  const int64_t rows = s.G * s.K;
  const int64_t batches = (rows + 2 * kLanes - 1) / (2 * kLanes);
  pf(batches, [&](int64_t begin, int64_t end) {
    TileBuffer<R> buf(n);
    std::vector<R> sum_re(2 * kLanes * half), sum_im(2 * kLanes * half);
    for (int64_t bt = begin; bt < end; ++bt) {
      std::fill(sum_re.begin(), sum_re.end(), R(0));
      std::fill(sum_im.begin(), sum_im.end(), R(0));
      for (int64_t col = 0; col < 2 * kLanes; ++col) {
        const int64_t r = bt * 2 * kLanes + col;
        if (r >= rows) break;
        const int64_t g = r / s.K, i = r % s.K;
        for (int64_t it = 0; it < items; ++it) {
          const int64_t gl = g - acc_group_lo[it];
          if (gl < 0 || gl >= acc_groups[it]) continue;
          const R* are = acc_re.data() + acc_offset[it] + (gl * s.K + i) * half;
          const R* aim = acc_im.data() + acc_offset[it] + (gl * s.K + i) * half;
          for (int64_t k = 0; k < half; ++k) {
            sum_re[col * half + k] += are[k];
            sum_im[col * half + k] += aim[k];
          }
        }
      }
      for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
        for (int64_t j = 0; j < kLanes; ++j) {
          const Cplx<R> a{sum_re[j * half + k] * scale, sum_im[j * half + k] * scale};
          const Cplx<R> b{sum_re[(j + kLanes) * half + k] * scale, sum_im[(j + kLanes) * half + k] * scale};
          recombine(buf.re.data(), buf.im.data(), pr, qr, j, a, b);
        }
      });
      fft.inverse_truncated(buf.re.data(), buf.im.data(), kLanes);
      for (int64_t col = 0; col < 2 * kLanes; ++col) {
        const int64_t r = bt * 2 * kLanes + col;
        if (r >= rows) break;
        const R* src = (col < kLanes ? buf.re.data() : buf.im.data()) + lane_of(col);
        T* out = p.grad_weight + r * s.N;
        for (int64_t tt = 0; tt < s.L; ++tt) out[tt] = store_as<T>(src[tt * kLanes]);
        for (int64_t tt = s.L; tt < s.N; ++tt) out[tt] = store_as<T>(R(0));
      }
    }
  });
}

#define TMM_INSTANTIATE(T)                                                                   \
  template void toeplitz_forward_fft<T>(const ToeplitzForwardParams<T>&, const ParallelFor&); \
  template void toeplitz_backward_fft<T>(const ToeplitzBackwardParams<T>&, const ParallelFor&);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(kernels::bf16_t)
TMM_INSTANTIATE(kernels::f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cpu
