// The transform size of the CPU FFT path: the cheapest n >= 2L - 1 of the
// form 4 * 2^a * 3^b * 5^c (LaneFft's sizes whose first pass is the radix-4
// pass that skips the zero padding), by a cost model calibrated on measured
// times (fft_size.cpp). Compiled once (not per instruction-set variant), so
// every variant picks the same size and the results do not depend on the
// CPU's vector width beyond rounding. Deterministic: a static model, never a
// timing taken at run time, so one shape always gets one size.
#pragma once

#include <cstdint>

namespace tmm::cpu {

// Modelled time of a forward + inverse transform pair with the products in
// between at size n, per lane, in the model's units (infinity when n is not
// a valid size: a multiple of 4 with no prime factor above 5).
double fft_size_cost(int64_t n);

// The size the FFT path uses for a causal convolution of length L >= 1.
// The environment variable TMM_CPU_FFT_SIZE (read on every call, for
// benchmarks and tests) overrides the rule: "pow2" takes the smallest power
// of two (>= 4), the rule before mixed radix; an integer takes that size
// (std::invalid_argument unless it is a valid size >= 2L - 1); unset, empty
// or "auto" is the cost model.
int64_t causal_fft_size(int64_t L);

// The size in bytes below which LaneFft runs a block's remaining passes
// breadth first (larger blocks recurse depth first, one pass at a time).
// Only the order of the passes over memory depends on it, never a result.
// The default is half the core's L2 cache (256 KiB where the system does not
// report it); TMM_CPU_FFT_BLOCK_BYTES (read on every call) overrides it.
int64_t fft_block_bytes();

// The last-level cache's size (sysconf; 32 MiB where it is not reported):
// outputs larger than it are written past the caches (store_columns).
int64_t last_level_cache_bytes();

}  // namespace tmm::cpu
