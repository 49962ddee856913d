// 16-bit float storage types for the torch-free kernels, with the
// conversions the CPU kernels need (bit-compatible with c10::BFloat16 and
// c10::Half, round-to-nearest-even).
#pragma once

#include <cstdint>
#include <cstring>

namespace tmm::kernels {

struct bf16_t { uint16_t bits; };
struct f16_t { uint16_t bits; };

inline float to_float(float v) { return v; }
inline double to_float(double v) { return v; }

inline float to_float(bf16_t v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float to_float(f16_t v) {
  const uint32_t sign = uint32_t(v.bits & 0x8000u) << 16;
  uint32_t exp = (v.bits >> 10) & 0x1fu, man = v.bits & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf / nan
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do { ++e; man <<= 1; } while (!(man & 0x400u));
    u = sign | uint32_t(112 - e) << 23 | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <class T> T from_float(float v);
template <class T> T from_float(double v) { return from_float<T>(float(v)); }
template <> inline float from_float<float>(float v) { return v; }
template <> inline double from_float<double>(double v) { return v; }
template <> inline double from_float<double>(float v) { return v; }

template <> inline bf16_t from_float<bf16_t>(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x40u)};  // quiet nan
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}

template <> inline f16_t from_float<f16_t>(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return {uint16_t(sign | 0x7e00u)};        // nan
  if (u >= 0x477ff000u) return {uint16_t(sign | 0x7c00u)};       // overflow -> inf
  if (u < 0x38800000u) {                                         // subnormal or zero
    if (u < 0x33000000u) return {sign};
    const uint32_t man = (u & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(u >> 23);                        // 14..24
    uint32_t half = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return {uint16_t(sign | half)};
  }
  u += 0xfffu + ((u >> 13) & 1u) - (112u << 23);
  return {uint16_t(sign | (u >> 13))};
}

// The type the kernels compute in: double for double, float otherwise.
template <class T> struct compute_type { using type = float; };
template <> struct compute_type<double> { using type = double; };
template <class T> using compute_t = typename compute_type<T>::type;

}  // namespace tmm::kernels
