// The Block of the block code in fused_fft.cuh and transpose.cuh, for the
// calling CUDA thread: its FusedRegs stay in registers (every index into them
// is a compile-time constant once unrolled; unused, they cost nothing).
#pragma once

#include "fused_fft.cuh"

namespace tmm::cuda {

struct DeviceBlock {
  FusedRegs regs;
  __device__ __forceinline__ int threads() const { return int(blockDim.x); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  template <class F>
  __device__ __forceinline__ void each(F&& f) { f(int(threadIdx.x), regs); }
};

}  // namespace tmm::cuda
