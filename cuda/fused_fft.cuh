/* Fused causal-Toeplitz convolution: one thread block per (batch b, tile of
 * channels), the whole transform -> product -> inverse transform on chip.
 *
 * A tile is `width` = 2P adjacent channels starting at first = t*step - halo
 * (halo = K-1, step = width - halo). Columns 2j and 2j+1 are packed into
 * complex lane j (real and imaginary part), so one complex FFT of size n
 * (a power of two >= 2L-1) transforms two real channels. The tile lives in
 * shared memory time-major: point t of lane j at buf[tile_slot(t, j)], about
 * t*P + j (rows permuted within aligned groups against bank conflicts).
 * Per block:
 *
 *   load      buf = x[b, t, first + m] for t < L, else 0
 *   fft       radix-8/4/2 Stockham stages, in place (read -> sync -> write)
 *   separate  for 0 < k < n/2:  X_{2j}[k]   = (Z[k] + conj Z[n-k]) / 2   -> row k
 *                               X_{2j+1}[k] = (Z[k] - conj Z[n-k]) / 2i  -> row n-k
 *             rows 0 and n/2 already hold (X_{2j}, X_{2j+1}) as (re, im)
 *   product   forward: Y_m = S * sum_{i >= i0} W[g,i] X_{m-halo+i}      (columns m >= halo)
 *             grad_x:  GX_m = S * sum_i conj(W[g,i]) GY_{m+halo-i}     (columns m < step)
 *             (same group only, S = 1/n), written over the column's own slot
 *   recombine Z[k] = Y_{2j}[k] + i Y_{2j+1}[k],  Z[n-k] = conj Y_{2j}[k] + i conj Y_{2j+1}[k]
 *   ifft, then y = buf + bias (or grad_x = buf) for t < L, written with =.
 *
 * The backward also writes, per (b, tile), the grad_weight partial spectra
 *   part[b, tile, g - glo, i, k] = sum_{owned c in g, c >= g*Cg+halo-i} GY_c[k] conj(X_{c-halo+i}[k])
 * with = (reduce_partials in toeplitz_driver.cuh sums them over b and tiles).
 *
 * Written against a Block: threads(), sync() and each(f), which runs
 * f(thread, registers) for the calling thread on the device (DeviceBlock in
 * device_block.cuh) and for every thread in turn on the host. Values that
 * live across a sync are kept in FusedRegs, so a sequential host run executes
 * exactly the device's phases.
 */
#pragma once

#include "common.cuh"
#include "params/toeplitz_params.h"

