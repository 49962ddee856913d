// Choosing the instruction-set variant of the hot kernels at run time, as
// ATen's DispatchStub does: the variants the build compiled (CMake defines
// TMM_CPU_VARIANT_<NAME> = 0/1 for this file), a cpuid check of what this
// CPU and its operating system support (GCC's and Clang's
// __builtin_cpu_supports test the XSAVE state too), and the cap
// TMM_CPU_CAPABILITY.
#include "cpu/capability.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace tmm::cpu {
namespace {

struct Variant {
  const char* name;
  const KernelTable* (*table)();
  bool (*runs_here)();
};

[[maybe_unused]] bool always() { return true; }

#if defined(__x86_64__) || defined(_M_X64)
[[maybe_unused]] bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
[[maybe_unused]] bool has_avx512() {
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

// Ascending: each variant needs at least what the one before it needs.
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
#if TMM_CPU_VARIANT_DEFAULT
      {"default", &tmm_cpu_kernels_default, &always},
#endif
#if TMM_CPU_VARIANT_AVX2
      {"avx2", &tmm_cpu_kernels_avx2, &has_avx2},
#endif
#if TMM_CPU_VARIANT_AVX512
      {"avx512", &tmm_cpu_kernels_avx512, &has_avx512},
#endif
#if TMM_CPU_VARIANT_NATIVE
      // Compiled for the building machine: runs here by definition (and
      // dies with SIGILL on a CPU that lacks what that machine had).
      {"native", &tmm_cpu_kernels_native, &always},
#endif
  };
  return v;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& v : variants()) names.push_back(v.name);
  return names;
}

std::vector<bool> variants_running_here() {
  std::vector<bool> runs;
  for (const auto& v : variants()) runs.push_back(v.runs_here());
  return runs;
}

std::atomic<const Variant*> g_active{nullptr};

const Variant& active() {
  const Variant* v = g_active.load(std::memory_order_acquire);
  if (v != nullptr) return *v;
  const CapabilityChoice choice =
      choose_capability(variant_names(), variants_running_here(), std::getenv("TMM_CPU_CAPABILITY"));
  const Variant* expected = nullptr;  // a force_capability() racing with this first call wins
  if (g_active.compare_exchange_strong(expected, &variants()[choice.index], std::memory_order_acq_rel) &&
      !choice.warning.empty()) {
    std::fprintf(stderr, "tmm: %s\n", choice.warning.c_str());
  }
  return *g_active.load(std::memory_order_acquire);
}

}  // namespace

CapabilityChoice choose_capability(const std::vector<std::string>& names, const std::vector<bool>& runs,
                                   const char* requested) {
  std::size_t best = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (runs[i]) best = i;
  }
  if (requested == nullptr || *requested == '\0') return {best, ""};
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] != requested) continue;
    if (i <= best) return {i, ""};
    return {best, "TMM_CPU_CAPABILITY=" + names[i] + " is above what this CPU supports; running " + names[best]};
  }
  throw std::invalid_argument("TMM_CPU_CAPABILITY: expected one of this build's CPU capabilities (" + joined(names) +
                              ") or unset, got '" + requested + "'");
}

const KernelTable& active_kernels() { return *active().table(); }

const char* active_capability() { return active().name; }

std::vector<std::string> supported_capabilities() {
  std::vector<std::string> names;
  for (auto it = variants().rbegin(); it != variants().rend(); ++it) {
    if (it->runs_here()) names.push_back(it->name);
  }
  return names;
}

void force_capability(std::string_view name) {
  for (const auto& v : variants()) {
    if (name != v.name) continue;
    if (!v.runs_here()) {
      throw std::invalid_argument("CPU capability '" + std::string(name) + "': this CPU does not support it (it runs " +
                                  joined(supported_capabilities()) + ")");
    }
    g_active.store(&v, std::memory_order_release);
    return;
  }
  throw std::invalid_argument("CPU capability: expected one of this build's (" + joined(variant_names()) +
                              "), got '" + std::string(name) + "'");
}

}  // namespace tmm::cpu
