// A model directory as the CLI reads it: config.json + model.safetensors
// (tmm/models/checkpoint.h) and, optionally, tokenizer.json (a byte-level BPE
// written by the tokenizers package); without one, the byte-level tokenizer.
#pragma once

#include <memory>
#include <string>

#include <vector>

#include "cli/args.h"
#include "tmm/models/language_model.h"
#include "tmm/text/tokenizer.h"

namespace tmm::cli {

struct LoadedModel {
  std::shared_ptr<models::LanguageModel> model;  // in eval mode, on `device`
  text::Tokenizer tokenizer = text::Tokenizer::byte_level();
  std::string tokenizer_path;  // empty: byte-level
};

// Errors name the directory and what is missing or wrong. A distillation
// saved beside the checkpoint (tmm distill) is attached to the model.
LoadedModel load_model_dir(const std::string& dir, const std::string& device);

// --order, --window, --fit-steps: the distillation of decode method "distilled".
std::vector<Option> distill_options();
// Fits one with those options unless the model already has one of that
// order and window (saved beside the checkpoint); prints its worst kernel
// error on stderr unless quiet.
void prepare_distillation(models::LanguageModel& model, const Args& args, bool quiet);

}  // namespace tmm::cli
