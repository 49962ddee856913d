/* Per-element work of the cuFFT path, as functors (plain params structs with
 * the math in operator()); the kernels that run them are in
 * causal_toeplitz_kernels.cu.
 *
 * Buffers are time-major: a real buffer holds sample t of column j at
 * t * cols + j, a spectrum holds frequency k (0 <= k <= n/2) of column j at
 * k * cols + j. Data columns are j = bb * C + c for the batches bb of one
 * chunk; weight columns r = g * K + i. With halo = K - 1, Cg = C / G,
 * g = c / Cg, and S = 1/n:
 *
 *   forward      Y[k,bb,c]  = S * sum_{i >= i0(c)} W[k,g,i] X[k,bb,c-halo+i]
 *                             i0(c) = max(0, g*Cg - (c - halo))
 *   grad_x       GX[k,bb,c] = S * sum_{i : c+halo-i < (g+1)*Cg} conj(W[k,g,i]) GY[k,bb,c+halo-i]
 *   grad_weight  GW[k,g,i] (=, or += after the first chunk)
 *                           = sum_bb sum_{c in g, c >= g*Cg+halo-i} GY[k,bb,c] conj(X[k,bb,c-halo+i])
 *
 * and an inverse transform (plus the crop t < L, the bias for y, S for the
 * weight gradient) turns each back into samples. Every functor writes its
 * output with = except GradWeightPartial with accumulate set (+=).
 *
 * Elementwise functors have operator()(e); those that move data between the
 * weight's row-major G x K x N layout and the time-major buffers are
 * transposes (load(a, b) / store(a, b, v), run by transpose.cuh), so that
 * both sides are read and written along consecutive addresses.
 */
#pragma once

#include "common.cuh"

namespace tmm::cuda {

// dst (n x Bc*C, time-major) = x[b0+bb, t, c] for t < L, 0 for L <= t < n.
// Elements e = t * (Bc*C) + bb * C + c (reads and writes along c).
template <class T, class R>
struct LoadColumns {
  const T* x;  // B x L x C, strided
  int64_t xs0, xs1, xs2;
  R* dst;      // n x Bc*C
  int64_t b0, Bc, L, C;

  template <class I>
  TMM_HD void operator()(I e) const {
    const I cols = I(Bc * C);
    const I t = e / cols, j = e - t * cols;
    const I bb = j / I(C), c = j - bb * I(C);
    R v = R(0);
    if (int64_t(t) < L) v = R(to_real(x[(b0 + int64_t(bb)) * xs0 + int64_t(t) * xs1 + int64_t(c) * xs2]));
    dst[e] = v;
  }
};

// dst (n x G*K, time-major) = w[g, i, t] for t < L, 0 for L <= t < n: a
// transpose (transpose.cuh) of M[r, t] (rows G*K, cols n), read along t
// (contiguous in a contiguous weight), written along r.
template <class T, class R>
struct LoadWeights {
  using Value = R;
  const T* w;  // G x K x N, strided
  int64_t ws0, ws1, ws2;
  R* dst;      // n x G*K
  int64_t K, GK, L;

  TMM_HD R load(int64_t r, int64_t t) const {
    if (t >= L) return R(0);
    const int64_t g = r / K, i = r - g * K;
    return R(to_real(w[g * ws0 + i * ws1 + t * ws2]));
  }
  TMM_HD void store(int64_t r, int64_t t, R v) const { dst[t * GK + r] = v; }
};

// Y = S * sum_i W X (see the top). Elements e = k * C + c; loops over bb.
template <class R>
struct ForwardProduct {
  const Cx<R>* X;  // (n/2+1) x Bc*C
  const Cx<R>* W;  // (n/2+1) x G*K
  Cx<R>* Y;        // (n/2+1) x Bc*C
  int64_t Bc, C, Cg, K, GK;
  R scale;

