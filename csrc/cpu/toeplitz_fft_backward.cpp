// FFT path of the CPU kernels, backward (fft_tiles.h has the packing and the
// separation of the spectra):
//   grad_x:       GX_c = sum_i conj(W_{g,i}) GY_{c+(K-1)-i}       (same group)
//   grad_weight:  GW_{g,i} = sum_{b, c in g} GY_c conj(X_{c-(K-1)+i})
// in stages:
//   1. work items: a tile of kCols channels and a chunk of the batch;
//   2. per item and batch entry: transform grad_y (and x), the products at
//      each frequency pair, grad_x's inverse transform and store; grad_weight
//      accumulates per lane over the item's batch entries;
//   3. per item: the lanes reduced into the item's per-(group, tap) spectra;
//   4. the items' spectra summed per (group, tap) in item order, one inverse
//      transform per row, the store of grad_weight.
// The items and every reduction order depend on the shapes only, so results
// are bitwise the same for any thread count.
#include "cpu/isa_variant.h"

#include <algorithm>
#include <vector>

#include "cpu/fft_tiles.h"
#include "cpu/variant_kernels.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {
namespace {

// Stage 1: items it = tile * chunks + chunk.
struct BackwardItems {
  int64_t chunks, per_chunk, count;
  BackwardItems(const ToeplitzShape& s, const ChannelTiles& tiles)
      : chunks(std::min<int64_t>(s.B, std::max<int64_t>(1, 16 / tiles.count))),
        per_chunk((s.B + chunks - 1) / chunks),
        count(tiles.count * chunks) {}
  int64_t tile(int64_t it) const { return it / chunks; }
  int64_t batch_begin(int64_t it) const { return it % chunks * per_chunk; }
  int64_t batch_end(int64_t it, int64_t B) const { return std::min(B, batch_begin(it) + per_chunk); }
};

// grad_weight's partial spectra, one block per item: its owned groups x K x
// half frequencies, at offset[it]. Empty without grad_weight.
template <class R>
struct GradWeightPartials {
  std::vector<int64_t> offset, group_lo, groups;
  std::vector<R> re, im;

