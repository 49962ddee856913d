// tmm bench-decode: prefill time and per-token decode latency against
// context length, for a model directory or an untrained model of a config.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "tmm/models/distill.h"

namespace tmm::cli {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

std::shared_ptr<models::LanguageModel> model_from_args(const Args& args) {
  if (args.has("model") == args.has("config")) throw UsageError("give exactly one of --model DIR and --config FILE");
  if (args.has("model")) return load_model_dir(args.text("model", ""), "cpu").model;
  std::ifstream in(args.text("config", ""));
  if (!in) throw std::runtime_error("--config: cannot read '" + args.text("config", "") + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto model = models::build_model(ss.str());
  model->eval();
  return model;
}

}  // namespace

int bench_decode_command(int argc, char** argv) {
  std::vector<Option> options = {{"model", "DIR", "model directory"},
                                 {"config", "FILE", "or a model config (JSON), untrained"},
                                 {"contexts", "N,N,..", "context lengths (default 512,1024,2048,4096)"},
                                 {"methods", "M,M,..", "decode methods (default: cached, plus fast where the model has it)"},
                                 {"steps", "N", "decode steps timed per context (median; default 16)"},
                                 {"batch", "B", "sequences decoded together (default 1)"},
                                 {"threads", "N", "CPU threads (default: torch's)"},
                                 {"seed", "S", "random tokens' seed (default 0)"}};
  for (auto& o : distill_options()) options.push_back(o);
  const Args args(argc, argv, 2, options);
  if (args.help()) {
    std::printf("usage: tmm bench-decode (--model DIR | --config FILE) [options]\n\n%s", args.describe().c_str());
    return 0;
  }
  const std::vector<int64_t> contexts = args.integers("contexts", "512,1024,2048,4096", 1);
  const int64_t steps = args.integer("steps", 16, 1), batch = args.integer("batch", 1, 1);
  if (args.has("threads")) at::set_num_threads(int(args.integer("threads", 1, 1)));
  at::manual_seed(uint64_t(args.integer("seed", 0, 0)));
  auto model = model_from_args(args);

  std::vector<models::DecodeMethod> methods;
  if (args.has("methods")) {
    std::stringstream list(args.text("methods", ""));
    for (std::string m; std::getline(list, m, ',');) methods.push_back(models::parse_decode_method(m));
  } else {
    methods.push_back(models::DecodeMethod::Cached);
    try {
      model->resolve_decode_method(models::DecodeMethod::Fast, contexts.back() + steps);
      methods.push_back(models::DecodeMethod::Fast);
    } catch (const c10::Error&) {
    }
  }
  if (std::find(methods.begin(), methods.end(), models::DecodeMethod::Distilled) != methods.end())
    prepare_distillation(*model, args, /*quiet=*/false);
  torch::NoGradGuard no_grad;
  std::printf("%s, %lld parameters, batch %lld, %d threads\n", model->arch().c_str(),
              static_cast<long long>(model->parameter_count()), static_cast<long long>(batch), at::get_num_threads());
  std::printf("%-10s %8s %12s %16s %12s %14s\n", "method", "context", "prefill ms", "ms/token median", "tokens/s",
              "state bytes");
  for (const auto method : methods) {
    for (const int64_t context : contexts) {
      auto state = model->start_decoding(batch, context + steps, method);
      const at::Tensor ids = at::randint(model->vocab_size(), {batch, context + steps}, at::kLong);
      auto start = clock_type::now();
      model->decode(*state, ids.narrow(1, 0, context));
      const double prefill = seconds_since(start);
      std::vector<double> times;
      for (int64_t t = 0; t < steps; ++t) {
        start = clock_type::now();
        model->decode(*state, ids.narrow(1, context + t, 1));
        times.push_back(seconds_since(start));
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      std::printf("%-10s %8lld %12.1f %16.3f %12.1f %14lld\n", models::to_string(state->method()).c_str(),
                  static_cast<long long>(context), 1e3 * prefill, 1e3 * median, double(batch) / median,
                  static_cast<long long>(state->state_bytes()));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace tmm::cli
