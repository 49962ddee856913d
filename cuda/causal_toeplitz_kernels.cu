/* CUDA causal-Toeplitz ops: the kernels of the cuFFT path and the entry
 * points that run either path on a stream.
 *
 *   y[b,t,c] = sum_{i<K} sum_{s<=t} w[g,i,t-s] * x[b,s,c-(K-1)+i] + bias[g,t]
 *
 * In the frequency domain (n >= 2L-1, zero padding, S = 1/n):
 *   Y_c  = S sum_i W_{g,i} X_{c-(K-1)+i}                      y = crop(C2R(Y)) + bias   (=)
 *   GX_c = S sum_i conj(W_{g,i}) GY_{c+(K-1)-i}               grad_x = crop(C2R(GX))   (=)
 *   GW_{g,i} = sum_{b, c in g} GY_c conj(X_{c-(K-1)+i})       grad_weight = S crop(C2R(GW)),
 *                                                             zero for L <= t < N      (=)
 * (source channels below the group's first count as zero). The order of the
 * work is in toeplitz_driver.cuh; the per-element math in fft_pointwise.cuh.
 * Kernels here: elementwise_kernel (grid-stride over one functor),
 * team_reduce_kernel (a team of lanes per output item, summed in a fixed
 * order, so results do not depend on scheduling) and transpose_kernel
 * (tiles through shared memory, transpose.cuh).
 */
#include <atomic>

#include "device_block.cuh"
#include "launch.h"
#include "toeplitz_driver.cuh"

namespace tmm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

// e in [0, count) over a grid-stride loop. I is uint32_t when count < 2^31
// (index math in 32 bits; e + stride cannot wrap), else int64_t.
template <class I, class F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(const F f, const I count) {
  const I stride = I(gridDim.x) * I(kThreads);
  for (I e = I(blockIdx.x) * I(kThreads) + I(threadIdx.x); e < count; e += stride) f(e);
}

// Item `item` is reduced by `team` adjacent lanes (a power of two <= 256):
// shuffles inside a warp, then shared memory across the team's warps. Every
// thread of a block runs the same number of rounds (the shuffles and
// barriers are uniform).
template <class F>
__global__ void __launch_bounds__(kThreads) team_reduce_kernel(const F f, const int64_t items, const int team) {
  using R = typename F::Real;
  __shared__ Cx<R> warp_sums[kThreads / 32];
  const int per_block = kThreads / team;
  const int lane = int(threadIdx.x) & (team - 1), warp = int(threadIdx.x) >> 5;
  const int in_warp = team < 32 ? team : 32;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < items; base += int64_t(gridDim.x) * per_block) {
    const int64_t item = base + int(threadIdx.x) / team;
    Cx<R> v = item < items ? f.partial(item, lane, team) : Cx<R>{R(0), R(0)};
    for (int off = in_warp / 2; off > 0; off /= 2) {
      v.re += __shfl_xor_sync(0xffffffffu, v.re, off);
      v.im += __shfl_xor_sync(0xffffffffu, v.im, off);
    }
    if (team > 32) {
      if ((threadIdx.x & 31) == 0) warp_sums[warp] = v;
      __syncthreads();
      if (lane == 0 && item < items) {
        Cx<R> sum = warp_sums[warp];
        for (int w = 1; w < team / 32; ++w) sum += warp_sums[warp + w];
        f.write(item, sum);
      }
      __syncthreads();
    } else if (lane == 0 && item < items) {
      f.write(item, v);
    }
  }
}

// Tiles of f's matrix over a grid-stride loop (transpose.cuh).
template <class F>
__global__ void __launch_bounds__(kTransposeThreads)
    transpose_kernel(const F f, const int64_t rows, const int64_t cols, const int64_t tiles) {
  __shared__ TransposeTile<typename F::Value> tile;
  DeviceBlock blk;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) transpose_tile(blk, f, rows, cols, t, tile);
}

int64_t blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return blocks < kMaxBlocks ? blocks : kMaxBlocks;
}

// The executor of toeplitz_driver.cuh on a CUDA stream.
class DeviceExec {
 public:
  DeviceExec(Resources& res, cudaStream_t stream) : res_(res), stream_(stream) {}

  template <class U>
  U* alloc(int64_t count) {
    return static_cast<U*>(res_.alloc(size_t(count) * sizeof(U)));
  }

  // The cuFFT path keeps each of its three complex buffers under 1 GiB.
  static int64_t chunk_bytes() { return int64_t(1) << 30; }

  template <class F>
  void for_each(const char* name, int64_t count, const F& f) {
    if (count <= 0) return;
    const unsigned blocks = unsigned(blocks_for(count));
    if (count < (int64_t(1) << 31)) {
      elementwise_kernel<uint32_t, F><<<blocks, kThreads, 0, stream_>>>(f, uint32_t(count));
    } else {
      elementwise_kernel<int64_t, F><<<blocks, kThreads, 0, stream_>>>(f, count);
    }
    check_launch(name);
  }

