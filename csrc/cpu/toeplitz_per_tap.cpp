// The per-tap split for K > kMaxTileTaps (toeplitz_per_tap.h). Memory-bound
// shifts and sums around the 1-tap kernel calls; the kernels themselves are
// the dispatched ones (toeplitz_forward / toeplitz_backward on K = 1).
#include "cpu/toeplitz_per_tap.h"

#include <algorithm>
#include <vector>

namespace tmm::cpu {
namespace {

// Contiguous element strides of a B x L x C tensor and of a G x 1 x L weight.
struct Contiguous {
  int64_t btc[3], gkn[3];
  explicit Contiguous(const ToeplitzShape& s) : btc{s.L * s.C, s.C, 1}, gkn{s.L, s.L, 1} {}
};

// The 1-tap problem of each tap: K = 1, and only the first L taps of the
// weight (N = L), gathered contiguously.
ToeplitzShape tap_shape(const ToeplitzShape& s) {
  ToeplitzShape one = s;
  one.K = 1;
  one.N = s.L;
  return one;
}

// Runs body(row) for the B * L rows of a B x L x C tensor, in parallel.
template <class Body>
void for_rows(const ToeplitzShape& s, const ParallelFor& pf, Body&& body) {
  pf(s.B * s.L, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) body(r / s.L, r % s.L, r);
  });
}

// dst[b,t,c] = src[b,t,c-shift] where c-shift lies in c's group, else 0.
// src has element strides `stride`; dst is contiguous, in R.
template <class T, class R>
void shift_in_groups(const T* src, const int64_t* stride, const ToeplitzShape& s, int64_t shift,
                     const ParallelFor& pf, R* dst) {
  const int64_t cg = s.group_channels();
  for_rows(s, pf, [&](int64_t b, int64_t t, int64_t r) {
    const T* in = src + b * stride[0] + t * stride[1];
    R* out = dst + r * s.C;
    for (int64_t c = 0; c < s.C; ++c) {
      const bool inside = c % cg >= shift;
      out[c] = inside ? R(kernels::to_float(in[(c - shift) * stride[2]])) : R(0);
    }
  });
}

// dst[b,t,c'] += src[b,t,c'+shift] where c'+shift lies in c''s group.
template <class R>
void add_unshifted(const R* src, const ToeplitzShape& s, int64_t shift, const ParallelFor& pf, R* dst) {
  const int64_t cg = s.group_channels();
  for_rows(s, pf, [&](int64_t, int64_t, int64_t r) {
    const R* in = src + r * s.C;
    R* out = dst + r * s.C;
    for (int64_t c = 0; c < s.C; ++c) {
      if (c % cg + shift < cg) out[c] += in[c + shift];
    }
  });
}

// Tap i of weight (G x K x N, strides ws) as a contiguous G x 1 x L tensor in R.
template <class T, class R>
std::vector<R> gather_tap(const T* w, const int64_t* ws, const ToeplitzShape& s, int64_t i) {
  std::vector<R> tap(s.G * s.L);
  for (int64_t g = 0; g < s.G; ++g)
    for (int64_t d = 0; d < s.L; ++d) tap[g * s.L + d] = R(kernels::to_float(w[g * ws[0] + i * ws[1] + d * ws[2]]));
  return tap;
}

}  // namespace

