// Umbrella header of libtmm_torch: the ops (with the choice of their kernel
// path and CPU instruction set) and checkpoint I/O. The model zoo is
// <tmm/models.h>.
#pragma once

#include <tmm/io/safetensors.h>
#include <tmm/ops.h>
#include <tmm/ops/cpu_capability.h>
#include <tmm/ops/path.h>
#include <tmm/version.h>