  GradWeightPartials(const ToeplitzShape& s, const ChannelTiles& tiles, const BackwardItems& items, int64_t half,
                     bool want_gw)
      : offset(items.count + 1, 0), group_lo(items.count, 0), groups(items.count, 0) {
    if (!want_gw) return;
    for (int64_t it = 0; it < items.count; ++it) {
      const TileColumns cols(s, tiles, items.tile(it));
      group_lo[it] = cols.group_lo;
      groups[it] = cols.group_hi < 0 ? 0 : cols.owned_groups();
      offset[it + 1] = offset[it] + groups[it] * s.K * half;
    }
    re.assign(offset[items.count], R(0));
    im.assign(offset[items.count], R(0));
  }
};

// What every stage of one call reads.
template <class T, class R>
struct Backward {
  const ToeplitzBackwardParams<T>& p;
  const ToeplitzShape& s;
  const LaneFft<R>& fft;
  const WeightSpectra<R>& W;  // empty without grad_x
  const RowSpectra<R>& Wrows;  // conj(W) of the uniform tiles' groups, in row order
  const ChannelTiles& tiles;
  int64_t half;
  R scale;  // 1/n
  bool want_gx, want_gw;
};

// One tile of one item: its columns and the per-thread buffers.
template <class R>
struct TileWork {
  const TileColumns& cols;
  const TileCoefs<R>& coef;
  int64_t c0;    // the tile's first channel
  bool uniform;  // one spectrum for all owned outputs (K = 1, one group)
  TileBuffer<R>& xb;  // x's transform, then grad_x's
  TileBuffer<R>& gb;  // grad_y's transform
  // grad_weight over the item's batch: [row] for uniform tiles (the sum
  // of the packed lanes, rows of the transform), [i][k][column] otherwise.
  std::vector<R>& lane_re;
  std::vector<R>& lane_im;
};

// Stage 2, uniform tiles, on the packed lanes, row by row (a row holds
// frequency k = fft.freq_of(row)):
//   grad_weight          A[row] += sum over lanes of Zg conj Zx, folded into
//                        frequencies in stage 3:
//                        sum_c GY_c conj(X_c) = (A[k] + conj A[n-k]) / 2
//   GX = conj(W) Zg      (in the rows above n/2 conj W[n-k] = W[k])
// GX's product runs between its transforms (convolve_padded).
template <class T, class R>
void uniform_batch_entry(const Backward<T, R>& c, int64_t b, TileWork<R>& w) {
  const int64_t n = c.fft.size();
  auto grad_weight_rows = [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      RowVec<R> gr, gi, xr, xi;
      std::memcpy(&gr, w.gb.re.data() + row * kLanes, sizeof gr);
      std::memcpy(&gi, w.gb.im.data() + row * kLanes, sizeof gi);
      std::memcpy(&xr, w.xb.re.data() + row * kLanes, sizeof xr);
      std::memcpy(&xi, w.xb.im.data() + row * kLanes, sizeof xi);
      w.lane_re[row] += lane_sum<R>(gr * xr + gi * xi);
      w.lane_im[row] += lane_sum<R>(gi * xr - gr * xi);
    }
  };
  auto grad_x_rows = [&](TileBuffer<R>& out, int64_t lo, int64_t hi) {  // out may be gb
    multiply_rows(c.Wrows.re_of(w.cols.group_lo), c.Wrows.im_of(w.cols.group_lo), w.gb, out, lo, hi);
  };
  if (!c.want_gw) {  // grad_x only: gb transformed, multiplied and back in place
    auto product = [&](int64_t lo, int64_t hi) { grad_x_rows(w.gb, lo, hi); };
    convolve_padded(c.fft, w.gb, product);
    store_columns(c.p.grad_x, c.s, b, w.c0, std::max<int64_t>(0, -w.c0), std::min(c.tiles.step, c.s.C - w.c0), w.gb,
                  [](int64_t, int64_t) { return R(0); });
    return;
  }
  c.fft.forward_padded(w.gb.re.data(), w.gb.im.data());
  w.xb.load(c.p.x, c.p.x_stride, b, c.s, w.c0);
  if (!c.want_gx) {
    c.fft.forward_padded(w.xb.re.data(), w.xb.im.data());
    grad_weight_rows(0, n);
    return;
  }
  auto product = [&](int64_t lo, int64_t hi) {  // x's spectrum read, then replaced by grad_x's
    grad_weight_rows(lo, hi);
    grad_x_rows(w.xb, lo, hi);
  };
  convolve_padded(c.fft, w.xb, product);
  store_columns(c.p.grad_x, c.s, b, w.c0, std::max<int64_t>(0, -w.c0), std::min(c.tiles.step, c.s.C - w.c0), w.xb,
                [](int64_t, int64_t) { return R(0); });
}

// Stage 2, other tiles: the spectra separated per column, the K taps with
// their group masks, grad_x's spectra recombined into xb.
template <class T, class R>
void general_products(const Backward<T, R>& c, TileWork<R>& w) {
  const int64_t h = c.tiles.halo, K = c.s.K;
  R xr[kCols], xi[kCols], gr[kCols], gi[kCols], yr[kCols], yi[kCols];
  for_each_pair(c.fft, [&](int64_t k, int64_t pr, int64_t qr) {
    w.gb.separate(pr, qr, gr, gi);
    if (c.want_gw) {
      w.xb.separate(pr, qr, xr, xi);
      for (int64_t i = 0; i < K; ++i) {  // GY_m conj(X_{m-h+i})
        R* __restrict lr = w.lane_re.data() + (i * c.half + k) * kCols;
        R* __restrict li = w.lane_im.data() + (i * c.half + k) * kCols;
#pragma GCC ivdep
        for (int64_t m = h; m < kCols; ++m) {
          lr[m] += gr[m] * xr[m - h + i] + gi[m] * xi[m - h + i];
          li[m] += gi[m] * xr[m - h + i] - gr[m] * xi[m - h + i];
        }
      }
    }
    if (c.want_gx && w.coef.per_channel) {
      per_channel_product<true>(c.W.re_at(0, k) + w.c0, c.W.im_at(0, k) + w.c0, c.scale, pr, qr, w.gb, w.xb);
    } else if (c.want_gx) {
      std::fill(yr, yr + kCols, R(0));
      std::fill(yi, yi + kCols, R(0));
      for (int64_t i = 0; i < K; ++i)  // conj(W_{g,i}) GY_{m+h-i}
        multiply_accumulate<true>(c.W, w.coef, i, k, w.coef.grad_x_mask[i], 0, c.tiles.step, h - i, gr, gi, yr, yi);
      for (int64_t m = 0; m < kCols; ++m) {
        yr[m] *= c.scale;
        yi[m] *= c.scale;
      }
      w.xb.recombine(pr, qr, yr, yi);
    }
  });
}

