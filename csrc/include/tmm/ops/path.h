// Which implementation the causal-Toeplitz ops run: one process-wide choice,
// for tests, benchmarks and crossover measurements. kAuto (the default) is
// the right choice everywhere else.
//
//   path     CPU                                  CUDA
//   auto     direct while L*K <= the crossover    fused where it applies and
//            below, else fft                      is faster, else cufft
//   direct   the time-domain kernels, O(K L^2)    (auto)
//   fft      tmm's own FFT kernels                (auto)
//   cufft    (auto)                               the cuFFT kernels
//   fused    (auto)                               the fused on-chip FFT kernels
//
// A forced path that cannot run a call (its device lacks that path, or the
// fused kernels do not take the call's dtype, length or taps) runs auto's
// choice for that call: "(auto)" above. So one setting can wrap a model
// whose ops run on several devices; a test that must know which kernels ran
// forces a path its device has for every shape (direct and fft on the CPU
// always apply).
//
// Process-wide, not per thread: the backward of a forward run under a path
// runs on autograd's threads, and the setting must reach it. Reads are
// atomic (every op call reads it once per pass); threads that set different
// paths at the same time race, and the last one wins.
#pragma once

#include <cstdint>
#include <string_view>

namespace tmm::ops {

enum class Path { kAuto, kDirect, kFft, kCufft, kFused };

// The current path. Its initial value is kAuto, or the environment variable
// TMM_CUDA_ALGORITHM (auto, cufft or fused) read at the first call: any
// other value makes this (and every op call) throw std::invalid_argument
// naming the variable, until set_path() sets a path.
Path path();
void set_path(Path p);

// "auto", "direct", "fft", "cufft", "fused".
const char* path_name(Path p);

// The path with that name; std::invalid_argument naming the value and the
// accepted names otherwise.
Path parse_path(std::string_view name);

// Sets a path for its own lifetime and restores the previous one after.
// Process-wide, like set_path.
class PathGuard {
 public:
  explicit PathGuard(Path p) : previous_(path()) { set_path(p); }
  ~PathGuard() { set_path(previous_); }
  PathGuard(const PathGuard&) = delete;
  PathGuard& operator=(const PathGuard&) = delete;

 private:
  Path previous_;
};

// kAuto takes the CPU's direct path while L * K <= this length.
int64_t direct_crossover_length();

}  // namespace tmm::ops
