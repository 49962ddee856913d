// tmm._C: the thin Python binding. Loading it loads libtmm_torch, whose
// static initialisers register the tmm operators with the dispatcher; the
// ops themselves are reached through torch.ops.tmm.
// torch's pybind header brings the at::Tensor <-> torch.Tensor casters
// (from libtorch_python) and pybind11/stl.h.
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "python/bindings.h"
#include "tmm/io/safetensors.h"
#include "tmm/ops/cpu_capability.h"
#include "tmm/ops/path.h"
#include "tmm/version.h"

namespace {

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
  m.attr("direct_crossover_length") = tmm::ops::direct_crossover_length();
  // The kernel path (<tmm/ops/path.h>); a bad name raises ValueError
  // (std::invalid_argument).
  m.def("_set_path", [](const std::string& name) { tmm::ops::set_path(tmm::ops::parse_path(name)); },
        py::arg("name"), "Set the process-wide kernel path: auto, direct, fft, cufft or fused");
  m.def("_path", [] { return std::string(tmm::ops::path_name(tmm::ops::path())); },
        "The process-wide kernel path's name");
  m.def("_cpu_capability", &tmm::ops::cpu_capability, "The instruction set the CPU kernels run with");
  m.def("_cpu_capabilities", &tmm::ops::cpu_capabilities,
        "The CPU capabilities this build has and this CPU supports, best first");
  // File I/O runs without the GIL; the tensors are converted before and after.
  m.def("_save_safetensors", &save_safetensors, py::arg("path"), py::arg("tensors"), py::arg("metadata"),
        py::call_guard<py::gil_scoped_release>(), "Write [(name, tensor)] and a string map atomically");
  m.def("_load_safetensors", &load_safetensors, py::arg("path"), py::call_guard<py::gil_scoped_release>(),
        "Read and validate a file: ({name: tensor}, metadata)");
  tmm::python::bind_models(m);
  tmm::python::bind_text(m);
  tmm::python::bind_distill(m);
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
