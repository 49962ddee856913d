// The cuFFT plan pool behind PlanLease (cufft_plan_pool_cuda.h) and the
// public controls of tmm/cufft_plan_cache.h.
#include "ops/cufft_plan_pool_cuda.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

#include "tmm/cufft_plan_cache.h"

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

// The process-wide pool: the policy of cuda/plan_cache.h behind a mutex,
// plans created and destroyed outside it (planning takes a while).
class PlanPool {
 public:
  PlanPool() : cache_(initial_max_size()) {}

  Plan acquire(const PlanKey& key, bool capturing) {
    Plan plan{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cache_.take(key, plan)) return plan;
    }
    TORCH_CHECK(!capturing, "causal_toeplitz: no cuFFT plan for a ", fft_type_name(key.type),
                " transform of size ", key.n, " over ", key.batch, " columns on cuda:", key.device,
                " exists yet, and plans cannot be made while a CUDA graph is being captured; run the op once "
                "with the same shapes before capturing (a warm-up call)");
    return create(key);
  }

  void release(const Plan& plan, bool capturing) {
    std::vector<cufftHandle> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cache_.give_back(plan, capturing, evicted);
    }
    destroy(evicted);
  }

  int64_t max_size() {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(cache_.max_size());
  }
  void set_max_size(size_t n) {
    std::vector<cufftHandle> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cache_.set_max_size(n, evicted);
    }
    destroy(evicted);
  }
  int64_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(cache_.idle());
  }
  int64_t pinned() {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(cache_.pinned_idle());
  }
  void clear() {
    std::vector<cufftHandle> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cache_.clear(evicted);
    }
    destroy(evicted);
  }

 private:
  static size_t initial_max_size() {
    const char* env = std::getenv("TMM_CUFFT_PLAN_CACHE_MAX_SIZE");
    if (env == nullptr) return tmm::cuda::kDefaultPlanCacheMaxSize;
    size_t n = 0;
    TORCH_CHECK(tmm::cuda::parse_plan_cache_size(env, n),
                "causal_toeplitz: TMM_CUFFT_PLAN_CACHE_MAX_SIZE must be a non-negative integer "
                "(the most idle cuFFT plans kept), got '", env, "'");
    return n;
  }

  static void destroy(const std::vector<cufftHandle>& handles) {
    for (cufftHandle h : handles) cufftDestroy(h);
  }

  static Plan create(const PlanKey& key) {
    Plan plan{key, 0, 0, false};
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
  tmm::cuda::PlanCache<PlanKey, cufftHandle, PlanKeyHash> cache_;
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

PlanLease::PlanLease(const PlanKey& key, bool capturing)
    : plan_(plan_pool().acquire(key, capturing)), capturing_(capturing) {}
PlanLease::~PlanLease() { plan_pool().release(plan_, capturing_); }

}  // namespace tmm::detail

namespace tmm::cufft_plan_cache {

int64_t max_size() { return detail::plan_pool().max_size(); }
void set_max_size(int64_t max_size) {
  TORCH_CHECK(max_size >= 0, "tmm::cufft_plan_cache::set_max_size: expected max_size >= 0, got ", max_size);
  detail::plan_pool().set_max_size(size_t(max_size));
}
int64_t size() { return detail::plan_pool().size(); }
int64_t pinned() { return detail::plan_pool().pinned(); }
void clear() { detail::plan_pool().clear(); }

}  // namespace tmm::cufft_plan_cache
