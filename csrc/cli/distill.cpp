// tmm distill: fits a model directory's long kernels into small state-space
// models (decode method "distilled") and saves the fit beside the checkpoint,
// so generate and bench-decode serve it without refitting.
#include <cstdio>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "tmm/models/distill.h"

namespace tmm::cli {

int distill_command(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {{"model", "DIR", "model directory; distilled.json and distilled.safetensors are written there"},
                   {"order", "R", "modes per kernel (default 16)"},
                   {"window", "W", "exact taps kept per kernel (default 0)"},
                   {"fit-steps", "N", "gradient steps of the fit (default 200)"},
                   {"threads", "N", "CPU threads (default: torch's)"}});
  if (args.help()) {
    std::printf("usage: tmm distill --model DIR [options]\n\n%s", args.describe().c_str());
    return 0;
  }
  if (args.has("threads")) at::set_num_threads(int(args.integer("threads", 1, 1)));
  const std::string dir = args.required("model");
  LoadedModel loaded = load_model_dir(dir, "cpu");
  models::DistillOptions options;
  options.fit.order = args.integer("order", 16, 1);
  options.fit.steps = args.integer("fit-steps", options.fit.steps, 0);
  options.window = args.integer("window", 0, 0);
  const auto d = models::distill(*loaded.model, options);
  models::save_distillation(*d, dir);
  std::printf("%-32s %8s %14s %14s\n", "kernel", "length", "error mean", "error max");
  for (const auto& [name, k] : d->kernels) {
    std::printf("%-32s %8lld %14.3g %14.3g\n", name.c_str(), static_cast<long long>(k.length),
                k.error.mean().item<double>(), k.error.max().item<double>());
  }
  std::printf("order %lld, window %lld: written to %s/distilled.{json,safetensors}\n",
              static_cast<long long>(d->order), static_cast<long long>(d->window), dir.c_str());
  return 0;
}

}  // namespace tmm::cli
