// tmm._C: the thin Python binding. Loading it loads libtmm_torch, whose
// static initialisers register the tmm operators with the dispatcher; the
// ops themselves are reached through torch.ops.tmm.
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include "ops/cpu_algorithm.h"
#include "tmm/version.h"

namespace {

void set_cpu_algorithm(const std::string& name) {
  using tmm::cpu::Algorithm;
  if (name == "auto") tmm::detail::set_cpu_algorithm(Algorithm::kAuto);
  else if (name == "direct") tmm::detail::set_cpu_algorithm(Algorithm::kDirect);
  else if (name == "fft") tmm::detail::set_cpu_algorithm(Algorithm::kFft);
  else throw std::invalid_argument("cpu algorithm: expected 'auto', 'direct' or 'fft', got '" + name + "'");
}

std::string cpu_algorithm() {
  switch (tmm::detail::cpu_algorithm()) {
    case tmm::cpu::Algorithm::kDirect: return "direct";
    case tmm::cpu::Algorithm::kFft: return "fft";
    default: return "auto";
  }
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tmm native module: loads libtmm_torch and its operators";
  m.attr("__version__") = TMM_VERSION;
  m.attr("torch_version") = TMM_TORCH_VERSION;
  m.attr("with_cuda") = bool(TMM_WITH_CUDA);
  m.attr("direct_crossover_length") = tmm::cpu::direct_crossover_length();
  m.def("_set_cpu_algorithm", &set_cpu_algorithm, "Force the CPU path: 'auto', 'direct' or 'fft'");
  m.def("_cpu_algorithm", &cpu_algorithm, "The forced CPU path ('auto' unless set)");
}
