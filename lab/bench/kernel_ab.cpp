// Interleaved A/B of two builds of the CPU FFT kernels in one process
// (scripts/kernel_ab.sh builds it): tables "a" and "b" are the kernel
// tables of one instruction-set variant from two source trees, linked side
// by side (each variant object exports only its table, renamed here). Calls
// alternate a, b, a, b, ... on the same inputs, so both see the same load on
// a shared machine; prints the min and median ms of each and whether their
// outputs are bitwise equal (a change that only reorders memory access must
// keep them so).
//
//   kernel_ab L MODE REPS [THREADS B C G K]     MODE: fwd, bwd or both
//   AB_ONLY=a|b: run one table only (profiling); AB_ENV_A / AB_ENV_B=NAME=VALUE:
//   an environment variable set before each call of that table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/kernel_table.h"

extern "C" const tmm::cpu::KernelTable* kernel_table_a();
extern "C" const tmm::cpu::KernelTable* kernel_table_b();

namespace {

using namespace tmm;

// Splits [0, n) into `threads` contiguous ranges, as at::parallel_for does.
cpu::ParallelFor parallel_for(int threads) {
  return [threads](int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    if (n <= 0) return;
    const int64_t parts = std::min<int64_t>(threads, n), chunk = (n + parts - 1) / parts;
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < parts; ++t)
      pool.emplace_back([&, t] { body(t * chunk, std::min(n, (t + 1) * chunk)); });
    body(0, std::min(n, chunk));
    for (auto& t : pool) t.join();
  };
}

void set_env(const char* assignment) {
  if (!assignment) return;
  const std::string kv(assignment);
  const auto eq = kv.find('=');
  setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s L fwd|bwd|both REPS [THREADS B C G K]\n", argv[0]);
    return 2;
  }
  const int64_t L = std::atoll(argv[1]);
  const std::string mode = argv[2];
  const int reps = std::atoi(argv[3]);
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int64_t B = argc > 5 ? std::atoll(argv[5]) : 4, C = argc > 6 ? std::atoll(argv[6]) : 512;
  const int64_t G = argc > 7 ? std::atoll(argv[7]) : 1, K = argc > 8 ? std::atoll(argv[8]) : 1;
  if (L < 1 || reps < 0 || threads < 1 || B < 1 || C < 1 || G < 1 || C % G || K < 1 || K > C / G) {
    std::fprintf(stderr, "kernel_ab: expected L >= 1, REPS >= 0, THREADS >= 1 and a valid B, C, G, K\n");
    return 2;
  }
  const char* only = std::getenv("AB_ONLY");
  const cpu::ParallelFor pf = parallel_for(threads);

  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<float> x(B * L * C), gy(B * L * C), w(G * K * L), y(B * L * C), gx(B * L * C), gw(G * K * L);
  for (auto& v : x) v = normal(rng);
  for (auto& v : gy) v = normal(rng);
  for (auto& v : w) v = normal(rng) / std::sqrt(float(L));
  const kernels::ToeplitzShape s{B, L, C, G, K, L};
  const kernels::ToeplitzForwardParams<float> fp{s, x.data(), {L * C, C, 1}, w.data(), {K * L, L, 1},
                                                 nullptr, {0, 0}, y.data()};
  const kernels::ToeplitzBackwardParams<float> bp{s, gy.data(), {L * C, C, 1}, x.data(), {L * C, C, 1},
                                                  w.data(), {K * L, L, 1}, gx.data(), gw.data()};

  const cpu::KernelTable* tables[2] = {kernel_table_a(), kernel_table_b()};
  std::vector<double> ms[2];
  std::vector<float> out[2];
  for (int r = 0; r <= reps; ++r) {
    for (int k = 0; k < 2; ++k) {
      if (only && only[0] != "ab"[k]) continue;
      set_env(std::getenv(k ? "AB_ENV_B" : "AB_ENV_A"));
      const auto t0 = std::chrono::steady_clock::now();
      if (mode != "bwd") tables[k]->f32.forward_fft(fp, pf);
      if (mode != "fwd") tables[k]->f32.backward_fft(bp, pf);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) {  // the first call's outputs, compared below; its time (plans, first touch) is not kept
        out[k] = y;
        out[k].insert(out[k].end(), gx.begin(), gx.end());
        out[k].insert(out[k].end(), gw.begin(), gw.end());
      } else {
        ms[k].push_back(t);
      }
    }
  }
  std::printf("L=%lld %s B=%lld C=%lld G=%lld K=%lld threads=%d:", (long long)L, mode.c_str(), (long long)B,
              (long long)C, (long long)G, (long long)K, threads);
  for (int k = 0; k < 2; ++k) {
    if (ms[k].empty()) continue;
    std::sort(ms[k].begin(), ms[k].end());
    std::printf(" %c min %.3f med %.3f ms", "ab"[k], ms[k].front(), ms[k][ms[k].size() / 2]);
  }
  if (!ms[0].empty() && !ms[1].empty()) std::printf(" (b/a min %.3f)", ms[1].front() / ms[0].front());
  if (!only) std::printf(" %s", out[0] == out[1] ? "bitwise-equal" : "DIFFER");
  std::printf("\n");
  return only || out[0] == out[1] ? 0 : 1;
}