  template <class I>
  TMM_HD void operator()(I e) const {
    const I k = e / I(C);
    const int64_t c = int64_t(e - k * I(C)), halo = K - 1;
    const int64_t g = c / Cg;
    const int64_t i0 = g * Cg - (c - halo) > 0 ? g * Cg - (c - halo) : 0;
    const Cx<R>* w = W + int64_t(k) * GK + g * K;
    for (int64_t bb = 0; bb < Bc; ++bb) {
      const int64_t row = (int64_t(k) * Bc + bb) * C;
      const Cx<R>* x = X + row + c - halo;
      Cx<R> acc{R(0), R(0)};
      for (int64_t i = i0; i < K; ++i) acc += w[i] * x[i];
      Y[row + c] = acc * scale;
    }
  }
};

// GX = S * sum_i conj(W) GY (see the top). Elements e = k * C + c; loops over bb.
template <class R>
struct GradXProduct {
  const Cx<R>* GY;  // (n/2+1) x Bc*C
  const Cx<R>* W;   // (n/2+1) x G*K
  Cx<R>* GX;        // (n/2+1) x Bc*C
  int64_t Bc, C, Cg, K, GK;
  R scale;

  template <class I>
  TMM_HD void operator()(I e) const {
    const I k = e / I(C);
    const int64_t c = int64_t(e - k * I(C)), halo = K - 1;
    const int64_t g = c / Cg, hi = (g + 1) * Cg;  // outputs o = c+halo-i must stay below hi
    const int64_t i0 = c + halo - hi + 1 > 0 ? c + halo - hi + 1 : 0;
    const Cx<R>* w = W + int64_t(k) * GK + g * K;
    for (int64_t bb = 0; bb < Bc; ++bb) {
      const int64_t row = (int64_t(k) * Bc + bb) * C;
      const Cx<R>* gy = GY + row + c + halo;
      Cx<R> acc{R(0), R(0)};
      for (int64_t i = i0; i < K; ++i) acc += conj_mul(w[i], gy[-i]);
      GX[row + c] = acc * scale;
    }
  }
};

// GW[k, r] (=, or += when accumulate) = sum over bb and the group's channels
// (see the top). Reduced by a team of `team` lanes per item (k, r), item =
// k * GK + r: partial() is one lane's share, write() stores the team's sum.
template <class R>
struct GradWeightPartial {
  using Real = R;
  const Cx<R>* GY;  // (n/2+1) x Bc*C
  const Cx<R>* X;   // (n/2+1) x Bc*C
  Cx<R>* GW;        // (n/2+1) x G*K
  int64_t Bc, C, Cg, K, GK;
  bool accumulate;

  TMM_HD Cx<R> partial(int64_t item, int lane, int team) const {
    const int64_t k = item / GK, r = item - k * GK;
    const int64_t g = r / K, i = r - g * K, halo = K - 1;
    const int64_t c0 = g * Cg + halo - i, nc = (g + 1) * Cg - c0;  // nc >= 1 as K <= Cg
    const Cx<R>* gy = GY + k * Bc * C + c0;
    const Cx<R>* x = X + k * Bc * C + c0 - halo + i;
    // Lane walks j = bb * nc + cc in steps of `team` without dividing per step.
    int64_t bb = lane / nc, cc = lane - (lane / nc) * nc;
    const int64_t dbb = team / nc, dcc = team - dbb * nc;
    Cx<R> acc{R(0), R(0)};
    while (bb < Bc) {
      const int64_t at = bb * C + cc;
      acc += mul_conj(gy[at], x[at]);
      bb += dbb;
      cc += dcc;
      if (cc >= nc) {
        cc -= nc;
        ++bb;
      }
    }
    return acc;
  }
  TMM_HD void write(int64_t item, Cx<R> sum) const {
    GW[item] = accumulate ? GW[item] + sum : sum;
  }
};

// out[b0+bb, t, c] (contiguous B x L x C) = src[t, bb*C + c] + bias[g, t].
// Elements e = (bb * L + t) * C + c.
template <class T, class R>
struct StoreColumns {
  const R* src;     // n x Bc*C
  const T* bias;    // G x N or nullptr
  int64_t bs0, bs1;
  T* out;           // B x L x C, contiguous
  int64_t b0, Bc, L, C, Cg;

