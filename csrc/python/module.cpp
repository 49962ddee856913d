// tmm._C: the thin Python binding. Loading it loads libtmm_torch, whose
// static initialisers register the tmm operators with the dispatcher; the
// ops themselves are reached through torch.ops.tmm.
// torch's pybind header brings the at::Tensor <-> torch.Tensor casters
// (from libtorch_python) and pybind11/stl.h.
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu_algorithm.h"
#include "python/bindings.h"
#include "tmm/io/safetensors.h"
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

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;
using StringMap = std::map<std::string, std::string>;

void save_safetensors(const std::string& path, const NamedTensors& tensors, const StringMap& metadata) {
  tmm::io::save_safetensors(path, tensors, metadata);
}

std::pair<std::map<std::string, at::Tensor>, StringMap> load_safetensors(const std::string& path) {
  auto file = tmm::io::load_safetensors(path);
  return {std::move(file.tensors), std::move(file.metadata)};
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
  // File I/O runs without the GIL; the tensors are converted before and after.
  m.def("_save_safetensors", &save_safetensors, py::arg("path"), py::arg("tensors"), py::arg("metadata"),
        py::call_guard<py::gil_scoped_release>(), "Write [(name, tensor)] and a string map atomically");
  m.def("_load_safetensors", &load_safetensors, py::arg("path"), py::call_guard<py::gil_scoped_release>(),
        "Read and validate a file: ({name: tensor}, metadata)");
  tmm::python::bind_models(m);
  tmm::python::bind_text(m);
  // c10::Error -> RuntimeError with the message only (what() appends a C++
  // backtrace); local, so torch's own bindings are left as they are.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}
