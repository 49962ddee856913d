#include "cli/model_dir.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include "tmm/models/checkpoint.h"
#include "tmm/models/distill.h"

namespace tmm::cli {
namespace {

bool exists(const std::string& path, bool directory) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

// A training checkpoint folder (no config.json, a `latest` file naming a
// step folder) stands for that step; any other folder for itself.
std::string checkpoint_step(const std::string& dir) {
  if (exists(dir + "/config.json", false) || !exists(dir + "/latest", false)) return dir;
  std::ifstream in(dir + "/latest");
  std::string step;
  std::getline(in, step);
  if (step.empty() || !exists(dir + "/" + step, true)) {
    throw std::runtime_error("--model: '" + dir + "/latest' does not name a step folder of that training checkpoint");
  }
  return dir + "/" + step;
}

}  // namespace

const text::Tokenizer& LoadedModel::text_tokenizer() const {
  if (!tokenizer) throw std::runtime_error(no_tokenizer);
  return *tokenizer;
}

LoadedModel load_model_dir(const std::string& given, const std::string& device) {
  if (!exists(given, true)) throw std::runtime_error("--model: '" + given + "' is not a directory");
  const std::string dir = checkpoint_step(given);
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
  out.dir = dir;
  out.model = models::load_checkpoint(dir);
  if (models::has_distillation(dir)) out.model->set_distillation(models::load_distillation(dir));
  out.model->to(dev);
  out.model->eval();
  const int64_t vocab = out.model->vocab_size();
  const std::string path = dir + "/tokenizer.json";
  if (exists(path, false)) {
    out.tokenizer = text::Tokenizer::from_file(path);
    out.tokenizer_path = path;
    if (out.tokenizer->vocab_size() > vocab) {
      throw std::runtime_error("--model: the tokenizer (" + path + ") has " +
                               std::to_string(out.tokenizer->vocab_size()) + " ids but the model's vocab_size is " +
                               std::to_string(vocab));
    }
  } else if (vocab == 256) {
    out.tokenizer = text::Tokenizer::byte_level();
  } else {
    out.no_tokenizer = "--model: '" + dir + "' has no tokenizer.json (looked for " + path + "), and its vocab_size " +
                       std::to_string(vocab) + " is not the byte-level tokenizer's 256: " +
                       (vocab > 256 ? "put the tokenizer.json the model was trained with there, or give the prompt "
                                      "as token ids (--prompt-ids 1,2,3)"
                                    : "give the prompt as token ids (--prompt-ids 1,2,3), or put the model's "
                                      "tokenizer.json there");
  }
  return out;
}

std::vector<Option> distill_options() {
  return {{"order", "R", "method distilled: modes per kernel (default: the saved distillation's, else 16)"},
          {"window", "W", "method distilled: exact taps kept per kernel (default: the saved one's, else 0)"},
          {"fit-steps", "N", "method distilled: gradient steps of the fit (default 200)"}};
}

void prepare_distillation(models::LanguageModel& model, const Args& args, bool quiet) {
  const auto saved = model.distillation();
  const int64_t order = args.integer("order", saved ? saved->order : 16, 1);
  const int64_t window = args.integer("window", saved ? saved->window : 0, 0);
  if (saved && saved->order == order && saved->window == window) return;
  models::DistillOptions options;
  options.fit.order = order;
  options.fit.steps = args.integer("fit-steps", options.fit.steps, 0);
  options.window = window;
  const auto d = models::distill(model, options);
  model.set_distillation(d);
  if (quiet) return;
  double worst = 0;
  for (const auto& [name, k] : d->kernels) worst = std::max(worst, k.error.max().item<double>());
  std::fprintf(stderr, "[tmm] distilled %zu kernels: order %lld, window %lld, worst relative L2 error %.3g\n",
               d->kernels.size(), static_cast<long long>(order), static_cast<long long>(window), worst);
}

}  // namespace tmm::cli
