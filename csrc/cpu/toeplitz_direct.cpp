// Direct (time-domain) path of the CPU causal-Toeplitz kernels, O(L^2) per
// channel: faster than the FFT below the crossover length. A tile of
// adjacent channels is a row of SIMD lanes; each channel's taps are gathered
// into lane order once per tile (zero where a tap reads another group), so
// the inner loops are branch-free multiply-adds over lanes.
//
// Forward:      y[t,c]  = sum_i sum_{s<=t} w[g,i,t-s] x[s,c-(K-1)+i] (+ bias)
// grad_x:       gx[s,c] = sum_i sum_{t>=s} w[g,i,t-s] gy[t,c+(K-1)-i]
// grad_weight:  gw[g,i,d] = sum_{b, c in g} sum_t gy[t,c] x[t-d,c-(K-1)+i]
#include "cpu/isa_variant.h"

#include <algorithm>
#include <vector>

#include "cpu/channel_tiles.h"
#include "cpu/variant_kernels.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {
namespace {

constexpr int64_t kWidth = 32;  // channels per tile

// taps[(i*L + d)*kWidth + m]: tap d of offset i feeding column m, zero where
// the column has no channel or tap i would read below its group.
template <class T, class R>
std::vector<R> gather_taps(const T* w, const int64_t* ws, const ToeplitzShape& s,
                           const TileColumns& cols) {
  std::vector<R> taps(s.K * s.L * kWidth, R(0));
  for (int64_t m = 0; m < kWidth; ++m) {
    if (cols.group[m] < 0) continue;
    for (int64_t i = cols.first_tap[m]; i < s.K; ++i) {
      const T* row = w + cols.group[m] * ws[0] + i * ws[1];
      for (int64_t d = 0; d < s.L; ++d) taps[(i * s.L + d) * kWidth + m] = R(kernels::to_float(row[d * ws[2]]));
    }
  }
  return taps;
}

}  // namespace

template <class T>
void toeplitz_forward_direct(const ToeplitzForwardParams<T>& p, const ParallelFor& pf) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const ChannelTiles tiles(s, kWidth);
  const int64_t h = tiles.halo;
  pf(s.B * tiles.count, [&](int64_t begin, int64_t end) {
    std::vector<R> xt(s.L * kWidth), acc(kWidth);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / tiles.count, t = item % tiles.count;
      const TileColumns cols(s, tiles, t);
      if (cols.group_hi < 0) continue;
      const std::vector<R> taps = gather_taps<T, R>(p.weight, p.w_stride, s, cols);
      const int64_t c0 = tiles.first(t);
      {
        load_columns(p.x, p.x_stride, b, s.L, s.C, c0, kWidth, xt.data(), kWidth);
        for (int64_t tt = 0; tt < s.L; ++tt) {
          std::fill(acc.begin(), acc.end(), R(0));
          for (int64_t i = 0; i < s.K; ++i) {
            for (int64_t src = 0; src <= tt; ++src) {
              const R* __restrict w = taps.data() + (i * s.L + tt - src) * kWidth;
              const R* __restrict x = xt.data() + src * kWidth + i - h;  // column m reads m-h+i
              R* __restrict a = acc.data();
              #pragma GCC ivdep
              for (int64_t m = h; m < kWidth; ++m) a[m] += w[m] * x[m];
            }
          }
          T* out = p.y + (b * s.L + tt) * s.C + c0;
          for (int64_t m = h; m < kWidth; ++m) {
            if (cols.group[m] < 0) continue;
            R v = acc[m];
            if (p.bias) v += R(kernels::to_float(p.bias[cols.group[m] * p.bias_stride[0] + tt * p.bias_stride[1]]));
            out[m] = store_as<T>(v);
          }
        }
      }
    }
  });
}