// Stage 2 for batch entry b: transforms, products, grad_x's store.
template <class T, class R>
void backward_batch_entry(const Backward<T, R>& c, int64_t b, TileWork<R>& w) {
  const ToeplitzShape& s = c.s;
  w.gb.load(c.p.grad_y, c.p.gy_stride, b, s, w.c0);
  if (w.uniform) return uniform_batch_entry(c, b, w);
  c.fft.forward_padded(w.gb.re.data(), w.gb.im.data());
  if (c.want_gw) {
    w.xb.load(c.p.x, c.p.x_stride, b, s, w.c0);
    c.fft.forward_padded(w.xb.re.data(), w.xb.im.data());
  }
  general_products(c, w);
  if (!c.want_gx) return;
  c.fft.inverse_truncated(w.xb.re.data(), w.xb.im.data());
  store_columns(c.p.grad_x, s, b, w.c0, std::max<int64_t>(0, -w.c0), std::min(c.tiles.step, s.C - w.c0), w.xb,
                [](int64_t, int64_t) { return R(0); });
}

// Stage 3: the lanes into the item's per-(group, tap) spectra, in order.
template <class T, class R>
void reduce_lanes(const Backward<T, R>& c, const TileWork<R>& w, R* __restrict are, R* __restrict aim) {
  if (w.uniform) {  // rows p, q of frequencies k, n-k (p = q at 0 and n/2)
    for_each_pair(c.fft, [&](int64_t k, int64_t p, int64_t q) {
      are[k] = R(0.5) * (w.lane_re[p] + w.lane_re[q]);
      aim[k] = R(0.5) * (w.lane_im[p] - w.lane_im[q]);
    });
    return;
  }
  for (int64_t i = 0; i < c.s.K; ++i) {
    for (int64_t m = c.tiles.halo; m < kCols; ++m) {
      if (w.coef.tap_mask[i][m] == R(0)) continue;
      const int64_t row = ((w.cols.group[m] - w.cols.group_lo) * c.s.K + i) * c.half;
      for (int64_t k = 0; k < c.half; ++k) {
        are[row + k] += w.lane_re[(i * c.half + k) * kCols + m];
        aim[row + k] += w.lane_im[(i * c.half + k) * kCols + m];
      }
    }
  }
}

// Stages 2 and 3 for item it.
template <class T, class R>
void backward_item(const Backward<T, R>& c, const BackwardItems& items, int64_t it, TileBuffer<R>& xb,
                   TileBuffer<R>& gb, std::vector<R>& lane_re, std::vector<R>& lane_im,
                   GradWeightPartials<R>& partials) {
  const int64_t t = items.tile(it);
  const TileColumns cols(c.s, c.tiles, t);
  const TileCoefs<R> coef(c.s, c.tiles, cols);
  TileWork<R> w{cols, coef, c.tiles.first(t), cols.uniform(c.s.K), xb, gb, lane_re, lane_im};
  if (c.want_gw) {
    lane_re.assign(w.uniform ? c.fft.size() : c.s.K * kCols * c.half, R(0));
    lane_im.assign(lane_re.size(), R(0));
  }
  for (int64_t b = items.batch_begin(it); b < items.batch_end(it, c.s.B); ++b) backward_batch_entry(c, b, w);
  if (c.want_gw && cols.group_hi >= 0)
    reduce_lanes(c, w, partials.re.data() + partials.offset[it], partials.im.data() + partials.offset[it]);
}

