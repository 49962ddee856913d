#include "cli/model_dir.h"

#include <sys/stat.h>

#include <stdexcept>

#include <c10/core/Device.h>

#include "tmm/models/checkpoint.h"

namespace tmm::cli {
namespace {

bool exists(const std::string& path, bool directory) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

}  // namespace

LoadedModel load_model_dir(const std::string& dir, const std::string& device) {
  if (!exists(dir, true)) throw std::runtime_error("--model: '" + dir + "' is not a directory");
  for (const char* file : {"config.json", "model.safetensors"}) {
    if (!exists(dir + "/" + file, false)) {
      throw std::runtime_error("--model: '" + dir + "' has no " + file +
                               " (a model directory holds config.json and model.safetensors, as "
                               "tmm.models.LanguageModel.save writes them)");
    }
  }
  c10::Device dev(c10::kCPU);
  try {
    dev = c10::Device(device);
  } catch (const c10::Error&) {
    throw std::runtime_error("--device: expected cpu or cuda[:N], got '" + device + "'");
  }
  LoadedModel out;
  out.model = models::load_checkpoint(dir);
  out.model->to(dev);
  out.model->eval();
  const std::string tokenizer = dir + "/tokenizer.json";
  if (exists(tokenizer, false)) {
    out.tokenizer = text::Tokenizer::from_file(tokenizer);
    out.tokenizer_path = tokenizer;
  }
  if (out.tokenizer.vocab_size() > out.model->vocab_size()) {
    throw std::runtime_error("--model: the tokenizer (" +
                             (out.tokenizer_path.empty() ? std::string("byte-level") : out.tokenizer_path) + ") has " +
                             std::to_string(out.tokenizer.vocab_size()) + " ids but the model's vocab_size is " +
                             std::to_string(out.model->vocab_size()));
  }
  return out;
}

}  // namespace tmm::cli
