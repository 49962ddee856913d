// The CPU entry points: the per-tap split for wide kernels, the choice
// between the direct and the FFT path, and the call through the table of the
// instruction-set variant chosen for this CPU.
#include "cpu/toeplitz_cpu.h"

#include "cpu/capability.h"
#include "cpu/toeplitz_per_tap.h"

namespace tmm::cpu {

// The direct path costs ~K L^2 per channel and the FFT path ~L log L + K L,
// so the direct path wins for short L * K (docs/ops.md, "Direct path and
// crossover": scripts/bench_crossover.py on the 2-core CI machine puts the
// break-even at L = 8-16 for G = 1, 24 for G = C, both K = 1, and L ~ 8 for
// K = 8).
int64_t direct_crossover_length() { return 24; }

Algorithm resolve_algorithm(Algorithm requested, const ToeplitzShape& shape) {
  if (requested != Algorithm::kAuto) return requested;
  return shape.L * shape.K <= direct_crossover_length() ? Algorithm::kDirect : Algorithm::kFft;
}

template <class T>
void toeplitz_forward(const ToeplitzForwardParams<T>& p, const ParallelFor& pf, Algorithm algo) {
  if (p.shape.K > kMaxTileTaps) return toeplitz_forward_per_tap(p, pf, algo);
  const KernelSet<T>& k = active_kernels().get<T>();
  if (resolve_algorithm(algo, p.shape) == Algorithm::kDirect)
    k.forward_direct(p, pf);
  else
    k.forward_fft(p, pf);
}

template <class T>
void toeplitz_backward(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf, Algorithm algo) {
  if (p.shape.K > kMaxTileTaps) return toeplitz_backward_per_tap(p, pf, algo);
  const KernelSet<T>& k = active_kernels().get<T>();
  if (resolve_algorithm(algo, p.shape) == Algorithm::kDirect)
    k.backward_direct(p, pf);
  else
    k.backward_fft(p, pf);
}

#define TMM_INSTANTIATE(T)                                                                          \
  template void toeplitz_forward<T>(const ToeplitzForwardParams<T>&, const ParallelFor&, Algorithm); \
  template void toeplitz_backward<T>(const ToeplitzBackwardParams<T>&, const ParallelFor&, Algorithm);
TMM_INSTANTIATE(float)
TMM_INSTANTIATE(double)
TMM_INSTANTIATE(kernels::bf16_t)
TMM_INSTANTIATE(kernels::f16_t)
#undef TMM_INSTANTIATE

}  // namespace tmm::cpu
