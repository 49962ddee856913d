// Umbrella header of libtmm_torch.
#pragma once

#include <tmm/io/safetensors.h>
#include <tmm/ops.h>
#include <tmm/version.h>
