/* Kernels of the fused causal-Toeplitz path (the block code is in
 * fused_fft.cuh, which states the math):
 *
 *   fused_forward   y[b, :, tile]      = ifft(S * W . fft(x[b, :, tile])) + bias      (=)
 *   fused_backward  grad_x[b, :, tile] = ifft(S * conj(W) . fft(grad_y[b, :, tile]))  (=)
 *                   part[b, tile]      = per-group sums of fft(grad_y) conj(fft(x))    (=)
 *
 * One block of P*n/16 threads per (batch, channel tile), blockIdx.x = b * tiles
 * + tile (adjacent tiles run together, so the 32-byte sectors they share are
 * read from DRAM once). Shared memory: P*n complex floats per tile buffer.
 */
#include <map>
#include <mutex>
#include <utility>

#include "device_block.cuh"
#include "launch.h"

namespace tmm::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kFusedMaxThreads) fused_forward_kernel(const FusedForwardArgs<T> a) {
  extern __shared__ float4 tmm_fused_smem[];
  DeviceBlock blk;
  fused_forward_block(blk, a, int64_t(blockIdx.x), reinterpret_cast<Cx<float>*>(tmm_fused_smem));
}

template <class T>
__global__ void __launch_bounds__(kFusedMaxThreads) fused_backward_kernel(const FusedBackwardArgs<T> a) {
  extern __shared__ float4 tmm_fused_smem[];
  DeviceBlock blk;
  fused_backward_block(blk, a, int64_t(blockIdx.x), reinterpret_cast<Cx<float>*>(tmm_fused_smem));
}

// Raises the kernel's dynamic shared memory limit on the current device to at
// least `bytes` (once per kernel, device and size; the limit only grows).
void reserve_shared_memory(const void* kernel, int64_t bytes) {
  if (bytes <= 48 * 1024) return;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int64_t> reserved;
  std::lock_guard<std::mutex> lock(mu);
  int64_t& have = reserved[{kernel, device}];
  if (have >= bytes) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  have = bytes;
}

}  // namespace

template <class T>
void launch_fused_forward(const FusedForwardArgs<T>& a, int64_t B, cudaStream_t stream) {
  const void* kernel = reinterpret_cast<const void*>(&fused_forward_kernel<T>);
  reserve_shared_memory(kernel, a.geo.smem_bytes);
  fused_forward_kernel<T><<<unsigned(B * a.geo.tiles), unsigned(a.geo.threads), size_t(a.geo.smem_bytes), stream>>>(a);
  check_launch("fused_forward");
}

template <class T>
void launch_fused_backward(const FusedBackwardArgs<T>& a, int64_t B, cudaStream_t stream) {
  const void* kernel = reinterpret_cast<const void*>(&fused_backward_kernel<T>);
  reserve_shared_memory(kernel, a.geo.smem_bytes);
  fused_backward_kernel<T><<<unsigned(B * a.geo.tiles), unsigned(a.geo.threads), size_t(a.geo.smem_bytes), stream>>>(a);
  check_launch("fused_backward");
}

#define TMM_INSTANTIATE(T)                                                                 \
  template void launch_fused_forward<T>(const FusedForwardArgs<T>&, int64_t, cudaStream_t); \
  template void launch_fused_backward<T>(const FusedBackwardArgs<T>&, int64_t, cudaStream_t);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(bf16_t)
TMM_INSTANTIATE(f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cuda
