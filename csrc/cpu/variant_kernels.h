// The hot kernels as each instruction-set variant compiles them
// (isa_variant.h): the direct path (toeplitz_direct.cpp) and the FFT path
// (toeplitz_fft.cpp), for K <= kMaxTileTaps. Reached only through the
// variant's table (kernel_table.h).
#pragma once

#include "cpu/isa_variant.h"
#include "cpu/toeplitz_cpu.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {

template <class T> void toeplitz_forward_direct(const ToeplitzForwardParams<T>&, const ParallelFor&);
template <class T> void toeplitz_backward_direct(const ToeplitzBackwardParams<T>&, const ParallelFor&);
template <class T> void toeplitz_forward_fft(const ToeplitzForwardParams<T>&, const ParallelFor&);
template <class T> void toeplitz_backward_fft(const ToeplitzBackwardParams<T>&, const ParallelFor&);

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
