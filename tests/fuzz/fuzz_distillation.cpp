// libFuzzer target: saved distillations, tmm::models::load_distillation on a
// folder written from the input: distilled.json is the text before the first
// NUL byte, distilled.safetensors the bytes after it.
//
// Contract under test:
//  * any folder either loads or raises c10::Error;
//  * a distillation that loads is usable: each kernel's taps are G x K x
//    window, its modes and residues G x K x order, inside the unit circle,
//    and materialize(n) gives G x K x n for any n up to its length.
// Anything else (another exception, a crash, a sanitizer report, a hang) is a
// bug.
//
// Built and run by tests/fuzz/run.sh.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <tmm/models/distill.h>

#include "model_size.h"

namespace {

std::string g_dir;  // the folder each input is written to

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_distillation: %s\n", what.c_str());
  std::abort();
}

void write(const std::string& name, const std::string& bytes) {
  std::ofstream f(g_dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);
  char dir[] = "/tmp/tmm_fuzz_distillation_XXXXXX";
  if (!mkdtemp(dir)) fail("cannot make a temporary folder");
  g_dir = dir;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [text, tensors] = tmm_fuzz::split_at_nul(data, size);
  write("distilled.json", text);
  write("distilled.safetensors", tensors);
  std::shared_ptr<tmm::models::Distillation> d;
  try {
    d = tmm::models::load_distillation(g_dir);
  } catch (const c10::Error&) {
    return 0;  // a clean error
  }
  for (const auto& [name, k] : d->kernels) {
    const int64_t G = k.lambda.size(0), K = k.lambda.size(1);
    if (k.taps.sizes() != at::IntArrayRef({G, K, d->window}) ||
        k.lambda.sizes() != at::IntArrayRef({G, K, d->order}) || k.residue.sizes() != k.lambda.sizes())
      fail("kernel '" + name + "': taps " + c10::str(k.taps.sizes()) + ", modes " + c10::str(k.lambda.sizes()));
    if (!(at::abs(k.lambda) < 1).all().item<bool>()) fail("kernel '" + name + "': a mode outside the unit circle");
    try {
      for (const int64_t n : {int64_t(1), std::min<int64_t>(k.length, 64)}) {
        if (k.materialize(n).sizes() != at::IntArrayRef({G, K, n})) fail("kernel '" + name + "': materialize");
      }
    } catch (const c10::Error& e) {
      fail("kernel '" + name + "' loads but cannot be materialized: " + e.what_without_backtrace());
    }
  }
  return 0;
}