template <class T>
void toeplitz_forward_per_tap(const ToeplitzForwardParams<T>& p, const ParallelFor& pf, Algorithm algo) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const int64_t n = s.B * s.L * s.C;
  if (n == 0) return;
  const Contiguous strides(s);
  std::vector<R> shifted(n), tap_y(n), acc(n, R(0));
  ToeplitzForwardParams<R> q;
  q.shape = tap_shape(s);
  q.x = shifted.data();
  std::copy(strides.btc, strides.btc + 3, q.x_stride);
  std::copy(strides.gkn, strides.gkn + 3, q.w_stride);
  q.y = tap_y.data();
  for (int64_t i = 0; i < s.K; ++i) {
    const std::vector<R> tap = gather_tap<T, R>(p.weight, p.w_stride, s, i);
    q.weight = tap.data();
    shift_in_groups(p.x, p.x_stride, s, s.K - 1 - i, pf, shifted.data());
    toeplitz_forward(q, pf, algo);
    for_rows(s, pf, [&](int64_t, int64_t, int64_t r) {
      for (int64_t c = r * s.C; c < (r + 1) * s.C; ++c) acc[c] += tap_y[c];
    });
  }
  const int64_t cg = s.group_channels();
  for_rows(s, pf, [&](int64_t, int64_t t, int64_t r) {
    for (int64_t c = 0; c < s.C; ++c) {
      R v = acc[r * s.C + c];
      if (p.bias) v += R(kernels::to_float(p.bias[(c / cg) * p.bias_stride[0] + t * p.bias_stride[1]]));
      p.y[r * s.C + c] = kernels::from_float<T>(v);
    }
  });
}

template <class T>
void toeplitz_backward_per_tap(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf, Algorithm algo) {
  using R = kernels::compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const bool want_gx = p.grad_x != nullptr, want_gw = p.grad_weight != nullptr;
  const int64_t n = s.B * s.L * s.C;
  if (n == 0 || !(want_gx || want_gw)) return;
  const Contiguous strides(s);
  const ToeplitzShape one = tap_shape(s);
  std::vector<R> gy(n), shifted(want_gw ? n : 0), tap_gx(want_gx ? n : 0), gx(want_gx ? n : 0, R(0));
  std::vector<R> tap_gw(want_gw ? s.G * s.L : 0);
  shift_in_groups(p.grad_y, p.gy_stride, s, 0, pf, gy.data());  // grad_y in R, contiguous
  ToeplitzBackwardParams<R> q;
  q.shape = one;
  q.grad_y = gy.data();
  std::copy(strides.btc, strides.btc + 3, q.gy_stride);
  q.x = want_gw ? shifted.data() : gy.data();  // x is read only for grad_weight
  std::copy(strides.btc, strides.btc + 3, q.x_stride);
  std::copy(strides.gkn, strides.gkn + 3, q.w_stride);
  q.grad_x = want_gx ? tap_gx.data() : nullptr;
  q.grad_weight = want_gw ? tap_gw.data() : nullptr;
  for (int64_t i = 0; i < s.K; ++i) {
    const int64_t shift = s.K - 1 - i;
    const std::vector<R> tap = gather_tap<T, R>(p.weight, p.w_stride, s, i);
    q.weight = tap.data();
    if (want_gw) shift_in_groups(p.x, p.x_stride, s, shift, pf, shifted.data());
    toeplitz_backward(q, pf, algo);
    if (want_gx) add_unshifted(tap_gx.data(), s, shift, pf, gx.data());
    if (want_gw) {  // grad_weight[g, i, :] (G x K x N, contiguous): the tap's L taps, zero past L
      for (int64_t g = 0; g < s.G; ++g) {
        T* row = p.grad_weight + (g * s.K + i) * s.N;
        for (int64_t d = 0; d < s.N; ++d) row[d] = kernels::from_float<T>(d < s.L ? tap_gw[g * s.L + d] : R(0));
      }
    }
  }
  if (want_gx) {
    for_rows(s, pf, [&](int64_t, int64_t, int64_t r) {
      for (int64_t c = r * s.C; c < (r + 1) * s.C; ++c) p.grad_x[c] = kernels::from_float<T>(gx[c]);
    });
  }
}

#define TMM_INSTANTIATE(T)                                                                                     \
  template void toeplitz_forward_per_tap<T>(const ToeplitzForwardParams<T>&, const ParallelFor&, Algorithm);   \
  template void toeplitz_backward_per_tap<T>(const ToeplitzBackwardParams<T>&, const ParallelFor&, Algorithm);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(kernels::bf16_t)
TMM_INSTANTIATE(kernels::f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cpu
