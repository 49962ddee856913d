// This variant's table of kernels (kernel_table.h), constant-initialised so
// that nothing runs at load time.
#include "cpu/isa_variant.h"

#include "cpu/kernel_table.h"
#include "cpu/variant_kernels.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {
namespace {

template <class T>
constexpr KernelSet<T> kernel_set() {
  return {&toeplitz_forward_direct<T>, &toeplitz_backward_direct<T>, &toeplitz_forward_fft<T>,
          &toeplitz_backward_fft<T>};
}

constexpr KernelTable kTable{kernel_set<float>(), kernel_set<double>(), kernel_set<kernels::bf16_t>(),
                             kernel_set<kernels::f16_t>()};

}  // namespace
}  // namespace tmm::cpu::TMM_CPU_CAPABILITY

extern "C" const tmm::cpu::KernelTable* TMM_CPU_CAT(tmm_cpu_kernels_, TMM_CPU_VARIANT)() {
  return &tmm::cpu::TMM_CPU_CAPABILITY::kTable;
}
