// The hot kernels of one instruction-set variant, as a table of function
// pointers: the dispatcher (toeplitz_cpu.cpp) calls through the table of the
// capability chosen at first use (capability.h). Each variant defines one
// function returning its table, tmm_cpu_kernels_<variant>(), its only
// visible symbol (isa_variant.h).
#pragma once

#include <type_traits>

#include "cpu/toeplitz_cpu.h"

namespace tmm::cpu {

template <class T>
struct KernelSet {
  void (*forward_direct)(const ToeplitzForwardParams<T>&, const ParallelFor&);
  void (*backward_direct)(const ToeplitzBackwardParams<T>&, const ParallelFor&);
  void (*forward_fft)(const ToeplitzForwardParams<T>&, const ParallelFor&);
  void (*backward_fft)(const ToeplitzBackwardParams<T>&, const ParallelFor&);
};

struct KernelTable {
  KernelSet<float> f32;
  KernelSet<double> f64;
  KernelSet<kernels::bf16_t> bf16;
  KernelSet<kernels::f16_t> f16;

  template <class T>
  const KernelSet<T>& get() const {
    if constexpr (std::is_same_v<T, float>) return f32;
    else if constexpr (std::is_same_v<T, double>) return f64;
    else if constexpr (std::is_same_v<T, kernels::bf16_t>) return bf16;
    else {
      static_assert(std::is_same_v<T, kernels::f16_t>, "storage types: float, double, bf16_t, f16_t");
      return f16;
    }
  }
};

}  // namespace tmm::cpu

// One per variant the build has (CMakeLists.txt, TMM_CPU_VARIANTS).
extern "C" {
const tmm::cpu::KernelTable* tmm_cpu_kernels_default();
const tmm::cpu::KernelTable* tmm_cpu_kernels_avx2();
const tmm::cpu::KernelTable* tmm_cpu_kernels_avx512();
const tmm::cpu::KernelTable* tmm_cpu_kernels_native();
}
