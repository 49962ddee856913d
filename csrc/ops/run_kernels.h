// Runs a torch-free kernel entry point from the op glue: the kernels report
// bad input as std::exception (they cannot throw c10 errors), which this
// turns into a c10::Error, so that Python sees a RuntimeError with the
// message; c10 errors pass through unchanged.
#pragma once

#include <exception>

#include <c10/util/Exception.h>

namespace tmm::detail {

// prefix goes before the kernel's message ("" where it names the op already).
template <class F>
void run_kernels(const char* prefix, F&& f) {
  try {
    f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, prefix, e.what());
  }
}

}  // namespace tmm::detail