namespace tmm::cuda {

constexpr int kFusedPoints = 16;               // complex points per thread in a transform stage
constexpr int kFusedRegs = kFusedPoints + 2;   // spectral items per thread (n >= 16)
constexpr int kFusedMinN = 16;
constexpr int kFusedTilePoints = 8192;         // P * n of one tile buffer
constexpr int kFusedMaxN = kFusedTilePoints;   // transform sizes up to 8192: L <= 4096
constexpr int kFusedMaxThreads = kFusedTilePoints / kFusedPoints;  // 512
constexpr int kFusedMaxLanes = 16;

struct FusedRegs {
  Cx<float> v[kFusedRegs];
};

struct FusedGeometry {
  int n = 0, log_n = 0;          // transform size (power of two)
  int P = 0, log_p = 0;          // complex lanes of a tile
  int swizzle = 0;               // 16/P - 1: the row bits that tile_slot permutes
  int width = 0, log_width = 0;  // channels of a tile (2P)
  int halo = 0, step = 0;        // tile t starts at channel t*step - halo
  int threads = 0;               // P * n / kFusedPoints <= kFusedMaxThreads
  int64_t tiles = 0;             // ceil((C + halo) / step)
  int64_t half = 0;              // n/2 + 1
  int64_t maxg = 0;              // most groups whose outputs one tile owns
  int64_t smem_bytes = 0;
};

// The fused geometry of this shape with `buffers` tiles on chip (1: forward,
// 2: backward: 64 or 128 KiB of shared memory); false where the fused path
// does not apply (L > 4096, or K - 1 > P).
inline bool fused_geometry(const kernels::ToeplitzShape& s, int buffers, FusedGeometry& geo) {
  const int64_t n = next_pow2(2 * s.L - 1 > kFusedMinN ? 2 * s.L - 1 : kFusedMinN);
  if (n > kFusedMaxN || s.C <= 0 || s.L <= 0) return false;
  const int64_t P = kFusedTilePoints / n < kFusedMaxLanes ? kFusedTilePoints / n : kFusedMaxLanes;
  const int64_t halo = s.K - 1;
  if (halo > P) return false;  // at least half of a tile's columns are outputs
  geo.n = int(n);
  geo.log_n = ilog2(n);
  geo.P = int(P);
  geo.log_p = ilog2(P);
  geo.swizzle = int(kFusedMaxLanes / P) - 1;
  geo.width = int(2 * P);
  geo.log_width = geo.log_p + 1;
  geo.halo = int(halo);
  geo.step = int(2 * P - halo);
  geo.threads = int(P * n / kFusedPoints);
  geo.tiles = (s.C + halo + geo.step - 1) / geo.step;
  geo.half = n / 2 + 1;
  geo.smem_bytes = int64_t(buffers) * P * n * int64_t(sizeof(Cx<float>));
  const int64_t Cg = s.C / s.G;
  geo.maxg = 0;
  for (int64_t t = 0; t < geo.tiles; ++t) {
    const int64_t lo = t * geo.step, hi = lo + geo.step < s.C ? lo + geo.step : s.C;
    if (lo < hi && (hi - 1) / Cg - lo / Cg + 1 > geo.maxg) geo.maxg = (hi - 1) / Cg - lo / Cg + 1;
  }
  return s.B * geo.tiles <= int64_t(0x7fffffff);
}

// The shared-memory slot (complex index) of point `row` of lane `lane` in a
// tile buffer. Rows are permuted within aligned groups: row bits 0..b-1 are
// XORed with bits 3..3+b-1 (2^b = 16/P), so that a half-warp's 8-byte
// accesses to rows spaced 8 apart (the first radix-8 Stockham stage's
// writes, and the second's for P = 1) fall in 16 distinct bank pairs; rows
// read in order stay conflict-free. P = 16: the identity. (A bank model of
// every stage is checked in tests/cpp/cuda_host_check.cpp.)
TMM_HD int tile_slot(const FusedGeometry& geo, int row, int lane) {
  return ((row ^ ((row >> 3) & geo.swizzle)) << geo.log_p) + lane;
}

// The float slot of real channel m (lane m/2, real part for even m) of row t.
TMM_HD int tile_real_slot(const FusedGeometry& geo, int t, int m) { return 2 * tile_slot(geo, t, m >> 1) + (m & 1); }

// The rows that butterfly point r of stage item jj reads and writes in a
// radix-2^log_r Stockham stage after log_ns bits (see fft_stage).
TMM_HD int stage_read_row(int jj, int r, int log_nr) { return jj + (r << log_nr); }
TMM_HD int stage_write_row(int jj, int r, int log_ns, int log_r) {
  return ((jj >> log_ns) << (log_ns + log_r)) + (jj & ((1 << log_ns) - 1)) + (r << log_ns);
}

template <class T>
struct FusedForwardArgs {
  FusedGeometry geo;
  int64_t L, C, Cg, K, GK;
  const T* x;              // B x L x C, strided
  int64_t xs0, xs1, xs2;
  const Cx<float>* W;      // (n/2+1) x G*K weight spectra
  const T* bias;           // G x N or nullptr
  int64_t bs0, bs1;
  T* y;                    // B x L x C, contiguous (=)
  float scale;             // 1/n
};

template <class T>
struct FusedBackwardArgs {
  FusedGeometry geo;
  int64_t L, C, Cg, K, GK;
  const T* gy;             // B x L x C, strided
  int64_t gys0, gys1, gys2;
  const T* x;              // B x L x C, strided
  int64_t xs0, xs1, xs2;
  const Cx<float>* W;      // (n/2+1) x G*K weight spectra, or nullptr (no grad_x)
  T* gx;                   // B x L x C contiguous (=), or nullptr
  Cx<float>* part;         // (B*tiles*maxg*K) x (n/2+1) partial spectra (=), or nullptr
  float scale;             // 1/n
};

// ---------------------------------------------------------------- small DFTs
template <int kSign>
TMM_HD Cx<float> mul_i(Cx<float> a) {  // a * (kSign * i)
  return kSign < 0 ? Cx<float>{a.im, -a.re} : Cx<float>{-a.im, a.re};
}

template <int kSign>
TMM_HD void dft4(Cx<float>& a0, Cx<float>& a1, Cx<float>& a2, Cx<float>& a3) {
  const Cx<float> t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, t3 = mul_i<kSign>(a1 - a3);
  a0 = t0 + t2;
  a1 = t1 + t3;
  a2 = t0 - t2;
  a3 = t1 - t3;
}

// v[k] = sum_r v[r] exp(kSign * 2 pi i r k / R), in place, natural order.
template <int R, int kSign>
TMM_HD void dft(Cx<float>* v) {
  if constexpr (R == 2) {
    const Cx<float> t = v[0];
    v[0] = t + v[1];
    v[1] = t - v[1];
  } else if constexpr (R == 4) {
    dft4<kSign>(v[0], v[1], v[2], v[3]);
  } else {
    static_assert(R == 8, "radix 2, 4 or 8");
    Cx<float> e0 = v[0], e1 = v[2], e2 = v[4], e3 = v[6];
    Cx<float> o0 = v[1], o1 = v[3], o2 = v[5], o3 = v[7];
    dft4<kSign>(e0, e1, e2, e3);
    dft4<kSign>(o0, o1, o2, o3);
    const float h = 0.70710678118654752440f;
    const float s = kSign < 0 ? -1.f : 1.f;
    o1 = {h * (o1.re - s * o1.im), h * (o1.im + s * o1.re)};    // * exp(s i pi/4)
    o2 = mul_i<kSign>(o2);                                       // * exp(s i pi/2)
    o3 = {-h * (o3.re + s * o3.im), h * (s * o3.re - o3.im)};   // * exp(s 3i pi/4)
    v[0] = e0 + o0;
    v[4] = e0 - o0;
    v[1] = e1 + o1;
    v[5] = e1 - o1;
    v[2] = e2 + o2;
    v[6] = e2 - o2;
    v[3] = e3 + o3;
    v[7] = e3 - o3;
  }
}

// ---------------------------------------------------------------- transforms
// One radix-R Stockham stage over all P lanes (stride Ns = 2^log_ns so far):
// butterfly jj of lane j reads rows jj + r*n/R, twiddles by
// exp(kSign 2 pi i r (jj mod Ns) / (Ns R)) and writes rows
// (jj div Ns) * Ns * R + (jj mod Ns) + r * Ns.
template <int R, int kSign, class Block>
TMM_HD void fft_stage(Block& blk, Cx<float>* buf, const FusedGeometry& geo, int log_ns) {
  constexpr int kPer = kFusedPoints / R;
  constexpr int kLogR = R == 2 ? 1 : (R == 4 ? 2 : 3);
  const int T = blk.threads();
  const int ns = 1 << log_ns, log_nr = geo.log_n - kLogR, log_p = geo.log_p, pmask = geo.P - 1;
  const float inv_span = 1.f / float(ns * R);
  blk.each([&](int tid, FusedRegs& regs) {
TMM_UNROLL
    for (int q = 0; q < kPer; ++q) {
      const int u = tid + q * T;
      const int j = u & pmask, jj = u >> log_p;
      Cx<float>* v = regs.v + q * R;
TMM_UNROLL
      for (int r = 0; r < R; ++r) v[r] = buf[tile_slot(geo, stage_read_row(jj, r, log_nr), j)];
      if (ns > 1) {
        const Cx<float> w1 = cis_2pi<kSign>(float(jj & (ns - 1)) * inv_span);
        Cx<float> w = w1;
TMM_UNROLL
        for (int r = 1; r < R; ++r) {
          v[r] = v[r] * w;
          w = w * w1;
        }
      }
      dft<R, kSign>(v);
    }
  });
  blk.sync();
  blk.each([&](int tid, FusedRegs& regs) {
TMM_UNROLL
    for (int q = 0; q < kPer; ++q) {
      const int u = tid + q * T;
      const int j = u & pmask, jj = u >> log_p;
TMM_UNROLL
      for (int r = 0; r < R; ++r) buf[tile_slot(geo, stage_write_row(jj, r, log_ns, kLogR), j)] = regs.v[q * R + r];
    }
  });
  blk.sync();
}

// Unnormalised complex FFT (kSign -1) or inverse (+1) of every lane.
template <int kSign, class Block>
TMM_HD void fft_tile(Block& blk, Cx<float>* buf, const FusedGeometry& geo) {
  int log_ns = 0;
  while (geo.log_n - log_ns >= 3) {
    fft_stage<8, kSign>(blk, buf, geo, log_ns);
    log_ns += 3;
  }
  if (geo.log_n - log_ns == 2) {
    fft_stage<4, kSign>(blk, buf, geo, log_ns);
  } else if (geo.log_n - log_ns == 1) {
    fft_stage<2, kSign>(blk, buf, geo, log_ns);
  }
}

// Separates (kRecombine false) the two real spectra of every lane, or packs
// them back (true); see the top. Each item owns rows k and n-k of its lane.
template <bool kRecombine, class Block>
TMM_HD void split_pairs(Block& blk, Cx<float>* buf, const FusedGeometry& geo) {
  const int n = geo.n, items = (n / 2 - 1) * geo.P, log_p = geo.log_p, pmask = geo.P - 1;
  blk.each([&](int tid, FusedRegs&) {
    for (int it = tid; it < items; it += blk.threads()) {
      const int j = it & pmask, k = (it >> log_p) + 1;
      Cx<float>& zp = buf[tile_slot(geo, k, j)];
      Cx<float>& zq = buf[tile_slot(geo, n - k, j)];
      const Cx<float> a = zp, b = zq;
      if (!kRecombine) {
        zp = {0.5f * (a.re + b.re), 0.5f * (a.im - b.im)};
        zq = {0.5f * (a.im + b.im), 0.5f * (b.re - a.re)};
      } else {
        zp = {a.re - b.im, a.im + b.re};
        zq = {a.re + b.im, b.re - a.im};
      }
    }
  });
  blk.sync();
}

// Column m's separated spectrum at frequency k in [0, n/2].
TMM_HD Cx<float> read_sep(const Cx<float>* buf, const FusedGeometry& geo, int k, int m) {
  const int j = m >> 1, h = m & 1;
  if (k == 0 || k == geo.n / 2) {
    const Cx<float> z = buf[tile_slot(geo, k, j)];
    return {h ? z.im : z.re, 0.f};
  }
  return buf[tile_slot(geo, h ? geo.n - k : k, j)];
}

TMM_HD void write_sep(Cx<float>* buf, const FusedGeometry& geo, int k, int m, Cx<float> v) {
  const int j = m >> 1, h = m & 1;
  if (k == 0 || k == geo.n / 2) {
    reinterpret_cast<float*>(buf)[2 * tile_slot(geo, k, j) + h] = v.re;  // real at 0 and n/2
    return;
  }
  buf[tile_slot(geo, h ? geo.n - k : k, j)] = v;
}

// Replaces every column's separated spectrum, at every k in [0, n/2], by
// value(k, m), computed from the spectra before any is replaced.
template <class Block, class Value>
TMM_HD void spectral_product(Block& blk, Cx<float>* buf, const FusedGeometry& geo, Value&& value) {
  const int count = int(geo.half) * geo.width, T = blk.threads();
  const int log_w = geo.log_width, wmask = geo.width - 1;
  blk.each([&](int tid, FusedRegs& regs) {
TMM_UNROLL
    for (int q = 0; q < kFusedRegs; ++q) {
      const int it = tid + q * T;
      if (it < count) regs.v[q] = value(it >> log_w, it & wmask);
    }
  });
  blk.sync();
  blk.each([&](int tid, FusedRegs& regs) {
TMM_UNROLL
    for (int q = 0; q < kFusedRegs; ++q) {
      const int it = tid + q * T;
      if (it < count) write_sep(buf, geo, it >> log_w, it & wmask, regs.v[q]);
    }
  });
  blk.sync();
}

// buf (n x P complex = n x width reals, rows in tile_slot order) =
// src[b, t, first + m], zero outside t < L and 0 <= channel < C.
template <class T, class Block>
TMM_HD void load_tile(Block& blk, Cx<float>* buf, const FusedGeometry& geo, const T* src, int64_t s0,
                      int64_t s1, int64_t s2, int64_t b, int64_t first, int64_t L, int64_t C) {
  float* f = reinterpret_cast<float*>(buf);
  const int total = geo.n * geo.width, log_w = geo.log_width, wmask = geo.width - 1;
  blk.each([&](int tid, FusedRegs&) {
TMM_UNROLL_4
    for (int e = tid; e < total; e += blk.threads()) {
      const int t = e >> log_w, m = e & wmask;
      const int64_t c = first + m;
      float v = 0.f;
      if (t < L && c >= 0 && c < C) v = to_real(src[b * s0 + t * s1 + c * s2]);
      f[tile_real_slot(geo, t, m)] = v;
    }
  });
  blk.sync();
}

// ---------------------------------------------------------------- blocks
template <class T, class Block>
TMM_HD void fused_forward_block(Block& blk, const FusedForwardArgs<T>& a, int64_t block, Cx<float>* buf) {
  const FusedGeometry& geo = a.geo;
  const int64_t b = block / geo.tiles, tile = block - b * geo.tiles;
  const int64_t first = tile * geo.step - geo.halo;
  const int64_t halo = geo.halo;

  load_tile(blk, buf, geo, a.x, a.xs0, a.xs1, a.xs2, b, first, a.L, a.C);
  fft_tile<-1>(blk, buf, geo);
  split_pairs<false>(blk, buf, geo);
  spectral_product(blk, buf, geo, [&](int k, int m) -> Cx<float> {
    const int64_t c = first + m;
    if (m < halo || c < 0 || c >= a.C) return {0.f, 0.f};
    const int64_t g = c / a.Cg;
    const int64_t i0 = g * a.Cg - (c - halo) > 0 ? g * a.Cg - (c - halo) : 0;
    const Cx<float>* w = a.W + int64_t(k) * a.GK + g * a.K;
    Cx<float> acc{0.f, 0.f};
    for (int64_t i = i0; i < a.K; ++i) acc += w[i] * read_sep(buf, geo, k, int(m - halo + i));
    return acc * a.scale;
  });
  split_pairs<true>(blk, buf, geo);
  fft_tile<1>(blk, buf, geo);

  const float* f = reinterpret_cast<const float*>(buf);
  const int total = int(a.L) * geo.width, log_w = geo.log_width, wmask = geo.width - 1;
  blk.each([&](int tid, FusedRegs&) {
    for (int e = tid; e < total; e += blk.threads()) {
      const int t = e >> log_w, m = e & wmask;
      const int64_t c = first + m;
      if (m < halo || c < 0 || c >= a.C) continue;
      float v = f[tile_real_slot(geo, t, m)];
      if (a.bias != nullptr) v += to_real(a.bias[(c / a.Cg) * a.bs0 + t * a.bs1]);
      a.y[(b * a.L + t) * a.C + c] = from_real<T>(v);
    }
  });
}

template <class T, class Block>
TMM_HD void fused_backward_block(Block& blk, const FusedBackwardArgs<T>& a, int64_t block, Cx<float>* smem) {
  const FusedGeometry& geo = a.geo;
  const int64_t b = block / geo.tiles, tile = block - b * geo.tiles;
  const int64_t first = tile * geo.step - geo.halo;
  const int64_t halo = geo.halo, Cg = a.Cg, K = a.K;
  const bool want_gw = a.part != nullptr, want_gx = a.gx != nullptr;
  Cx<float>* gbuf = smem;
  Cx<float>* xbuf = smem + int64_t(geo.P) * geo.n;

  load_tile(blk, gbuf, geo, a.gy, a.gys0, a.gys1, a.gys2, b, first, a.L, a.C);
  fft_tile<-1>(blk, gbuf, geo);
  split_pairs<false>(blk, gbuf, geo);
  if (want_gw) {
    load_tile(blk, xbuf, geo, a.x, a.xs0, a.xs1, a.xs2, b, first, a.L, a.C);
    fft_tile<-1>(blk, xbuf, geo);
    split_pairs<false>(blk, xbuf, geo);

    // Partial spectra of the groups whose outputs [lo, hi) this tile owns.
    const int64_t lo = tile * geo.step, hi = lo + geo.step < a.C ? lo + geo.step : a.C;
    if (lo < hi) {
      const int64_t glo = lo / Cg, half = geo.half, rows = ((hi - 1) / Cg - glo + 1) * K;
      Cx<float>* out = a.part + (b * geo.tiles + tile) * geo.maxg * K * half;
      blk.each([&](int tid, FusedRegs&) {
        // Item (row, k) = (gl*K + i, k), stepped by the block's threads
        // without dividing per item (threads P*n/16 < 2*half: a step
        // crosses at most two rows).
        const int threads = blk.threads();
        int64_t row = tid / half, k = tid - row * half;
        int64_t gl = row / K, i = row - gl * K;
        while (row < rows) {
          const int64_t g = glo + gl;
          const int64_t c_lo = g * Cg + halo - i > lo ? g * Cg + halo - i : lo;
          const int64_t c_hi = (g + 1) * Cg < hi ? (g + 1) * Cg : hi;
          Cx<float> acc{0.f, 0.f};
          for (int64_t c = c_lo; c < c_hi; ++c) {
            const int m = int(c - first);
            acc += mul_conj(read_sep(gbuf, geo, int(k), m), read_sep(xbuf, geo, int(k), int(m - halo + i)));
          }
          out[row * half + k] = acc;
          for (k += threads; k >= half; k -= half) {
            ++row;
            if (++i == K) {
              i = 0;
              ++gl;
            }
          }
        }
      });
    }
  }
  if (!want_gx) return;

  spectral_product(blk, gbuf, geo, [&](int k, int m) -> Cx<float> {
    const int64_t c = first + m;
    if (m >= geo.step || c < 0 || c >= a.C) return {0.f, 0.f};
    const int64_t g = c / Cg, ghi = (g + 1) * Cg;
    const int64_t i0 = c + halo - ghi + 1 > 0 ? c + halo - ghi + 1 : 0;
    const Cx<float>* w = a.W + int64_t(k) * a.GK + g * K;
    Cx<float> acc{0.f, 0.f};
    for (int64_t i = i0; i < K; ++i) acc += conj_mul(w[i], read_sep(gbuf, geo, k, int(m + halo - i)));
    return acc * a.scale;
  });
  split_pairs<true>(blk, gbuf, geo);
  fft_tile<1>(blk, gbuf, geo);

  const float* f = reinterpret_cast<const float*>(gbuf);
  const int total = int(a.L) * geo.width, log_w = geo.log_width, wmask = geo.width - 1;
  blk.each([&](int tid, FusedRegs&) {
    for (int e = tid; e < total; e += blk.threads()) {
      const int t = e >> log_w, m = e & wmask;
      const int64_t c = first + m;
      if (m >= geo.step || c < 0 || c >= a.C) continue;
      a.gx[(b * a.L + t) * a.C + c] = from_real<T>(f[tile_real_slot(geo, t, m)]);
    }
  });
}

}  // namespace tmm::cuda
