// tmm: generate text with, inspect and benchmark a tmm model directory from
// the command line, with no Python. `tmm --help` lists the commands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <c10/util/Exception.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tmm/version.h"

namespace {

const char kUsage[] =
    "usage: tmm COMMAND [options]   (tmm COMMAND --help for its options)\n"
    "\n"
    "commands:\n"
    "  generate       generate text from a prompt with a model directory\n"
    "  info           describe a model directory\n"
    "  bench-decode   time prefill and per-token decoding against context length\n"
    "  distill        fit a model's long kernels for decode method distilled, saved beside it\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("tmm %s (torch %s)\n", TMM_VERSION, TMM_TORCH_VERSION);
    return 0;
  }
  const std::string command = argv[1];
  try {
    if (command == "generate") return tmm::cli::generate_command(argc, argv);
    if (command == "info") return tmm::cli::info_command(argc, argv);
    if (command == "bench-decode") return tmm::cli::bench_decode_command(argc, argv);
    if (command == "distill") return tmm::cli::distill_command(argc, argv);
    std::fprintf(stderr, "tmm: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const tmm::cli::UsageError& e) {
    std::fprintf(stderr, "tmm %s: %s (see tmm %s --help)\n", command.c_str(), e.what(), command.c_str());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "tmm %s: %s\n", command.c_str(), e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tmm %s: %s\n", command.c_str(), e.what());
    return 1;
  }
}
