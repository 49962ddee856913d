// FFT path of the CPU kernels, forward: per tile of kCols channels (and one
// batch entry), load + transform, the product with the group's spectra
// (Y_c = sum_i W_{g,i} X_{c-(K-1)+i}), inverse transform, bias, store
// (fft_tiles.h has the packing and the separation of the spectra).
#include "cpu/isa_variant.h"

#include <algorithm>

#include "cpu/fft_tiles.h"
#include "cpu/variant_kernels.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {

template <class T>
void toeplitz_forward_fft(const ToeplitzForwardParams<T>& p, const ParallelFor& pf) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const auto plan = LaneFft<R>::shared(conv_size(s.L));
  const LaneFft<R>& fft = *plan;
  const int64_t n = fft.size();
  const WeightSpectra<R> W = weight_spectra(p.weight, p.w_stride, s, fft, pf);
  const ChannelTiles tiles(s, kCols);
  const int64_t h = tiles.halo;
  const R scale = R(1) / R(n);
  const RowSpectra<R> Wrows = row_spectra(W, fft, s, tiles, scale, false);

  pf(s.B * tiles.count, [&](int64_t begin, int64_t end) {
    TileBuffer<R> buf(n);
    R xr[kCols], xi[kCols], yr[kCols], yi[kCols];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / tiles.count, t = item % tiles.count;
      const TileColumns cols(s, tiles, t);
      if (cols.group_hi < 0) continue;  // owns no output channel
      const TileCoefs<R> coef(s, tiles, cols);
      const int64_t c0 = tiles.first(t);
      buf.load(p.x, p.x_stride, b, s, c0);
      if (cols.uniform(s.K)) {
        // Y = W Z row by row, between the transforms (convolve_padded).
        const R* wr = Wrows.re_of(cols.group_lo);
        const R* wi = Wrows.im_of(cols.group_lo);
        auto product = [&](int64_t lo, int64_t hi) { multiply_rows(wr, wi, buf, buf, lo, hi); };
        convolve_padded(fft, buf, product);
      } else {
        fft.forward_padded(buf.re.data(), buf.im.data());
        if (coef.per_channel) {
          for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
            per_channel_product<false>(W.re_at(0, k) + c0, W.im_at(0, k) + c0, scale, pr, qr, buf, buf);
          });
        } else {
          for_each_pair(fft, [&](int64_t k, int64_t pr, int64_t qr) {
            buf.separate(pr, qr, xr, xi);
            std::fill(yr, yr + kCols, R(0));
            std::fill(yi, yi + kCols, R(0));
            for (int64_t i = 0; i < s.K; ++i)
              multiply_accumulate<false>(W, coef, i, k, coef.tap_mask[i], h, kCols, i - h, xr, xi, yr, yi);
            for (int64_t m = 0; m < kCols; ++m) {
              yr[m] *= scale;
              yi[m] *= scale;
            }
            buf.recombine(pr, qr, yr, yi);
          });
        }
        fft.inverse_truncated(buf.re.data(), buf.im.data());
      }
      const int64_t m_lo = std::max(h, -c0), m_hi = std::min(kCols, s.C - c0);
      if (p.bias) {
        store_columns(p.y, s, b, c0, m_lo, m_hi, buf, [&](int64_t m, int64_t tt) {
          return R(kernels::to_float(p.bias[cols.group[m] * p.bias_stride[0] + tt * p.bias_stride[1]]));
        });
      } else {
        store_columns(p.y, s, b, c0, m_lo, m_hi, buf, [](int64_t, int64_t) { return R(0); });
      }
    }
  });
}

#define TMM_INSTANTIATE(T) \
  template void toeplitz_forward_fft<T>(const ToeplitzForwardParams<T>&, const ParallelFor&);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(kernels::bf16_t)
TMM_INSTANTIATE(kernels::f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
