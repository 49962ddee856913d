/* The order of work of the CUDA causal-Toeplitz ops, written once against an
 * executor: Exec provides alloc<U>(count), chunk_bytes() (the largest complex
 * buffer the cuFFT path should allocate), for_each(name, count, functor),
 * for_each_team(name, items, team, functor), transpose(name, rows, cols,
 * functor) (transpose.cuh), r2c/c2r<R>(n, batch, in, out),
 * fused_forward(args) and fused_backward(args). DeviceExec
 * (causal_toeplitz_kernels.cu) launches kernels and cuFFT on a stream; a host
 * executor can run the same sequence element by element.
 *
 * cuFFT path (n = cufft_size(L), batches in chunks of Bc, buffers time-major):
 *   forward   W = R2C(w);  per chunk: X = R2C(pad(x)); Y = S*W.X (taps, groups);
 *             y = crop(C2R(Y)) + bias                                   (y: =)
 *   backward  per chunk: GY = R2C(pad(grad_y));
 *               grad_weight: X = R2C(pad(x)); GW (=, then +=) sum_{bb,c} GY conj(X)
 *               grad_x:      GX = S*conj(W).GY; grad_x = crop(C2R(GX))     (grad_x: =)
 *             then grad_weight = S*crop(C2R(GW)), zero for L <= t < N      (grad_weight: =)
 * Fused path (float compute, short L): W = R2C(w) as above; one block per
 * (batch, channel tile) does the rest on chip (fused_fft.cuh); the backward's
 * per-tile grad_weight spectra are reduced over batch and tiles (two levels:
 * slices of terms, then the slices), then inverted like the cuFFT path's.
 */
#pragma once

#include <type_traits>

#include "common.cuh"
#include "fft_pointwise.cuh"
#include "fused_fft.cuh"
#include "toeplitz_cuda.h"
#include "transpose.cuh"

