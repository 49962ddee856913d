// tmm._C distillation bindings (tmm/models/distill.h), wrapped by tmm/distill.py.
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>

#include "python/bindings.h"
#include "tmm/models/distill.h"
#include "tmm/models/language_model.h"

namespace tmm::python {

void bind_distill(py::module& m) {
  using namespace tmm::models;
  auto fit_options = [](int64_t order, int64_t steps, double lr, int64_t hankel_rows, double max_radius) {
    FitOptions o;
    o.order = order;
    o.steps = steps;
    o.lr = lr;
    o.hankel_rows = hankel_rows;
    o.max_radius = max_radius;
    return o;
  };

  py::class_<Distillation, std::shared_ptr<Distillation>>(m, "_Distillation",
                                                          "Every long kernel of a model as modes (tmm.distill)")
      .def_readonly("order", &Distillation::order)
      .def_readonly("window", &Distillation::window)
      .def("names", [](const Distillation& d) {
        std::vector<std::string> out;
        for (const auto& item : d.kernels) out.push_back(item.first);
        return out;
      })
      .def("kernel",
           [](const Distillation& d, const std::string& name) {
             const DistilledKernel& k = d.kernel(name);
             py::dict out;
             out["taps"] = k.taps;
             out["direct"] = k.direct.defined() ? py::cast(k.direct) : py::none();
             out["lambda"] = k.lambda;
             out["residue"] = k.residue;
             out["error"] = k.error;
             out["length"] = k.length;
             return out;
           },
           py::arg("name"))
      .def(
          "materialize", [](const Distillation& d, const std::string& name, int64_t n) { return d.kernel(name).materialize(n); },
          py::arg("name"), py::arg("n"), "G x K x n float64: the kernel the distilled decoder runs");

  m.def(
      "_distill",
      [=](LanguageModel& model, int64_t order, int64_t window, int64_t steps, double lr, int64_t hankel_rows,
          double max_radius) {
        DistillOptions o;
        o.fit = fit_options(order, steps, lr, hankel_rows, max_radius);
        o.window = window;
        return distill(model, o);
      },
      py::arg("model"), py::arg("order"), py::arg("window"), py::arg("steps"), py::arg("lr"), py::arg("hankel_rows"),
      py::arg("max_radius"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "_fit_modal",
      [=](const at::Tensor& kernels, int64_t order, int64_t steps, double lr, int64_t hankel_rows, double max_radius) {
        const ModalFit f = fit_modal(kernels, fit_options(order, steps, lr, hankel_rows, max_radius));
        return std::make_tuple(f.lambda, f.residue, f.error, f.abs_error);
      },
      py::arg("kernels"), py::arg("order"), py::arg("steps"), py::arg("lr"), py::arg("hankel_rows"),
      py::arg("max_radius"), py::call_guard<py::gil_scoped_release>());
  m.def("_modal_kernel", &modal_kernel, py::arg("lam"), py::arg("residue"), py::arg("n"));
  m.def("_save_distillation", &save_distillation, py::arg("distillation"), py::arg("dir"));
  m.def("_load_distillation", &load_distillation, py::arg("dir"));
  m.def("_has_distillation", &has_distillation, py::arg("dir"));
  m.def("_set_distillation",
        [](LanguageModel& model, const std::shared_ptr<Distillation>& d) { model.set_distillation(d); },
        py::arg("model"), py::arg("distillation"));
  m.def("_get_distillation",
        [](const LanguageModel& model) { return std::const_pointer_cast<Distillation>(model.distillation()); },
        py::arg("model"));
}

}  // namespace tmm::python
