// Building blocks of the CUDA causal-Toeplitz kernels: a complex type, the
// conversions between storage and compute types, and the transform sizes.
//
// Every function here is TMM_HD: __host__ __device__ under nvcc, plain inline
// under a host compiler. The kernels' per-element and per-block logic is
// written against these so that it can also be run, unchanged, on the host
// (a sequential check of the index math; see docs/cuda.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TMM_HD __host__ __device__ __forceinline__
#else
#define TMM_HD inline
#endif

// Loop unrolling in device code (host compilers do not know the pragma).
#if defined(__CUDA_ARCH__)
#define TMM_UNROLL _Pragma("unroll")
#define TMM_UNROLL_4 _Pragma("unroll 4")
#else
#define TMM_UNROLL
#define TMM_UNROLL_4
#endif

#include "params/half_types.h"

namespace tmm::cuda {

using kernels::bf16_t;
using kernels::f16_t;
using kernels::compute_t;  // float for float/bf16/fp16, double for double

// ---------------------------------------------------------------- complex
// Layout-compatible with cufftComplex (float2) and cufftDoubleComplex (double2).
template <class R>
struct alignas(2 * sizeof(R)) Cx {
  R re, im;
};

template <class R> TMM_HD Cx<R> operator+(Cx<R> a, Cx<R> b) { return {a.re + b.re, a.im + b.im}; }
template <class R> TMM_HD Cx<R> operator-(Cx<R> a, Cx<R> b) { return {a.re - b.re, a.im - b.im}; }
template <class R> TMM_HD Cx<R> operator*(Cx<R> a, Cx<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
template <class R> TMM_HD Cx<R> operator*(Cx<R> a, R s) { return {a.re * s, a.im * s}; }
template <class R> TMM_HD Cx<R>& operator+=(Cx<R>& a, Cx<R> b) { a.re += b.re; a.im += b.im; return a; }
// a * conj(b)
template <class R> TMM_HD Cx<R> mul_conj(Cx<R> a, Cx<R> b) {
  return {a.re * b.re + a.im * b.im, a.im * b.re - a.re * b.im};
}
// conj(a) * b
template <class R> TMM_HD Cx<R> conj_mul(Cx<R> a, Cx<R> b) { return mul_conj(b, a); }

// exp(sign * 2*pi*i * frac) for frac in [0, 1).
template <int kSign>
TMM_HD Cx<float> cis_2pi(float frac) {
  float s, c;
#if defined(__CUDA_ARCH__)
  sincospif(2.f * frac, &s, &c);
#else
  const double a = 2.0 * 3.14159265358979323846 * double(frac);
  s = float(std::sin(a));
  c = float(std::cos(a));
#endif
  return {c, kSign < 0 ? -s : s};
}

// ---------------------------------------------------------------- storage <-> compute
TMM_HD float to_real(float v) { return v; }
TMM_HD double to_real(double v) { return v; }
TMM_HD float to_real(bf16_t v) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(uint32_t(v.bits) << 16);
#else
  return kernels::to_float(v);
#endif
}
TMM_HD float to_real(f16_t v) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(v.bits));
#else
  return kernels::to_float(v);
#endif
}

// Rounds a compute value to the storage type (round to nearest even).
template <class T> struct StoreAs;
template <> struct StoreAs<float> {
  template <class R> static TMM_HD float from(R v) { return float(v); }
};
template <> struct StoreAs<double> {
  template <class R> static TMM_HD double from(R v) { return double(v); }
};
template <> struct StoreAs<bf16_t> {
  static TMM_HD bf16_t from(float v) {
#if defined(__CUDA_ARCH__)
    return {__bfloat16_as_ushort(__float2bfloat16_rn(v))};
#else
    return kernels::from_float<bf16_t>(v);
#endif
  }
};
template <> struct StoreAs<f16_t> {
  static TMM_HD f16_t from(float v) {
#if defined(__CUDA_ARCH__)
    return {__half_as_ushort(__float2half_rn(v))};
#else
    return kernels::from_float<f16_t>(v);
#endif
  }
};
template <class T, class R> TMM_HD T from_real(R v) { return StoreAs<T>::from(v); }

// ---------------------------------------------------------------- sizes
inline int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline int ilog2(int64_t pow2) {
  int l = 0;
  while ((int64_t(1) << l) < pow2) ++l;
  return l;
}

// The cuFFT path's transform size: the smallest even n >= 2L-1 of the form
// 2^a 3^b 5^c 7^d (the sizes cuFFT is fast at). n >= 2L-1 makes the circular
// convolution of the zero-padded sequences equal the causal one for t < L.
inline int64_t cufft_size(int64_t L) {
  const int64_t need = 2 * L - 1 > 2 ? 2 * L - 1 : 2;
  for (int64_t n = need + (need & 1);; n += 2) {
    int64_t m = n;
    for (int64_t f : {2, 3, 5, 7}) {
      while (m % f == 0) m /= f;
    }
    if (m == 1) return n;
  }
}

}  // namespace tmm::cuda
