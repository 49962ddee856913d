// Process-wide choice of the CPU path (auto, direct or FFT): for tests and
// for measuring the crossover. Auto is the default and the right choice.
#pragma once

#include "cpu/toeplitz_cpu.h"

namespace tmm::detail {

void set_cpu_algorithm(cpu::Algorithm algo);
cpu::Algorithm cpu_algorithm();

}  // namespace tmm::detail
