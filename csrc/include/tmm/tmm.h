// Umbrella header of libtmm_torch.
#pragma once

#include <tmm/ops.h>
#include <tmm/version.h>
