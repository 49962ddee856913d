// cuFFT plans for the CUDA glue: a bounded pool shared by all threads, each
// plan leased to one caller at a time (a plan must not be used by two threads
// at once). Plans are made without work areas: the caller sets one per call.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cufft.h>

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

struct Plan {
  PlanKey key;
  cufftHandle handle;
  size_t work_bytes;
};

// Raises a c10::Error naming the call, the result and the transform unless r
// is CUFFT_SUCCESS.
void cufft_check(cufftResult r, const char* call, const PlanKey& key);

// A plan with `key` for the lifetime of the lease (an idle one from the pool,
// else a new one), back to the pool afterwards.
class PlanLease {
 public:
  explicit PlanLease(const PlanKey& key);
  ~PlanLease();
  PlanLease(const PlanLease&) = delete;
  PlanLease& operator=(const PlanLease&) = delete;
  const Plan& plan() const { return plan_; }

 private:
  Plan plan_;
};

}  // namespace tmm::detail
