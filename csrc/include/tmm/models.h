// The model zoo: TMM, Transformer, Hyena, Mamba2 behind one interface, and
// checkpoints (config.json + model.safetensors). Separate from <tmm/tmm.h>
// because it pulls in torch::nn.
#pragma once

#include <tmm/models/checkpoint.h>
#include <tmm/models/distill.h>
#include <tmm/models/hyena.h>
#include <tmm/models/language_model.h>
#include <tmm/models/mamba2.h>
#include <tmm/models/tmm.h>
#include <tmm/models/transformer.h>
