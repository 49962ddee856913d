// cuFFT plans for the CUDA glue: a bounded pool shared by all threads, each
// plan leased to one caller at a time (a plan must not be used by two threads
// at once). Plans are made without work areas: the caller sets one per call.
// The policy (bound, eviction, plans pinned by CUDA graph captures) is
// cuda/plan_cache.h; the public controls are tmm/cufft_plan_cache.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include <cufft.h>

#include "cuda/plan_cache.h"
#include "cuda/toeplitz_cuda.h"

namespace tmm::detail {

// One plan's identity: batched 1-D transforms of size n over `batch`
// interleaved columns (istride = ostride = batch, idist = odist = 1).
struct PlanKey {
  int device;
  tmm::cuda::FftType type;
  int64_t n, batch;
  bool operator==(const PlanKey& o) const {
    return device == o.device && type == o.type && n == o.n && batch == o.batch;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = std::hash<int64_t>()(k.n);
    for (int64_t v : {int64_t(k.batch), int64_t(k.device), int64_t(k.type)}) {
      h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return h;
  }
};

using Plan = tmm::cuda::PlanCache<PlanKey, cufftHandle, PlanKeyHash>::Entry;

// Raises a c10::Error naming the call, the result and the transform unless r
// is CUFFT_SUCCESS.
void cufft_check(cufftResult r, const char* call, const PlanKey& key);

// A plan with `key` for the lifetime of the lease (an idle one from the pool,
// else a new one), back to the pool afterwards. `capturing`: the caller's
// stream is capturing a CUDA graph: the plan is pinned for the process
// lifetime, and one must already exist (cuFFT cannot plan during a capture:
// a clear error asks for an eager warm-up call).
class PlanLease {
 public:
  PlanLease(const PlanKey& key, bool capturing);
  ~PlanLease();
  PlanLease(const PlanLease&) = delete;
  PlanLease& operator=(const PlanLease&) = delete;
  const Plan& plan() const { return plan_; }

 private:
  Plan plan_;
  bool capturing_;
};

}  // namespace tmm::detail