namespace tmm::cuda {

// Batches per chunk of the cuFFT path: one complex buffer stays <= budget.
inline int64_t batch_chunk(int64_t B, int64_t half, int64_t C, int64_t cplx_bytes, int64_t budget) {
  const int64_t per_batch = half * C * cplx_bytes;
  const int64_t chunk = budget / (per_batch > 0 ? per_batch : 1);
  return chunk < 1 ? 1 : (chunk > B ? B : chunk);
}

// Lanes that reduce one grad_weight frequency: about 8 terms each, up to a
// block of 256 (a power of two).
inline int reduce_team(int64_t Bc, int64_t Cg) {
  const int64_t per = Bc * Cg / 8;
  int team = 1;
  while (team < 256 && 2 * team <= per) team *= 2;
  return team;
}

// Terms per slice of the fused grad_weight reduction (ReducePartials): the
// power of two >= sqrt(terms), at least 16, so that both levels give each
// thread about sqrt(terms) additions.
inline int64_t partial_slice_terms(int64_t terms) {
  int64_t per = 16;
  while (per * per < terms) per *= 2;
  return per;
}

// The most terms of one grad_weight output of the fused backward: B times
// the most tiles that own channels of one group.
inline int64_t partial_terms(const ToeplitzShape& s, const FusedGeometry& geo) {
  const int64_t Cg = s.C / s.G;
  int64_t most = 0;
  for (int64_t g = 0; g < s.G; ++g) {
    const int64_t tiles = ((g + 1) * Cg - 1) / geo.step - g * Cg / geo.step + 1;
    most = tiles > most ? tiles : most;
  }
  return most * s.B;
}

// (n/2+1) x G*K spectra of the weight rows, cropped to L and zero-padded to n.
template <class R, class T, class Exec>
Cx<R>* weight_spectra(const T* w, const int64_t* ws, const ToeplitzShape& s, int64_t n, Exec& ex) {
  const int64_t GK = s.G * s.K, half = n / 2 + 1;
  R* real = ex.template alloc<R>(n * GK);
  ex.transpose("load_weights", GK, n, LoadWeights<T, R>{w, ws[0], ws[1], ws[2], real, s.K, GK, s.L});
  Cx<R>* spec = ex.template alloc<Cx<R>>(half * GK);
  ex.template r2c<R>(n, GK, real, spec);
  return spec;
}

// grad_weight (G x K x N, =) from its unnormalised spectra GW ((n/2+1) x G*K).
template <class R, class T, class Exec>
void store_weight_grad(Cx<R>* GW, const ToeplitzShape& s, int64_t n, T* gw, Exec& ex) {
  const int64_t GK = s.G * s.K;
  R* real = ex.template alloc<R>((n / 2 + 1) * GK * 2);  // C2R may need the complex footprint
  ex.template c2r<R>(n, GK, GW, real);
  ex.transpose("store_weight_grad", s.N, GK, StoreWeightGrad<T, R>{real, gw, GK, s.L, s.N, R(1) / R(n)});
}

// The fused backward's grad_weight spectra GW (half x G*K, =) from the
// per-(batch, tile) partials: ReducePartials, then SumPartialSlices.
template <class Exec>
Cx<float>* reduce_partials(const Cx<float>* part, const ToeplitzShape& s, const FusedGeometry& geo, Exec& ex) {
  const int64_t GK = s.G * s.K, half = geo.half;
  const int64_t terms = partial_terms(s, geo), per = partial_slice_terms(terms);
  const int64_t slices = (terms + per - 1) / per;
  Cx<float>* sums = ex.template alloc<Cx<float>>(slices * GK * half);
  ex.for_each("reduce_partials", slices * GK * half,
              ReducePartials{part, sums, s.B, geo.tiles, geo.maxg, geo.step, s.C / s.G, s.K, GK, half, per});
  Cx<float>* GW = ex.template alloc<Cx<float>>(half * GK);
  ex.transpose("sum_partial_slices", GK, half, SumPartialSlices{sums, GW, slices, GK, half});
  return GW;
}

template <class T, class Exec>
void run_forward(const ToeplitzForwardParams<T>& p, Exec& ex, Algorithm path) {
  using R = compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const int64_t Cg = s.C / s.G, GK = s.G * s.K;

  if constexpr (std::is_same_v<R, float>) {
    FusedGeometry geo;
    if (path == Algorithm::kFused && fused_geometry(s, 1, geo)) {
      const Cx<float>* W = weight_spectra<float>(p.weight, p.w_stride, s, geo.n, ex);
      FusedForwardArgs<T> a{geo, s.L, s.C, Cg, s.K, GK,
                            p.x, p.x_stride[0], p.x_stride[1], p.x_stride[2],
                            W, p.bias, p.bias_stride[0], p.bias_stride[1], p.y,
                            1.f / float(geo.n)};
      ex.fused_forward(a, s.B);
      return;
    }
  }

  const int64_t n = cufft_size(s.L), half = n / 2 + 1;
  const Cx<R>* W = weight_spectra<R>(p.weight, p.w_stride, s, n, ex);
  const int64_t Bc = batch_chunk(s.B, half, s.C, sizeof(Cx<R>), ex.chunk_bytes());
  Cx<R>* bufA = ex.template alloc<Cx<R>>(half * Bc * s.C);  // padded x, then Y
  Cx<R>* bufB = ex.template alloc<Cx<R>>(half * Bc * s.C);  // X, then y samples
  for (int64_t b0 = 0; b0 < s.B; b0 += Bc) {
    const int64_t bc = Bc < s.B - b0 ? Bc : s.B - b0, cols = bc * s.C;
    R* realA = reinterpret_cast<R*>(bufA);
    R* realB = reinterpret_cast<R*>(bufB);
    ex.for_each("load_columns", n * cols,
                LoadColumns<T, R>{p.x, p.x_stride[0], p.x_stride[1], p.x_stride[2], realA, b0, bc, s.L, s.C});
    ex.template r2c<R>(n, cols, realA, bufB);
    ex.for_each("forward_product", half * s.C,
                ForwardProduct<R>{bufB, W, bufA, bc, s.C, Cg, s.K, GK, R(1) / R(n)});
    ex.template c2r<R>(n, cols, bufA, realB);
    ex.for_each("store_y", bc * s.L * s.C,
                StoreColumns<T, R>{realB, p.bias, p.bias_stride[0], p.bias_stride[1], p.y, b0, bc, s.L, s.C, Cg});
  }
}

template <class T, class Exec>
void run_backward(const ToeplitzBackwardParams<T>& p, Exec& ex, Algorithm path) {
  using R = compute_t<T>;
  const ToeplitzShape& s = p.shape;
  const int64_t Cg = s.C / s.G, GK = s.G * s.K;
  const bool want_gx = p.grad_x != nullptr, want_gw = p.grad_weight != nullptr;
  if (!want_gx && !want_gw) return;

  if constexpr (std::is_same_v<R, float>) {
    FusedGeometry geo;
    if (path == Algorithm::kFused && fused_geometry(s, 2, geo)) {
      const Cx<float>* W = want_gx ? weight_spectra<float>(p.weight, p.w_stride, s, geo.n, ex) : nullptr;
      Cx<float>* part = want_gw ? ex.template alloc<Cx<float>>(s.B * geo.tiles * geo.maxg * s.K * geo.half)
                                : nullptr;
      FusedBackwardArgs<T> a{geo, s.L, s.C, Cg, s.K, GK,
                             p.grad_y, p.gy_stride[0], p.gy_stride[1], p.gy_stride[2],
                             p.x, p.x_stride[0], p.x_stride[1], p.x_stride[2],
                             W, p.grad_x, part, 1.f / float(geo.n)};
      ex.fused_backward(a, s.B);
      if (want_gw) store_weight_grad<float>(reduce_partials(part, s, geo, ex), s, geo.n, p.grad_weight, ex);
      return;
    }
  }

  const int64_t n = cufft_size(s.L), half = n / 2 + 1;
  const Cx<R>* W = want_gx ? weight_spectra<R>(p.weight, p.w_stride, s, n, ex) : nullptr;
  Cx<R>* GW = want_gw ? ex.template alloc<Cx<R>>(half * GK) : nullptr;
  const int64_t Bc = batch_chunk(s.B, half, s.C, sizeof(Cx<R>), ex.chunk_bytes());
  const int team = reduce_team(Bc, Cg);
  Cx<R>* bufA = ex.template alloc<Cx<R>>(half * Bc * s.C);  // padded inputs, then grad_x samples
  Cx<R>* bufG = ex.template alloc<Cx<R>>(half * Bc * s.C);  // GY
  Cx<R>* bufX = ex.template alloc<Cx<R>>(half * Bc * s.C);  // X, then GX
  R* realA = reinterpret_cast<R*>(bufA);
  for (int64_t b0 = 0; b0 < s.B; b0 += Bc) {
    const int64_t bc = Bc < s.B - b0 ? Bc : s.B - b0, cols = bc * s.C;
    ex.for_each("load_columns", n * cols,
                LoadColumns<T, R>{p.grad_y, p.gy_stride[0], p.gy_stride[1], p.gy_stride[2], realA, b0, bc, s.L, s.C});
    ex.template r2c<R>(n, cols, realA, bufG);
    if (want_gw) {
      ex.for_each("load_columns", n * cols,
                  LoadColumns<T, R>{p.x, p.x_stride[0], p.x_stride[1], p.x_stride[2], realA, b0, bc, s.L, s.C});
      ex.template r2c<R>(n, cols, realA, bufX);
      ex.for_each_team("grad_weight_reduce", half * GK, team,
                       GradWeightPartial<R>{bufG, bufX, GW, bc, s.C, Cg, s.K, GK, b0 > 0});
    }
    if (want_gx) {
      ex.for_each("grad_x_product", half * s.C,
                  GradXProduct<R>{bufG, W, bufX, bc, s.C, Cg, s.K, GK, R(1) / R(n)});
      ex.template c2r<R>(n, cols, bufX, realA);
      ex.for_each("store_grad_x", bc * s.L * s.C,
                  StoreColumns<T, R>{realA, nullptr, 0, 0, p.grad_x, b0, bc, s.L, s.C, Cg});
    }
  }
  if (want_gw) store_weight_grad<R>(GW, s, n, p.grad_weight, ex);
}

}  // namespace tmm::cuda
