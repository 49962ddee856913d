// The public face of the CPU kernels' instruction-set choice
// (<tmm/ops/cpu_capability.h>); the choice itself is cpu/capability.cpp.
#include "tmm/ops/cpu_capability.h"

#include "cpu/capability.h"

namespace tmm::ops {

std::string cpu_capability() { return cpu::active_capability(); }

std::vector<std::string> cpu_capabilities() { return cpu::supported_capabilities(); }

}  // namespace tmm::ops
