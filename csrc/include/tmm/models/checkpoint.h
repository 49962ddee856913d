// Model checkpoints: a directory holding
//   config.json        the model's full configuration (LanguageModel::config_json)
//   model.safetensors  every parameter and buffer, keyed by its module path
//                      ("embed.weight", "blocks.0.mixer.weight", ...), with
//                      __metadata__ {"format": "pt", "arch", "tmm_version"}.
// The same names are used by tmm.models in Python, so a checkpoint written by
// one language is read by the other, and the safetensors package reads the
// weights as a plain state_dict.
#pragma once

#include <memory>
#include <string>

#include "tmm/models/language_model.h"

namespace tmm::models {

// Writes config.json and model.safetensors into `dir` (created with its
// parents if missing), each atomically (temporary file, fsync, rename).
// Tensors are saved in their current dtype, from any device.
void save_checkpoint(LanguageModel& model, const std::string& dir);

// Builds the model of dir/config.json and fills it from dir/model.safetensors.
// The whole file is checked against the model before any tensor is copied:
// every parameter and buffer present, no unexpected tensor, equal shapes, a
// dtype of the same kind (floating point into floating point; the copy
// converts, e.g. a bfloat16 checkpoint into the float32 model). Every error
// names the file and the tensor. The model is returned on the CPU, in the
// dtype build_model gives it (float32), in training mode.
std::shared_ptr<LanguageModel> load_checkpoint(const std::string& dir);

}  // namespace tmm::models
