// CUDA glue: validates, allocates, maps torch dtypes onto the kernels'
// storage types and runs the torch-free CUDA kernels (cuda/) on the current
// stream of the tensors' device. Scratch memory and cuFFT work areas come
// from torch's caching allocator; cuFFT plans from a bounded pool shared by
// all threads, each plan leased to one caller at a time.
//
// TMM_CUDA_ALGORITHM=auto|cufft|fused (read on every call) forces a path,
// for tests and for measuring the crossover; fused falls back to cuFFT where
// it does not apply (double, long L, wide taps).
#include <cstdlib>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <vector>

#include <cufft.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "cuda/toeplitz_cuda.h"
#include "ops/checks.h"
#include "ops/glue.h"
#include "ops/kernel_args.h"

namespace tmm::detail {
namespace {

using tmm::cuda::FftType;

tmm::cuda::Algorithm requested_algorithm() {
  const char* v = std::getenv("TMM_CUDA_ALGORITHM");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return tmm::cuda::Algorithm::kAuto;
  if (std::strcmp(v, "cufft") == 0) return tmm::cuda::Algorithm::kCufft;
  if (std::strcmp(v, "fused") == 0) return tmm::cuda::Algorithm::kFused;
  TORCH_CHECK(false, "causal_toeplitz: TMM_CUDA_ALGORITHM must be auto, cufft or fused, got '", v, "'");
}

// ------------------------------------------------------------------ cuFFT plans
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

// One plan's identity: batched 1-D transforms of size n over `batch`
// interleaved columns (istride = ostride = batch, idist = odist = 1).
struct PlanKey {
  int device;
  FftType type;
  int64_t n, batch;
  bool operator==(const PlanKey& o) const {
    return device == o.device && type == o.type && n == o.n && batch == o.batch;
  }
};

void cufft_check(cufftResult r, const char* call, const PlanKey& key) {
  TORCH_CHECK(r == CUFFT_SUCCESS, "causal_toeplitz: ", call, " failed with ", cufft_result_name(r), " (",
              int(r), ") for a ", fft_type_name(key.type), " transform of size ", key.n, " over ", key.batch,
              " columns on cuda:", key.device);
}

struct Plan {
  PlanKey key;
  cufftHandle handle;
  size_t work_bytes;
};

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

class PlanLease {
 public:
  explicit PlanLease(const PlanKey& key) : plan_(plan_pool().acquire(key)) {}
  ~PlanLease() { plan_pool().release(plan_); }
  PlanLease(const PlanLease&) = delete;
  PlanLease& operator=(const PlanLease&) = delete;
  const Plan& plan() const { return plan_; }

 private:
  Plan plan_;
};

// ------------------------------------------------------------------ resources
class TorchResources final : public tmm::cuda::Resources {
 public:
  TorchResources(const at::Tensor& like, cudaStream_t stream)
      : opts_(like.options().dtype(at::kByte)), device_(like.device().index()), stream_(stream) {}

  void* alloc(size_t bytes) override {
    buffers_.push_back(at::empty({int64_t(bytes > 0 ? bytes : 1)}, opts_));
    return buffers_.back().data_ptr();
  }

  void fft(FftType type, int64_t n, int64_t batch, void* in, void* out) override {
    const PlanKey key{device_, type, n, batch};
    const PlanLease lease(key);
    const cufftHandle h = lease.plan().handle;
    cufft_check(cufftSetStream(h, stream_), "cufftSetStream", key);
    at::Tensor work;  // freed after the transform is enqueued: stream-ordered reuse
    if (lease.plan().work_bytes > 0) {
      work = at::empty({int64_t(lease.plan().work_bytes)}, opts_);
      cufft_check(cufftSetWorkArea(h, work.data_ptr()), "cufftSetWorkArea", key);
    }
    switch (type) {
      case FftType::kR2C:
        cufft_check(cufftExecR2C(h, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)), "cufftExecR2C", key);
        break;
      case FftType::kC2R:
        cufft_check(cufftExecC2R(h, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)), "cufftExecC2R", key);
        break;
      case FftType::kD2Z:
        cufft_check(cufftExecD2Z(h, static_cast<cufftDoubleReal*>(in), static_cast<cufftDoubleComplex*>(out)),
                    "cufftExecD2Z", key);
        break;
      case FftType::kZ2D:
        cufft_check(cufftExecZ2D(h, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(out)),
                    "cufftExecZ2D", key);
        break;
    }
  }

 private:
  at::TensorOptions opts_;
  int device_;
  cudaStream_t stream_;
  std::vector<at::Tensor> buffers_;  // alive until the op returns
};

// Runs a torch-free entry point; its errors (std::runtime_error) become c10::Errors.
template <class F>
void run_kernels(F&& f) {
  try {
    f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
}

// ------------------------------------------------------------------ ops
at::Tensor causal_toeplitz_cuda(const at::Tensor& x, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias) {
  const kernels::ToeplitzShape s = check_forward_args(x, weight, bias);
  TORCH_CHECK(x.is_cuda(), "causal_toeplitz: expected CUDA tensors, got x on ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty({s.B, s.L, s.C}, x.options());
  if (y.numel() == 0) return y;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const auto algo = requested_algorithm();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "causal_toeplitz_cuda", [&] {
    const auto p = make_forward_params<scalar_t>(s, x, weight, bias, y);
    TorchResources res(x, stream);
    run_kernels([&] { tmm::cuda::toeplitz_forward(p, res, stream, algo); });
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_cuda(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight, std::array<bool, 3> mask) {
  const kernels::ToeplitzShape s = check_backward_args(grad_y, x, weight);
  TORCH_CHECK(x.is_cuda(), "causal_toeplitz_backward: expected CUDA tensors, got x on ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  auto [gx, gw, gb] = empty_backward_outputs(x, s, mask);
  const bool empty = s.B * s.L * s.C == 0;
  if (empty) {
    if (mask[0]) gx.zero_();
    if (mask[1]) gw.zero_();
  } else if (mask[0] || mask[1]) {
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const auto algo = requested_algorithm();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "causal_toeplitz_backward_cuda", [&] {
      const auto p = make_backward_params<scalar_t>(s, grad_y, x, weight, mask[0] ? &gx : nullptr,
                                                     mask[1] ? &gw : nullptr);
      TorchResources res(x, stream);
      run_kernels([&] { tmm::cuda::toeplitz_backward(p, res, stream, algo); });
    });
  }
  if (mask[2]) fill_grad_bias(grad_y, s, gb);
  return {gx, gw, gb};
}

}  // namespace
}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, CUDA, m) {
  m.impl("causal_toeplitz", &tmm::detail::causal_toeplitz_cuda);
  m.impl("causal_toeplitz_backward", &tmm::detail::causal_toeplitz_backward_cuda);
}
