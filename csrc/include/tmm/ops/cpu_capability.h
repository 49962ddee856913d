// The instruction set the CPU kernels run with. The hot kernels (the FFT, the
// spectral products, the direct path) are compiled once per capability and
// the best one this CPU supports is chosen at the first op call:
//
//   "avx512"   AVX-512 F/BW/DQ/VL with FMA (x86-64)
//   "avx2"     AVX2 with FMA (x86-64)
//   "default"  the build's baseline target (plain x86-64, or any other
//              architecture's default)
//   "native"   a build with TMM_NATIVE_ARCH=ON: only this variant, compiled
//              with -march=native for the building machine
//
// The environment variable TMM_CPU_CAPABILITY (read at the first call) caps
// the choice: TMM_CPU_CAPABILITY=avx2 runs avx2 on an AVX-512 machine. A cap
// above what this CPU supports prints a warning and runs the best it does
// support; a name this build does not have makes the first op call throw
// std::invalid_argument naming the variable, the value and the choices.
#pragma once

#include <string>
#include <vector>

namespace tmm::ops {

// The capability the kernels run with, e.g. "avx2".
std::string cpu_capability();

// The capabilities this build has and this CPU supports, best first.
std::vector<std::string> cpu_capabilities();

}  // namespace tmm::ops
