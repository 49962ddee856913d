// tmm info: what a model directory holds and how it decodes.
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "tmm/ops/cpu_capability.h"

namespace tmm::cli {

int info_command(int argc, char** argv) {
  const Args args(argc, argv, 2, {{"model", "DIR", "model directory, or a training checkpoint folder (its newest step)"}});
  if (args.help()) {
    std::printf("usage: tmm info --model DIR\n\n%s", args.describe().c_str());
    return 0;
  }
  LoadedModel loaded = load_model_dir(args.required("model"), "cpu");
  auto& m = *loaded.model;
  std::printf("model          %s\n", loaded.dir.c_str());
  std::printf("arch           %s\n", m.arch().c_str());
  std::printf("parameters     %lld\n", static_cast<long long>(m.parameter_count()));
  std::printf("vocab_size     %lld\n", static_cast<long long>(m.vocab_size()));
  std::printf("max_len        %lld\n", static_cast<long long>(m.max_len()));
  if (loaded.tokenizer) {
    std::printf("tokenizer      %s (%lld ids)%s%s\n", loaded.tokenizer->kind().c_str(),
                static_cast<long long>(loaded.tokenizer->vocab_size()), loaded.tokenizer_path.empty() ? "" : ", ",
                loaded.tokenizer_path.c_str());
  } else {
    std::printf("tokenizer      none: prompts and output are token ids (tmm generate --prompt-ids)\n");
  }
  std::string methods = "recompute, cached";
  try {
    m.resolve_decode_method(models::DecodeMethod::Fast, m.max_len());
    methods += ", fast, distilled";
  } catch (const c10::Error&) {
  }
  const auto auto_method = m.resolve_decode_method(models::DecodeMethod::Auto, m.max_len());
  std::printf("decode methods %s (auto at max_len: %s)\n", methods.c_str(), models::to_string(auto_method).c_str());
  if (const auto d = m.distillation()) {
    std::printf("distilled      order %lld, window %lld (%zu kernels)\n", static_cast<long long>(d->order),
                static_cast<long long>(d->window), d->kernels.size());
  }
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json", "distilled.json",
                           "distilled.safetensors"}) {
    struct stat st {};
    if (::stat((loaded.dir + "/" + file).c_str(), &st) == 0) {
      std::printf("file           %-18s %lld bytes\n", file, static_cast<long long>(st.st_size));
    }
  }
  std::printf("cpu capability %s\n", tmm::ops::cpu_capability().c_str());
  std::printf("config\n%s\n", m.config_json().c_str());
  return 0;
}

}  // namespace tmm::cli
