// Chooses between the direct and the FFT path of the CPU kernels.
#include "cpu/toeplitz_cpu.h"

namespace tmm::cpu {

// Up to this length the direct path is faster (docs/ops.md, "Crossover";
// measured by scripts/bench_crossover.py on this project's CI machine).
int64_t direct_crossover_length() { return 64; }

Algorithm resolve_algorithm(Algorithm requested, const ToeplitzShape& shape) {
  if (requested != Algorithm::kAuto) return requested;
  return shape.L <= direct_crossover_length() ? Algorithm::kDirect : Algorithm::kFft;
}

template <class T>
void toeplitz_forward(const ToeplitzForwardParams<T>& p, const ParallelFor& pf, Algorithm algo) {
  if (resolve_algorithm(algo, p.shape) == Algorithm::kDirect)
    toeplitz_forward_direct(p, pf);
  else
    toeplitz_forward_fft(p, pf);
}

template <class T>
void toeplitz_backward(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf, Algorithm algo) {
  if (resolve_algorithm(algo, p.shape) == Algorithm::kDirect)
    toeplitz_backward_direct(p, pf);
  else
    toeplitz_backward_fft(p, pf);
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
