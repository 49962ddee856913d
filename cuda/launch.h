// Launch helpers shared by the CUDA kernel files: the launch check, and the
// fused kernels' launchers (defined in fused_fft_kernels.cu for float,
// bf16_t and f16_t storage).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

#include "fused_fft.cuh"

namespace tmm::cuda {

// Throws if the last launch failed (bad configuration, no kernel image for
// this GPU, a sticky error from an earlier kernel).
inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("causal_toeplitz: CUDA kernel ") + kernel +
                             " failed to launch: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  }
}

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("causal_toeplitz: ") + what + " failed: " + cudaGetErrorName(err) +
                             ": " + cudaGetErrorString(err));
  }
}

// One block of geo.threads threads and geo.smem_bytes of shared memory per
// (batch, tile): B * geo.tiles blocks.
template <class T>
void launch_fused_forward(const FusedForwardArgs<T>& a, int64_t B, cudaStream_t stream);
template <class T>
void launch_fused_backward(const FusedBackwardArgs<T>& a, int64_t B, cudaStream_t stream);

}  // namespace tmm::cuda
