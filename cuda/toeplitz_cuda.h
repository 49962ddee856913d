// Host entry points of the CUDA causal-Toeplitz kernels: torch-free. The glue
// (csrc/ops/causal_toeplitz_cuda.cpp) checks the tensors, fills the params
// structs with device pointers and supplies the Resources: scratch memory and
// cached cuFFT plans, both of which belong to torch in this extension.
//
//   y[b,t,c] = sum_{i<K} sum_{s<=t} w[g,i,t-s] * x[b,s,c-(K-1)+i] + bias[g,t]
//
// Storage types T: float, double, kernels::bf16_t, kernels::f16_t (bit layouts
// of c10::BFloat16 / c10::Half). Compute type: double for double, else float.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "params/half_types.h"
#include "params/toeplitz_params.h"

namespace tmm::cuda {

using kernels::ToeplitzBackwardParams;
using kernels::ToeplitzForwardParams;
using kernels::ToeplitzShape;

// Batched 1-D real transforms of size n over `batch` interleaved columns:
// element t of column j at t * batch + j (istride = ostride = batch,
// idist = odist = 1). R2C reads n x batch reals and writes (n/2+1) x batch
// complex values; C2R the reverse. Unnormalised, as cuFFT.
enum class FftType { kR2C, kC2R, kD2Z, kZ2D };

class Resources {
 public:
  virtual ~Resources() = default;
  // Device memory ordered on the call's stream, alive until the entry point
  // returns (the glue hands out tensors from torch's caching allocator).
  virtual void* alloc(size_t bytes) = 0;
  // Enqueues one transform on the call's stream (a cached plan, its work
  // area allocated per call). `in` may be overwritten (C2R does).
  virtual void fft(FftType type, int64_t n, int64_t batch, void* in, void* out) = 0;
};

// Which implementation runs. kAuto picks by `choose_path`.
enum class Algorithm { kAuto, kCufft, kFused };

// The pass a path is chosen for: the fused backward holds two tiles (x and
// grad_y) on chip, so it reaches shorter lengths than the fused forward.
enum class Pass { kForward, kBackward };

// The path kAuto takes (kCufft or kFused) for this shape, pass, compute
// precision and the device's opt-in shared memory per block, in bytes.
Algorithm choose_path(const ToeplitzShape& s, Pass pass, bool double_precision,
                      int64_t shared_memory_per_block, Algorithm requested);

// y (contiguous, written with =) from x, weight and optional bias.
template <class T>
void toeplitz_forward(const ToeplitzForwardParams<T>& p, Resources& res, cudaStream_t stream,
                      Algorithm algo);

// grad_x and grad_weight (contiguous, written with =), each where its pointer
// is set. grad_bias is left to the glue.
template <class T>
void toeplitz_backward(const ToeplitzBackwardParams<T>& p, Resources& res, cudaStream_t stream,
                       Algorithm algo);

}  // namespace tmm::cuda
