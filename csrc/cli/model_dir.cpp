#include "cli/model_dir.h"

#include <sys/stat.h>

#include <stdexcept>

#include <c10/core/Device.h>

#include <cstdio>

#include <ATen/ATen.h>

#include "tmm/models/checkpoint.h"
#include "tmm/models/distill.h"

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
  if (models::has_distillation(dir)) out.model->set_distillation(models::load_distillation(dir));
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
