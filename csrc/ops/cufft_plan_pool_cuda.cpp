// The cuFFT plan pool behind PlanLease (cufft_plan_pool_cuda.h).
#include "ops/cufft_plan_pool_cuda.h"

#include <list>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

namespace tmm::detail {
namespace {

using tmm::cuda::FftType;

const char* cufft_result_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "unknown cufftResult";
  }
}

const char* fft_type_name(FftType t) {
  switch (t) {
    case FftType::kR2C: return "R2C";
    case FftType::kC2R: return "C2R";
    case FftType::kD2Z: return "D2Z";
    case FftType::kZ2D: return "Z2D";
  }
  return "?";
}

// A bounded, thread-safe pool of cuFFT plans. A cuFFT plan must not be used
// by two threads at once, so a caller leases one (an idle plan with its key,
// else a new one) and returns it after enqueueing its transform; the pool
// keeps at most kCapacity idle plans and destroys the least recently used.
class PlanPool {
 public:
  static constexpr size_t kCapacity = 32;

  Plan acquire(const PlanKey& key) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if (it->key == key) {
          Plan plan = *it;
          idle_.erase(it);
          return plan;
        }
      }
    }
    return create(key);  // outside the lock: planning takes a while
  }

  void release(const Plan& plan) {
    std::vector<cufftHandle> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_front(plan);
      while (idle_.size() > kCapacity) {
        evicted.push_back(idle_.back().handle);
        idle_.pop_back();
      }
    }
    for (cufftHandle h : evicted) cufftDestroy(h);
  }

 private:
  static Plan create(const PlanKey& key) {
    Plan plan{key, 0, 0};
    cufft_check(cufftCreate(&plan.handle), "cufftCreate", key);
    try {
      // Work areas come from torch's caching allocator on every call.
      cufft_check(cufftSetAutoAllocation(plan.handle, 0), "cufftSetAutoAllocation", key);
      const bool to_freq = key.type == FftType::kR2C || key.type == FftType::kD2Z;
      long long n = key.n, half = key.n / 2 + 1;
      long long in_embed = to_freq ? n : half, out_embed = to_freq ? half : n;
      const cufftType type = key.type == FftType::kR2C   ? CUFFT_R2C
                             : key.type == FftType::kC2R ? CUFFT_C2R
                             : key.type == FftType::kD2Z ? CUFFT_D2Z
                                                         : CUFFT_Z2D;
      size_t work = 0;
      cufft_check(cufftMakePlanMany64(plan.handle, 1, &n, &in_embed, key.batch, 1, &out_embed, key.batch, 1, type,
                                      key.batch, &work),
                  "cufftMakePlanMany64", key);
      plan.work_bytes = work;
    } catch (...) {
      cufftDestroy(plan.handle);
      throw;
    }
    return plan;
  }

  std::mutex mu_;
  std::list<Plan> idle_;  // most recently released first
};

PlanPool& plan_pool() {
  static PlanPool* pool = new PlanPool();  // never destroyed: plans may outlive CUDA at exit
  return *pool;
}

}  // namespace

void cufft_check(cufftResult r, const char* call, const PlanKey& key) {
  TORCH_CHECK(r == CUFFT_SUCCESS, "causal_toeplitz: ", call, " failed with ", cufft_result_name(r), " (",
              int(r), ") for a ", fft_type_name(key.type), " transform of size ", key.n, " over ", key.batch,
              " columns on cuda:", key.device);
}

PlanLease::PlanLease(const PlanKey& key) : plan_(plan_pool().acquire(key)) {}
PlanLease::~PlanLease() { plan_pool().release(plan_); }

}  // namespace tmm::detail