// Stage 4: per (g, i) row, the items' spectra summed in item order; one
// inverse transform per row, two rows per complex lane; grad_weight stored
// (G x K x N, contiguous, zero past L).
template <class T, class R>
void store_grad_weight(const Backward<T, R>& c, const BackwardItems& items, const GradWeightPartials<R>& partials,
                       const ParallelFor& pf) {
  const ToeplitzShape& s = c.s;
  const int64_t rows = s.G * s.K, half = c.half;
  pf((rows + kCols - 1) / kCols, [&](int64_t begin, int64_t end) {
    TileBuffer<R> buf(c.fft.size());
    std::vector<R> sum_re(kCols * half), sum_im(kCols * half);
    R yr[kCols], yi[kCols];
    for (int64_t bt = begin; bt < end; ++bt) {
      std::fill(sum_re.begin(), sum_re.end(), R(0));
      std::fill(sum_im.begin(), sum_im.end(), R(0));
      const int64_t cols = std::min(kCols, rows - bt * kCols);
      for (int64_t m = 0; m < cols; ++m) {
        const int64_t r = bt * kCols + m, g = r / s.K, i = r % s.K;
        for (int64_t it = 0; it < items.count; ++it) {
          const int64_t gl = g - partials.group_lo[it];
          if (gl < 0 || gl >= partials.groups[it]) continue;
          const R* are = partials.re.data() + partials.offset[it] + (gl * s.K + i) * half;
          const R* aim = partials.im.data() + partials.offset[it] + (gl * s.K + i) * half;
          for (int64_t k = 0; k < half; ++k) {
            sum_re[m * half + k] += are[k];
            sum_im[m * half + k] += aim[k];
          }
        }
      }
      for_each_pair(c.fft, [&](int64_t k, int64_t pr, int64_t qr) {
        for (int64_t m = 0; m < kCols; ++m) {
          yr[m] = sum_re[m * half + k] * c.scale;
          yi[m] = sum_im[m * half + k] * c.scale;
        }
        buf.recombine(pr, qr, yr, yi);
      });
      c.fft.inverse_truncated(buf.re.data(), buf.im.data());
      for (int64_t m = 0; m < cols; ++m) {
        const R* src = (m < kLanes ? buf.re.data() + m : buf.im.data() + m - kLanes);
        T* out = c.p.grad_weight + (bt * kCols + m) * s.N;
        for (int64_t tt = 0; tt < s.L; ++tt) out[tt] = store_as<T>(src[tt * kLanes]);
        for (int64_t tt = s.L; tt < s.N; ++tt) out[tt] = store_as<T>(R(0));
      }
    }
  });
}

}  // namespace

template <class T>
void toeplitz_backward_fft(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const auto plan = LaneFft<R>::shared(conv_size(s.L));
  const LaneFft<R>& fft = *plan;
  const bool want_gx = p.grad_x != nullptr, want_gw = p.grad_weight != nullptr;
  const WeightSpectra<R> W = want_gx ? weight_spectra(p.weight, p.w_stride, s, fft, pf) : WeightSpectra<R>{};
  const ChannelTiles tiles(s, kCols);
  const R scale = R(1) / R(fft.size());
  const RowSpectra<R> Wrows = want_gx ? row_spectra(W, fft, s, tiles, scale, true) : RowSpectra<R>{};
  const Backward<T, R> c{p, s, fft, W, Wrows, tiles, fft.size() / 2 + 1, scale, want_gx, want_gw};
  const BackwardItems items(s, tiles);
  GradWeightPartials<R> partials(s, tiles, items, c.half, want_gw);
  pf(items.count, [&](int64_t begin, int64_t end) {
    TileBuffer<R> xb(fft.size()), gb(fft.size());
    std::vector<R> lane_re, lane_im;
    for (int64_t it = begin; it < end; ++it) backward_item(c, items, it, xb, gb, lane_re, lane_im, partials);
  });
  if (want_gw) store_grad_weight(c, items, partials, pf);
}

#define TMM_INSTANTIATE(T) \
  template void toeplitz_backward_fft<T>(const ToeplitzBackwardParams<T>&, const ParallelFor&);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(kernels::bf16_t)
TMM_INSTANTIATE(kernels::f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
