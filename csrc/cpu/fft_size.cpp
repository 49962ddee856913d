// The choice of the CPU FFT path's transform size (fft_size.h).
#include "cpu/fft_size.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include <unistd.h>

namespace tmm::cpu {
namespace {

// Cost per row of one pass (forward and inverse together), relative to a
// radix-4 pass, and the fixed part per row: the pruned first radix-4 pass
// both ways, the products between them, the loads and stores, the weight's
// spectrum. Least-squares fit of the forward's time at 43 forced sizes from
// 512 to 10240 (scripts/bench_ops.py --floor --sizes default; B = 4,
// C = 256, one thread, Intel Xeon AVX-512: docs/benchmarks.md): time is
// nearly proportional to n (the fixed part dominates), so the model mostly
// takes the smallest size, and among sizes within a few percent the one
// with the cheaper passes. The fit gave the last radix-2 pass ~0 (noise);
// 0.3 keeps it between nothing and half a radix-4 pass.
constexpr double kFixed = 5.5;
constexpr double kRadix4 = 1.0;
constexpr double kRadix2 = 0.3;
constexpr double kRadix3 = 0.8;
constexpr double kRadix5 = 0.9;

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

double fft_size_cost(int64_t n) {
  if (n < 4 || n % 4) return std::numeric_limits<double>::infinity();
  int64_t rest = n / 4;
  int c2 = 0, c3 = 0, c5 = 0;
  while (rest % 2 == 0) rest /= 2, ++c2;
  while (rest % 3 == 0) rest /= 3, ++c3;
  while (rest % 5 == 0) rest /= 5, ++c5;
  if (rest != 1) return std::numeric_limits<double>::infinity();
  // The passes after the first: LaneFft's plan (radix 4 while it divides,
  // then 5, 3, and a last radix 2).
  const double per_row = kFixed + (c2 / 2) * kRadix4 + (c2 % 2) * kRadix2 + c3 * kRadix3 + c5 * kRadix5;
  return double(n) * per_row;
}

int64_t causal_fft_size(int64_t L) {
  const int64_t need = std::max<int64_t>(4, 2 * L - 1);
  const int64_t pow2 = pow2_at_least(need);
  const char* env = std::getenv("TMM_CPU_FFT_SIZE");
  if (env && *env && std::strcmp(env, "auto") != 0) {
    if (std::strcmp(env, "pow2") == 0) return pow2;
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(env, &end, 10);
    if (errno || end == env || *end || n < need || !(fft_size_cost(n) < std::numeric_limits<double>::infinity()))
      throw std::invalid_argument("TMM_CPU_FFT_SIZE=" + std::string(env) +
                                  ": expected auto, pow2 or a multiple of 4 with no prime factor above 5 "
                                  "and >= 2L - 1 = " + std::to_string(need));
    return n;
  }
  // Every 4 * 2^a 3^b 5^c in [need, pow2]; the power of two is one of them.
  int64_t best = pow2;
  double best_cost = fft_size_cost(pow2);
  for (int64_t p5 = 4; p5 <= pow2; p5 *= 5)
    for (int64_t p3 = p5; p3 <= pow2; p3 *= 3)
      for (int64_t n = p3; n <= pow2; n *= 2) {
        if (n < need) continue;
        const double c = fft_size_cost(n);
        if (c < best_cost || (c == best_cost && n < best)) best = n, best_cost = c;
      }
  return best;
}

int64_t fft_block_bytes() {
  const char* env = std::getenv("TMM_CPU_FFT_BLOCK_BYTES");
  if (env && *env) {
    const long long v = std::atoll(env);
    if (v > 0) return v;
  }
  // Half the core's L2, measured once (glibc reads it from cpuid): a block's
  // passes then run from L2 with room left for the twiddles and the row
  // spectra. Half of 2 MiB was 10-16% faster than 256 KiB at L = 4096 and
  // 65536 on an AVX-512 Xeon (docs/benchmarks.md); AMD's 512 KiB-1 MiB L2s
  // get 256-512 KiB. 256 KiB where the size is not reported.
  static const int64_t from_l2 = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? std::clamp<int64_t>(l2 / 2, 64 * 1024, 4 * 1024 * 1024) : int64_t(256 * 1024);
  }();
  return from_l2;
}

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? int64_t(l3) : int64_t(32) << 20;
  }();
  return bytes;
}

}  // namespace tmm::cpu
