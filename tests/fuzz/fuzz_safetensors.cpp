// libFuzzer target: tmm::io::load_safetensors_from_buffer on arbitrary bytes.
//
// Contract under test: any input either loads or raises c10::Error. Anything
// else (another exception, a crash, a sanitizer report, a hang) is a bug. A
// successful load must also be self-consistent: the tensors tile the data
// section exactly, so their byte sizes add up to at most the input size.
//
// Built and run by tests/fuzz/run.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <tmm/io/safetensors.h>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tmm::io::SafetensorsFile f = tmm::io::load_safetensors_from_buffer(data, size);
    uint64_t total = 0;
    for (const auto& [name, t] : f.tensors) {
      if (!t.is_contiguous() || !t.device().is_cpu()) {
        std::fprintf(stderr, "tensor '%s' is not CPU contiguous\n", name.c_str());
        std::abort();
      }
      total += t.nbytes();
    }
    if (total + 8 > size) {
      std::fprintf(stderr, "loaded %llu tensor bytes from a %zu-byte input\n", (unsigned long long)total, size);
      std::abort();
    }
  } catch (const c10::Error&) {
    // A clean, documented error.
  }
  return 0;
}
