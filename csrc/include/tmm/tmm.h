// Umbrella header of libtmm_torch: the ops and checkpoint I/O. The model
// zoo is <tmm/models.h>.
#pragma once

#include <tmm/io/safetensors.h>
#include <tmm/ops.h>
#include <tmm/version.h>