template <class T>
void toeplitz_backward_direct(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const ChannelTiles tiles(s, kWidth);
  const int64_t h = tiles.halo, L = s.L;
  const bool want_gx = p.grad_x != nullptr, want_gw = p.grad_weight != nullptr;

  // Per tile, grad_weight partials per lane: part[t][(i*L + d)*kWidth + m].
  std::vector<R> part(want_gw ? tiles.count * s.K * L * kWidth : 0, R(0));
  pf(tiles.count, [&](int64_t begin, int64_t end) {
    std::vector<R> xt(L * kWidth), gt(L * kWidth), acc(kWidth);
    for (int64_t t = begin; t < end; ++t) {
      const TileColumns cols(s, tiles, t);
      const std::vector<R> taps = gather_taps<T, R>(p.weight, p.w_stride, s, cols);
      const int64_t c0 = tiles.first(t);
      R* pt = want_gw ? part.data() + t * s.K * L * kWidth : nullptr;
      for (int64_t b = 0; b < s.B; ++b) {
        load_columns(p.grad_y, p.gy_stride, b, L, s.C, c0, kWidth, gt.data(), kWidth);
        if (want_gx) {
          for (int64_t src = 0; src < L; ++src) {
            std::fill(acc.begin(), acc.end(), R(0));
            for (int64_t i = 0; i < s.K; ++i) {
              for (int64_t tt = src; tt < L; ++tt) {
                // Column m receives from output column m+h-i.
                const R* __restrict w = taps.data() + (i * L + tt - src) * kWidth + h - i;
                const R* __restrict g = gt.data() + tt * kWidth + h - i;
                R* __restrict a = acc.data();
                #pragma GCC ivdep
                for (int64_t m = 0; m < tiles.step; ++m) a[m] += w[m] * g[m];
              }
            }
            T* out = p.grad_x + (b * L + src) * s.C + c0;
            for (int64_t m = 0; m < tiles.step; ++m)
              if (cols.group[m] >= 0) out[m] = store_as<T>(acc[m]);
          }
        }
        if (want_gw && cols.group_hi >= 0) {
          load_columns(p.x, p.x_stride, b, L, s.C, c0, kWidth, xt.data(), kWidth);
          for (int64_t i = 0; i < s.K; ++i) {
            for (int64_t d = 0; d < L; ++d) {
              R* __restrict a = pt + (i * L + d) * kWidth;
              for (int64_t tt = d; tt < L; ++tt) {
                const R* __restrict g = gt.data() + tt * kWidth;
                const R* __restrict x = xt.data() + (tt - d) * kWidth + i - h;
                #pragma GCC ivdep
                for (int64_t m = h; m < kWidth; ++m) a[m] += g[m] * x[m];
              }
            }
          }
        }
      }
    }
  });
  if (!want_gw) return;

  // Sum the lanes of each group, tiles in order: one grad_weight row per (g, i).
  std::vector<R> gw(s.G * s.K * L, R(0));
  for (int64_t t = 0; t < tiles.count; ++t) {
    const TileColumns cols(s, tiles, t);
    const R* pt = part.data() + t * s.K * L * kWidth;
    for (int64_t m = h; m < kWidth; ++m) {
      if (cols.group[m] < 0) continue;
      for (int64_t i = cols.first_tap[m]; i < s.K; ++i)
        for (int64_t d = 0; d < L; ++d)
          gw[(cols.group[m] * s.K + i) * L + d] += pt[(i * L + d) * kWidth + m];
    }
  }
  for (int64_t r = 0; r < s.G * s.K; ++r) {
    for (int64_t d = 0; d < s.N; ++d)
      p.grad_weight[r * s.N + d] = store_as<T>(d < L ? gw[r * L + d] : R(0));
  }
}

#define TMM_INSTANTIATE(T)                                                                      \
  template void toeplitz_forward_direct<T>(const ToeplitzForwardParams<T>&, const ParallelFor&); \
  template void toeplitz_backward_direct<T>(const ToeplitzBackwardParams<T>&, const ParallelFor&);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(kernels::bf16_t)
TMM_INSTANTIATE(kernels::f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
