// Which instruction-set variant of the hot kernels runs (the public side is
// <tmm/ops/cpu_capability.h>, which documents the names): the best variant
// this build has and this CPU supports, capped by TMM_CPU_CAPABILITY, chosen
// at the first call and read on every kernel call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cpu/kernel_table.h"

namespace tmm::cpu {

// The chosen variant's kernels and name. The first call chooses; a bad
// TMM_CPU_CAPABILITY throws std::invalid_argument (again on every call).
const KernelTable& active_kernels();
const char* active_capability();

// The variants this build has and this CPU supports, best first.
std::vector<std::string> supported_capabilities();

// Runs the named variant from now on, process-wide (for the tests, which run
// the op under every variant). std::invalid_argument if this build lacks it
// or this CPU cannot run it.
void force_capability(std::string_view name);

// The choice itself, given a build's variants in ascending order, whether
// this CPU runs each, and the requested cap (nullptr or "": none). The
// lowest variant always runs. Returns the index chosen and a warning where
// the cap was above what the CPU runs (empty otherwise); throws
// std::invalid_argument for a name the build does not have.
struct CapabilityChoice {
  std::size_t index;
  std::string warning;
};
CapabilityChoice choose_capability(const std::vector<std::string>& names, const std::vector<bool>& runs,
                                   const char* requested);

}  // namespace tmm::cpu