  template <class F>
  void for_each_team(const char* name, int64_t items, int team, const F& f) {
    if (items <= 0) return;
    team_reduce_kernel<F><<<unsigned(blocks_for(items * team)), kThreads, 0, stream_>>>(f, items, team);
    check_launch(name);
  }

  template <class F>
  void transpose(const char* name, int64_t rows, int64_t cols, const F& f) {
    const int64_t tiles = transpose_tiles(rows, cols);
    if (tiles <= 0) return;
    const unsigned blocks = unsigned(tiles < kMaxBlocks ? tiles : kMaxBlocks);
    transpose_kernel<F><<<blocks, kTransposeThreads, 0, stream_>>>(f, rows, cols, tiles);
    check_launch(name);
  }

  template <class R>
  void r2c(int64_t n, int64_t batch, R* in, Cx<R>* out) {
    res_.fft(std::is_same_v<R, float> ? FftType::kR2C : FftType::kD2Z, n, batch, in, out);
  }

  template <class R>
  void c2r(int64_t n, int64_t batch, Cx<R>* in, R* out) {
    res_.fft(std::is_same_v<R, float> ? FftType::kC2R : FftType::kZ2D, n, batch, in, out);
  }

  template <class T>
  void fused_forward(const FusedForwardArgs<T>& a, int64_t B) {
    launch_fused_forward(a, B, stream_);
  }

  template <class T>
  void fused_backward(const FusedBackwardArgs<T>& a, int64_t B) {
    launch_fused_backward(a, B, stream_);
  }

 private:
  Resources& res_;
  cudaStream_t stream_;
};

// The current device's opt-in shared memory per block, queried once per device.
int64_t shared_memory_optin() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0: not queried yet
  int device = 0, bytes = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (device < kDevices && (bytes = known[device].load(std::memory_order_relaxed)) > 0) return bytes;
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (device < kDevices) known[device].store(bytes, std::memory_order_relaxed);
  return bytes;
}

}  // namespace

// Crossover of kAuto: the fused path up to these lengths where it applies
// (L <= 4096, K - 1 <= P lanes, float compute, enough shared memory), the
// cuFFT path elsewhere. UNMEASURED: to be set from scripts/gpu_check.sh's
// table, which times both paths (TMM_CUDA_ALGORITHM=cufft|fused).
constexpr int64_t kFusedForwardMaxL = 4096;
constexpr int64_t kFusedBackwardMaxL = 4096;

Algorithm choose_path(const ToeplitzShape& s, Pass pass, bool double_precision,
                      int64_t shared_memory_per_block, Algorithm requested) {
  if (requested == Algorithm::kCufft || double_precision) return Algorithm::kCufft;
  FusedGeometry geo;
  const int buffers = pass == Pass::kForward ? 1 : 2;
  if (!fused_geometry(s, buffers, geo) || geo.smem_bytes > shared_memory_per_block) return Algorithm::kCufft;
  if (requested == Algorithm::kFused) return Algorithm::kFused;
  const int64_t max_l = pass == Pass::kForward ? kFusedForwardMaxL : kFusedBackwardMaxL;
  return s.L <= max_l ? Algorithm::kFused : Algorithm::kCufft;
}

template <class T>
void toeplitz_forward(const ToeplitzForwardParams<T>& p, Resources& res, cudaStream_t stream, Algorithm algo) {
  if (p.shape.B * p.shape.L * p.shape.C == 0) return;
  const bool dbl = std::is_same_v<T, double>;
  const Algorithm path = choose_path(p.shape, Pass::kForward, dbl, dbl ? 0 : shared_memory_optin(), algo);
  DeviceExec ex(res, stream);
  run_forward(p, ex, path);
}

template <class T>
void toeplitz_backward(const ToeplitzBackwardParams<T>& p, Resources& res, cudaStream_t stream, Algorithm algo) {
  if (p.shape.B * p.shape.L * p.shape.C == 0) return;
  const bool dbl = std::is_same_v<T, double>;
  const Algorithm path = choose_path(p.shape, Pass::kBackward, dbl, dbl ? 0 : shared_memory_optin(), algo);
  DeviceExec ex(res, stream);
  run_backward(p, ex, path);
}

#define TMM_INSTANTIATE(T)                                                                                  \
  template void toeplitz_forward<T>(const ToeplitzForwardParams<T>&, Resources&, cudaStream_t, Algorithm);  \
  template void toeplitz_backward<T>(const ToeplitzBackwardParams<T>&, Resources&, cudaStream_t, Algorithm);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(bf16_t)
TMM_INSTANTIATE(f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cuda
