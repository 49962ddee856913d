// CUDA glue: validates, allocates, maps torch dtypes onto the kernels'
// storage types and runs the torch-free CUDA kernels (cuda/) on the current
// stream of the tensors' device. Scratch memory and cuFFT work areas come
// from torch's caching allocator; cuFFT plans from a bounded pool shared by
// all threads, each plan leased to one caller at a time and pinned when a
// CUDA graph capture uses it (cufft_plan_pool_cuda.h).
//
// tmm::ops::path() (<tmm/ops/path.h>, read on every call) forces a path, for
// tests and for measuring the crossover: cufft or fused; fused runs auto's
// choice (cuFFT) where it does not apply (double, long L, wide taps), and the
// CPU's paths (direct, fft) run auto's choice here.
#include <tuple>
#include <vector>

#include <cufft.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "cuda/toeplitz_cuda.h"
#include "ops/checks.h"
#include "ops/cufft_plan_pool_cuda.h"
#include "ops/backward_outputs.h"
#include "ops/params_from_tensors.h"
#include "ops/run_kernels.h"
#include "tmm/ops/path.h"

namespace tmm::detail {
namespace {

using tmm::cuda::FftType;

tmm::cuda::Algorithm requested_algorithm() {
  switch (ops::path()) {
    case ops::Path::kCufft: return tmm::cuda::Algorithm::kCufft;
    case ops::Path::kFused: return tmm::cuda::Algorithm::kFused;
    default: return tmm::cuda::Algorithm::kAuto;
  }
}

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
    // A capturing stream pins the plan: the graph will replay its kernels.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(stream_, &capture);
    TORCH_CHECK(err == cudaSuccess, "causal_toeplitz: cudaStreamIsCapturing failed on cuda:", device_, ": ",
                cudaGetErrorName(err), ": ", cudaGetErrorString(err));
    const PlanLease lease(key, capture != cudaStreamCaptureStatusNone);
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
    run_kernels("", [&] { tmm::cuda::toeplitz_forward(p, res, stream, algo); });
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_cuda(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight, std::array<bool, 3> mask) {
  const kernels::ToeplitzShape s = check_backward_args(grad_y, x, weight);
  TORCH_CHECK(x.is_cuda(), "causal_toeplitz_backward: expected CUDA tensors, got x on ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  // Not a structured binding: the dispatch lambda below uses gx and gw, and
  // clang < 16 rejects capturing structured bindings (a C++20 feature).
  at::Tensor gx, gw, gb;
  std::tie(gx, gw, gb) = empty_backward_outputs(x, s, mask);
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
      run_kernels("", [&] { tmm::cuda::toeplitz_backward(p, res, stream, algo); });
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
