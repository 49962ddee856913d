// A model directory as the CLI reads it: config.json + model.safetensors
// (tmm/models/checkpoint.h) and the tokenizer: tokenizer.json beside them (a
// byte-level BPE written by the tokenizers package), else the byte-level
// tokenizer for a vocabulary of exactly 256 ids, else none (the prompt and
// the output are token ids). A training checkpoint folder (tmm.train's, with
// a `latest` file) stands for its newest step.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <vector>

#include "cli/args.h"
#include "tmm/models/language_model.h"
#include "tmm/text/tokenizer.h"

namespace tmm::cli {

struct LoadedModel {
  std::string dir;                               // the folder read (a training checkpoint's newest step)
  std::shared_ptr<models::LanguageModel> model;  // in eval mode, on `device`
  std::optional<text::Tokenizer> tokenizer;      // none: token ids in and out
  std::string tokenizer_path;                    // the tokenizer.json read; empty: byte-level or none
  std::string no_tokenizer;                      // without a tokenizer: why, naming the file looked for

  // The tokenizer, or an error saying why there is none and what to do.
  const text::Tokenizer& text_tokenizer() const;
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
