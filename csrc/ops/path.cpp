// The process-wide kernel path (<tmm/ops/path.h>): one atomic, initialised
// at the first read from TMM_CUDA_ALGORITHM, the environment variable that chose
// the CUDA path before this option existed.
#include "tmm/ops/path.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "cpu/toeplitz_cpu.h"

namespace tmm::ops {
namespace {

constexpr Path kPaths[] = {Path::kAuto, Path::kDirect, Path::kFft, Path::kCufft, Path::kFused};

Path initial_path() {
  const char* v = std::getenv("TMM_CUDA_ALGORITHM");
  if (v == nullptr || *v == '\0') return Path::kAuto;
  const std::string_view name(v);
  if (name == "auto" || name == "cufft" || name == "fused") return parse_path(name);
  throw std::invalid_argument("TMM_CUDA_ALGORITHM: expected auto, cufft or fused (or unset), got '" +
                              std::string(name) + "'");
}

// The current path as an int; kUnread until the first path() or set_path(),
// so that set_path() overrides even a bad TMM_CUDA_ALGORITHM.
constexpr int kUnread = -1;
std::atomic<int> g_path{kUnread};

}  // namespace

Path path() {
  int v = g_path.load(std::memory_order_relaxed);
  if (v == kUnread) {
    int expected = kUnread;  // a set_path() racing with this first read wins
    g_path.compare_exchange_strong(expected, int(initial_path()), std::memory_order_relaxed);
    v = g_path.load(std::memory_order_relaxed);
  }
  return Path(v);
}

void set_path(Path p) { g_path.store(int(p), std::memory_order_relaxed); }

const char* path_name(Path p) {
  switch (p) {
    case Path::kAuto: return "auto";
    case Path::kDirect: return "direct";
    case Path::kFft: return "fft";
    case Path::kCufft: return "cufft";
    case Path::kFused: return "fused";
  }
  return "?";
}

Path parse_path(std::string_view name) {
  for (Path p : kPaths) {
    if (name == path_name(p)) return p;
  }
  throw std::invalid_argument("kernel path: expected auto, direct, fft, cufft or fused, got '" + std::string(name) +
                              "'");
}

int64_t direct_crossover_length() { return cpu::direct_crossover_length(); }

}  // namespace tmm::ops
