// The cuFFT plan cache of the CUDA causal_toeplitz kernels (builds with
// TMM_WITH_CUDA, tmm/version.h; a CPU-only build declares nothing here).
//
// One process-wide cache for all devices (plans are keyed by device, type,
// size and batch), the counterpart of torch.backends.cuda.cufft_plan_cache:
//   - at most max_size() idle plans are kept, the least recently used are
//     destroyed beyond that; default 4096 (PyTorch's), or the environment
//     variable TMM_CUFFT_PLAN_CACHE_MAX_SIZE (a decimal integer >= 0, read
//     when the cache is first used);
//   - a plan used while a CUDA graph was being captured is pinned: it is
//     never destroyed (the graph replays its kernels), whatever the bound;
//   - plans are never created during a capture: run the op once eagerly with
//     the same shapes first (torch.compile's "reduce-overhead" mode does).
#pragma once

#include <cstdint>

#include <tmm/version.h>

#if TMM_WITH_CUDA
namespace tmm::cufft_plan_cache {

int64_t max_size();
// Throws (c10::Error) for a negative size; evicts idle plans beyond the new bound.
void set_max_size(int64_t max_size);
int64_t size();    // idle plans that may be evicted
int64_t pinned();  // idle plans pinned by graph captures
// Destroys every idle plan that is not pinned.
void clear();

}  // namespace tmm::cufft_plan_cache
#endif
