// tmm generate: prompt(s) in, text out, streamed for a single prompt; the
// timings (prefill, per token) on stderr. With --prompt-ids the prompts are
// token ids and so is the output (a model with no tokenizer: model_dir.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "cli/utf8_stream.h"
#include "tmm/models/generation.h"

namespace tmm::cli {
namespace {

std::vector<Option> generate_options() {
  return {{"model", "DIR",
           "model directory (config.json, model.safetensors, tokenizer.json unless the vocabulary is 256 bytes), or "
           "a training checkpoint folder (its newest step)"},
          {"prompt", "TEXT", "a prompt; several make a batch", true},
          {"prompt-file", "PATH", "read the prompt from a file"},
          {"prompt-ids", "ID,ID,...", "a prompt as token ids; the output is token ids too; several make a batch", true},
          {"max-new-tokens", "N", "tokens to generate per prompt (default 64)"},
          {"temperature", "T", "sampling temperature; 0 = greedy (default 1)"},
          {"greedy", "", "same as --temperature 0"},
          {"top-k", "K", "sample among the K most likely tokens (default 0 = all)"},
          {"top-p", "P", "sample among the most likely tokens holding probability P (default 1)"},
          {"seed", "S", "random seed (default 0)"},
          {"stop", "TEXT", "end a sequence when its text contains TEXT (not printed; not with --prompt-ids)", true},
          {"stop-id", "ID", "end a sequence after generating this token id", true},
          {"method", "M", "decoding: auto, cached, fast, distilled (TMM, Hyena) or recompute (default auto)"},
          {"device", "DEV", "cpu or cuda[:N] (default cpu)"},
          {"threads", "N", "CPU threads (default: torch's)"},
          {"quiet", "", "no timings on stderr"}};
}

std::vector<Option> all_generate_options() {
  std::vector<Option> out = generate_options();
  for (auto& o : distill_options()) out.push_back(o);
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("--prompt-file: cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text of a sequence up to its first stop string, and whether it has one.
std::pair<std::string, bool> cut_at_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t cut = std::string::npos;
  for (const auto& s : stops) cut = std::min(cut, text.find(s));
  return {cut == std::string::npos ? text : text.substr(0, cut), cut != std::string::npos};
}

// "1 2 3": token ids as the output of --prompt-ids prints them.
std::string join_ids(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

}  // namespace

int generate_command(int argc, char** argv) {
  const Args args(argc, argv, 2, all_generate_options());
  if (args.help()) {
    std::printf("usage: tmm generate --model DIR (--prompt TEXT | --prompt-ids ID,ID,...) [options]\n\n%s",
                args.describe().c_str());
    return 0;
  }
  std::vector<std::string> prompts = args.all("prompt");
  if (args.has("prompt-file")) prompts.push_back(read_text_file(args.text("prompt-file", "")));
  const bool as_ids = args.has("prompt-ids");
  if (as_ids && !prompts.empty()) throw UsageError("--prompt-ids and --prompt / --prompt-file: give one kind");
  if (!as_ids && prompts.empty()) throw UsageError("missing --prompt, --prompt-file or --prompt-ids");
  if (as_ids && args.has("stop")) throw UsageError("--stop matches text: with --prompt-ids, use --stop-id");
  models::GenerateOptions options;
  options.max_new_tokens = args.integer("max-new-tokens", 64, 1);
  options.sampling.temperature = args.flag("greedy") ? 0.0 : args.real("temperature", 1.0);
  options.sampling.top_k = args.integer("top-k", 0, 0);
  options.sampling.top_p = args.real("top-p", 1.0);
  options.sampling.seed = uint64_t(args.integer("seed", 0, 0));
  options.method = models::parse_decode_method(args.text("method", "auto"));
  for (const auto& id : args.all("stop-id")) options.stop_tokens.push_back(parse_integer("stop-id", id, 0));
  models::check_sampling_options(options.sampling);
  if (args.has("threads")) at::set_num_threads(int(args.integer("threads", 1, 1)));
  const std::vector<std::string> stops = args.all("stop");
  const bool quiet = args.flag("quiet");

  LoadedModel loaded = load_model_dir(args.required("model"), args.text("device", "cpu"));
  if (options.method == models::DecodeMethod::Distilled) {
    prepare_distillation(*loaded.model, args, quiet);
  } else if (args.has("order") || args.has("window")) {
    throw UsageError("--order and --window are options of --method distilled");
  }
  std::vector<std::vector<int64_t>> ids;
  if (as_ids) {
    for (const auto& list : args.all("prompt-ids")) ids.push_back(parse_integers("prompt-ids", list, 0));
  } else {
    const text::Tokenizer& tokenizer = loaded.text_tokenizer();
    for (size_t i = 0; i < prompts.size(); ++i) {
      ids.push_back(tokenizer.encode(prompts[i]));
      if (ids.back().empty()) throw UsageError("prompt " + std::to_string(i) + " is empty");
    }
  }

  // One prompt: stream its text (or ids) as it comes; stop early on a stop string.
  const bool stream = ids.size() == 1;
  Utf8Stream out;
  std::string text, printed;
  bool printed_an_id = false;
  auto on_tokens = [&](const std::vector<int64_t>& tokens) {
    if (!stream || tokens[0] < 0) return true;
    if (as_ids) {
      std::printf(printed_an_id ? " %lld" : "%lld", static_cast<long long>(tokens[0]));
      std::fflush(stdout);
      printed_an_id = true;
      return true;
    }
    text += out.push(loaded.tokenizer->token_bytes(tokens[0]));
    const auto [kept, stopped] = cut_at_stop(text, stops);
    // Hold back a tail that could still become a stop string.
    size_t hold = 0;
    for (const auto& s : stops) hold = std::max(hold, s.size() - 1);
    const size_t ready = stopped ? kept.size() : (kept.size() > hold ? kept.size() - hold : 0);
    if (ready > printed.size()) {
      std::fwrite(kept.data() + printed.size(), 1, ready - printed.size(), stdout);
      std::fflush(stdout);
      printed = kept.substr(0, ready);
    }
    return !stopped;
  };
  const models::GenerateResult result = models::generate(*loaded.model, ids, options, on_tokens);

  if (stream && as_ids) {
    std::printf("\n");
  } else if (stream) {
    const auto [kept, stopped] = cut_at_stop(text + out.finish(), stops);
    std::fwrite(kept.data() + printed.size(), 1, kept.size() - printed.size(), stdout);
    std::printf("\n");
  } else {
    for (size_t i = 0; i < ids.size(); ++i) {
      std::printf("--- %zu\n%s\n", i,
                  as_ids ? join_ids(result.tokens[i]).c_str()
                         : cut_at_stop(loaded.tokenizer->decode(result.tokens[i]), stops).first.c_str());
    }
  }
  if (!quiet) {
    std::vector<double> steps = result.step_seconds;
    std::sort(steps.begin(), steps.end());
    double total = result.prefill_seconds;
    for (double s : steps) total += s;
    size_t generated = 0;
    for (const auto& t : result.tokens) generated += t.size();
    std::fprintf(stderr, "[tmm] method %s; prefill %zu x %zu tokens: %.1f ms", models::to_string(result.method).c_str(),
                 ids.size(), std::min_element(ids.begin(), ids.end(), [](auto& a, auto& b) { return a.size() < b.size(); })->size(),
                 1e3 * result.prefill_seconds);
    if (!steps.empty()) {
      std::fprintf(stderr, "; %zu steps: median %.2f ms/step", steps.size(), 1e3 * steps[steps.size() / 2]);
    }
    std::fprintf(stderr, "; %zu tokens generated in %.2f s (%.1f tokens/s)\n", generated, total,
                 total > 0 ? double(generated) / total : 0.0);
  }
  return 0;
}

}  // namespace tmm::cli
