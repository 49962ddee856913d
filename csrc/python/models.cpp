// tmm._C._LanguageModel: the C++ models as seen by tmm.models.
//
// One generic binding serves every architecture. It hands Python the C++
// module's own tensors (a C++ tensor always comes back to Python as the same
// PyObject), its module names and kinds, a per-submodule train(), and the
// forward passes, which run without the GIL. tmm/models/_mirror.py builds the
// torch.nn.Module tree over them (docs/design/cpp_models_in_python.md).
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "python/bindings.h"
#include "tmm/models/checkpoint.h"
#include "tmm/models/decoding.h"
#include "tmm/models/generation.h"
#include "tmm/models/language_model.h"

namespace tmm::python {
namespace {

using tmm::models::LanguageModel;
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

template <class Dict>
NamedTensors to_vector(const Dict& dict) {
  NamedTensors out;
  out.reserve(dict.size());
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}

std::shared_ptr<torch::nn::Module> submodule(LanguageModel& m, const std::string& name) {
  if (name.empty()) return m.shared_from_this();
  auto modules = m.named_modules();
  const auto* found = modules.find(name);
  TORCH_CHECK(found != nullptr, "the model has no submodule '", name, "'");
  return *found;
}

}  // namespace

void bind_models(py::module& m) {
  using tmm::models::DecodeState;
  py::class_<DecodeState>(m, "_DecodeState", "Incremental-decoding state of a batch (LanguageModel.start_decoding)")
      .def_property_readonly("batch_size", &DecodeState::batch_size)
      .def_property_readonly("capacity", &DecodeState::capacity)
      .def_property_readonly("position", &DecodeState::position)
      .def_property_readonly("method", [](const DecodeState& s) { return tmm::models::to_string(s.method()); })
      .def_property_readonly("state_bytes", &DecodeState::state_bytes,
                             "bytes of the tensors the state holds (caches, ring buffers, modes), measured");

  py::class_<LanguageModel, std::shared_ptr<LanguageModel>>(m, "_LanguageModel",
                                                            "A C++ tmm::models::LanguageModel (use tmm.models)")
      .def("named_parameters", [](LanguageModel& self) { return to_vector(self.named_parameters(true)); },
           "[(name, tensor)]: the C++ parameters themselves, not copies")
      .def("named_buffers", [](LanguageModel& self) { return to_vector(self.named_buffers(true)); },
           "[(name, tensor)]: the C++ buffers themselves")
      .def("named_modules",
           [](LanguageModel& self) {
             std::vector<std::string> names;
             for (const auto& item : self.named_modules()) names.push_back(item.key());
             return names;
           },
           "Module paths, parents first: '', 'embed', 'blocks', 'blocks.0', ...")
      .def("module_kind", [](LanguageModel& self, const std::string& name) { return submodule(self, name)->name(); },
           py::arg("name"), "The C++ class of a submodule, e.g. 'torch::nn::ModuleList'")
      .def("train",
           [](LanguageModel& self, const std::string& prefix, bool mode) { submodule(self, prefix)->train(mode); },
           py::arg("prefix"), py::arg("mode"), "Sets the training mode of a submodule and its children")
      .def(
          "is_training",
          [](LanguageModel& self, const std::string& name) { return submodule(self, name)->is_training(); },
          py::arg("name") = std::string(), "The training mode of a submodule, as C++ sees it")
      .def("forward", [](LanguageModel& self, const at::Tensor& ids) { return self.forward(ids); },
           py::arg("input_ids"), py::call_guard<py::gil_scoped_release>(), "B x L int64 -> logits B x L x V")
      .def("forward_with",
           [](LanguageModel& self, const at::Tensor& ids, const std::optional<at::Tensor>& labels,
              bool return_hidden) {
             auto out = self.forward_with(ids, labels, return_hidden);
             auto maybe = [](at::Tensor& t) {
               return t.defined() ? std::optional<at::Tensor>(std::move(t)) : std::nullopt;
             };
             return std::make_tuple(std::move(out.logits), maybe(out.hidden), maybe(out.loss));
           },
           py::arg("input_ids"), py::arg("labels") = py::none(), py::arg("return_hidden") = false,
           py::call_guard<py::gil_scoped_release>(),
           "(logits, hidden or None, mean cross-entropy against labels (-100 ignored) or None)")
      .def("hidden_states", [](LanguageModel& self, const at::Tensor& ids) { return self.hidden_states(ids); },
           py::arg("input_ids"), py::call_guard<py::gil_scoped_release>(), "B x L int64 -> B x L x d")
      .def(
          "start_decoding",
          [](LanguageModel& self, int64_t batch, int64_t capacity, const std::string& method) {
            return self.start_decoding(batch, capacity, tmm::models::parse_decode_method(method));
          },
          py::arg("batch"), py::arg("capacity"), py::arg("method") = "auto")
      .def("decode", &LanguageModel::decode, py::arg("state"), py::arg("input_ids"),
           py::call_guard<py::gil_scoped_release>(), "B x T int64 at the state's next positions -> logits B x T x V")
      .def(
          "generate",
          [](LanguageModel& self, const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens,
             double temperature, int64_t top_k, double top_p, uint64_t seed, const std::vector<int64_t>& stop_tokens,
             const std::string& method, const std::optional<py::function>& on_tokens) {
            tmm::models::GenerateOptions o;
            o.max_new_tokens = max_new_tokens;
            o.sampling = {temperature, top_k, top_p, seed};
            o.stop_tokens = stop_tokens;
            o.method = tmm::models::parse_decode_method(method);
            tmm::models::TokenCallback callback;
            if (on_tokens) {
              callback = [&](const std::vector<int64_t>& tokens) {
                py::gil_scoped_acquire gil;
                py::object keep_going = (*on_tokens)(tokens);
                return keep_going.is_none() || keep_going.cast<bool>();
              };
            }
            tmm::models::GenerateResult r;
            {
              py::gil_scoped_release no_gil;
              r = tmm::models::generate(self, prompts, o, callback);
            }
            py::dict out;
            out["tokens"] = r.tokens;
            out["finish_reasons"] = r.finish_reasons;
            out["method"] = tmm::models::to_string(r.method);
            out["prefill_seconds"] = r.prefill_seconds;
            out["step_seconds"] = r.step_seconds;
            return out;
          },
          py::arg("prompts"), py::arg("max_new_tokens"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
          py::arg("seed"), py::arg("stop_tokens"), py::arg("method"), py::arg("on_tokens") = py::none())
      .def("config_json", &LanguageModel::config_json, "The full validated configuration (JSON text)")
      .def("parameter_count", &LanguageModel::parameter_count);

  m.def("_build_model", &tmm::models::build_model, py::arg("config_json"),
        "Builds an untrained model from its JSON configuration (text)");
  m.def("_load_checkpoint", &tmm::models::load_checkpoint, py::arg("dir"),
        py::call_guard<py::gil_scoped_release>(),
        "Builds the model of dir/config.json and fills it from dir/model.safetensors (validated first)");
  m.def("_save_checkpoint", &tmm::models::save_checkpoint, py::arg("model"), py::arg("dir"),
        py::call_guard<py::gil_scoped_release>(), "Writes dir/config.json and dir/model.safetensors atomically");
  m.def("_architectures", &tmm::models::architectures, "The architectures build_model knows");
}

}  // namespace tmm::python