  template <class I>
  TMM_HD void operator()(I e) const {
    const I c = e % I(C), bt = e / I(C);
    const I bb = bt / I(L), t = bt - bb * I(L);
    R v = src[int64_t(t) * Bc * C + int64_t(bb) * C + int64_t(c)];
    if (bias != nullptr) v += R(to_real(bias[(int64_t(c) / Cg) * bs0 + int64_t(t) * bs1]));
    out[b0 * L * C + int64_t(e)] = from_real<T>(v);
  }
};

// gw[r, t] (contiguous G x K x N) = scale * src[t, r] for t < L, 0 for t >= L:
// a transpose (transpose.cuh) of M[t, r] (rows N, cols G*K), read along r,
// written along t.
template <class T, class R>
struct StoreWeightGrad {
  using Value = R;
  const R* src;  // n x G*K
  T* gw;         // G x K x N, contiguous
  int64_t GK, L, N;
  R scale;

  TMM_HD R load(int64_t t, int64_t r) const { return t < L ? src[t * GK + r] * scale : R(0); }
  TMM_HD void store(int64_t t, int64_t r, R v) const { gw[r * N + t] = from_real<T>(v); }
};

// The fused backward's grad_weight, summed over batches and tiles in two
// levels so that many threads share one output, in a fixed order (results
// do not depend on scheduling).
//
// A tile t owns the outputs of channels [t*step, t*step + step); its partial
// rows are those of its groups, glo(t) = t*step / Cg upwards:
//   row(b, t, g, i) = ((b*tiles + t)*maxg + g - glo(t))*K + i.
// The terms of output (r = g*K + i, k) are numbered j = (t - t_lo(g))*B + b
// for the tiles t_lo(g) = g*Cg/step .. t_hi(g) = ((g+1)*Cg - 1)/step.
//
// Level 1: slices[s, r, k] = sum_{j in [s*per, (s+1)*per)} part[row(j), k]   (=)
// Elements e = (s*GK + r)*half + k: reads and writes along k; along j a
// pointer step per batch, one division per tile.
struct ReducePartials {
  const Cx<float>* part;  // (B*tiles*maxg*K) x half
  Cx<float>* slices;      // S x G*K x half
  int64_t B, tiles, maxg, step, Cg, K, GK, half, per;

  TMM_HD int64_t row(int64_t b, int64_t t, int64_t g, int64_t i) const {
    return ((b * tiles + t) * maxg + g - t * step / Cg) * K + i;
  }

  template <class I>
  TMM_HD void operator()(I e) const {
    const I rs = e / I(half), k = e - rs * I(half);
    const I s = rs / I(GK), r = rs - s * I(GK);
    const int64_t g = int64_t(r) / K, i = int64_t(r) - g * K;
    const int64_t t_lo = g * Cg / step, terms = (((g + 1) * Cg - 1) / step - t_lo + 1) * B;
    const int64_t j0 = int64_t(s) * per, j1 = j0 + per < terms ? j0 + per : terms;
    Cx<float> acc{0.f, 0.f};
    int64_t t = t_lo + j0 / B, b = j0 % B;
    const int64_t batch_step = tiles * maxg * K * half;
    const Cx<float>* p = j0 < j1 ? part + row(b, t, g, i) * half + int64_t(k) : part;
    for (int64_t j = j0; j < j1; ++j) {
      acc += *p;
      if (++b < B) {
        p += batch_step;
      } else if (j + 1 < j1) {
        b = 0;
        ++t;
        p = part + row(0, t, g, i) * half + int64_t(k);
      }
    }
    slices[e] = acc;
  }
};

// Level 2: GW[k, r] = sum_{s = 0..S-1} slices[s, r, k] (=): a transpose
// (transpose.cuh) of M[r, k] (rows G*K, cols half), read along k, written
// along r.
struct SumPartialSlices {
  using Value = Cx<float>;
  const Cx<float>* slices;  // S x G*K x half
  Cx<float>* GW;            // half x G*K
  int64_t S, GK, half;

  TMM_HD Value load(int64_t r, int64_t k) const {
    Cx<float> acc{0.f, 0.f};
    for (int64_t s = 0; s < S; ++s) acc += slices[(s * GK + r) * half + k];
    return acc;
  }
  TMM_HD void store(int64_t r, int64_t k, Value v) const { GW[k * GK + r] = v; }
};

}  // namespace tmm::cuda
