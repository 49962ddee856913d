// tmm._C._LanguageModel: a C++ model as tmm.models uses it. One generic
// binding serves every architecture: its tensors (which a Python module tree
// adopts after build or load), and the engine that decodes, generates and
// saves with a Python tree's tensors, bound to them (set_data: the same
// storage, no copy) before each call. The calls run without the GIL.
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "models/layers.h"
#include "models/online_toeplitz.h"
#include "models/registry.h"
#include "python/bindings.h"
#include "tmm/models/checkpoint.h"
#include "tmm/models/decoding.h"
#include "tmm/models/generation.h"
#include "tmm/models/hyena.h"
#include "tmm/models/language_model.h"
#include "tmm/models/mamba2.h"

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

// make(): a C++ module about to compute with a drop-in layer's tensors, so
// its own initial values are thrown away: their draws are undone, leaving
// the global generator as it was.
template <class Make>
auto without_draws(Make make) {
  auto gen = at::detail::getDefaultCPUGenerator();
  const auto saved = gen.get_state();
  auto made = make();
  gen.set_state(saved);
  return made;
}

NamedTensors named_tensors(LanguageModel& m) {
  NamedTensors out = to_vector(m.named_parameters(true));
  for (auto& item : to_vector(m.named_buffers(true))) out.push_back(std::move(item));
  return out;
}

// Makes each of the model's tensors the given one of the same name (same
// storage, dtype and device: set_data), after checking that the names and
// shapes are exactly the model's.
void bind(LanguageModel& m, const NamedTensors& tensors) {
  std::map<std::string, at::Tensor> given(tensors.begin(), tensors.end());
  const NamedTensors own = named_tensors(m);
  TORCH_CHECK(given.size() == own.size() && given.size() == tensors.size(), "bind: expected the model's ",
              own.size(), " tensors by name, got ", tensors.size());
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    auto it = given.find(name);
    TORCH_CHECK(it != given.end(), "bind: no tensor \"", name, "\"");
    TORCH_CHECK(it->second.sizes() == t.sizes(), "bind: \"", name, "\" has shape ", it->second.sizes(),
                ", the model's is ", t.sizes());
    at::Tensor(t).set_data(it->second);
  }
}

// The C++ ShortConv's decoding on a drop-in layer's weight and bias, with its
// previous inputs: tmm.nn's HyenaOperator.step runs it.
struct ShortConvDecoder {
  tmm::models::ShortConv conv{nullptr};
  at::Tensor last;  // B x (w-1) x C
};

std::unique_ptr<ShortConvDecoder> make_short_conv_decoder(const at::Tensor& weight, const at::Tensor& bias,
                                                          int64_t batch) {
  TORCH_CHECK(batch >= 1, "decode batch must be >= 1, got ", batch);
  TORCH_CHECK(weight.dim() == 3 && weight.size(1) == 1, "ShortConv: weight must be C x 1 x w, got ", weight.sizes());
  auto d = std::make_unique<ShortConvDecoder>();
  d->conv = without_draws([&] { return tmm::models::ShortConv(weight.size(0), weight.size(2)); });
  d->conv->weight = weight;
  d->conv->bias = bias;
  d->last = at::zeros({batch, weight.size(2) - 1, weight.size(0)}, weight.options());
  return d;
}

// A C++ Mamba2Mixer computing with a drop-in layer's own tensors, and its
// decoding state: tmm.nn's Mamba2Mixer.step runs the C++ decoder through it.
struct Mamba2Decoder {
  tmm::models::Mamba2Mixer mixer{nullptr};
  std::unique_ptr<tmm::models::Mamba2MixerDecodeState> state;
  int64_t position = 0;
};

std::unique_ptr<Mamba2Decoder> make_mamba2_decoder(const std::string& config_json,
                                                   const std::map<std::string, at::Tensor>& tensors, int64_t batch) {
  TORCH_CHECK(batch >= 1, "decode batch must be >= 1, got ", batch);
  auto get = [&](const std::string& name) {
    auto it = tensors.find(name);
    TORCH_CHECK(it != tensors.end(), "Mamba2 decoder: no tensor \"", name, "\"");
    return it->second;
  };
  auto d = std::make_unique<Mamba2Decoder>();
  const auto config = tmm::models::Mamba2Config::from_json_text(config_json);
  d->mixer = without_draws([&] { return tmm::models::Mamba2Mixer(config); });
  auto& mx = *d->mixer;
  mx.in_proj->weight = get("in_proj.weight");
  mx.conv1d->weight = get("conv1d.weight");
  mx.conv1d->bias = get("conv1d.bias");
  mx.dt_bias = get("dt_bias");
  mx.A_log = get("A_log");
  mx.D = get("D");
  mx.norm->weight = get("norm.weight");
  mx.out_proj->weight = get("out_proj.weight");
  d->state = std::make_unique<tmm::models::Mamba2MixerDecodeState>(mx.start_decoding(batch));
  return d;
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
      .def("named_tensors", &named_tensors, "[(name, tensor)]: its parameters, then its buffers (not copies)")
      .def("bind", &bind, py::arg("tensors"),
           "Makes its tensors the given (name, tensor) pairs, without a copy (set_data)")
      .def(
          "train", [](LanguageModel& self, bool mode) { self.train(mode); }, py::arg("mode"),
          "Sets the training mode of the whole model")
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
  m.def(
      "_empty_model",
      [](const std::string& config_json) {
        auto model = without_draws([&] { return tmm::models::build_model(config_json); });
        model->eval();
        return model;
      },
      py::arg("config_json"),
      "A model of this configuration for bind() (its own initial values are drawn and undone), in eval mode");
  m.def("_load_checkpoint", &tmm::models::load_checkpoint, py::arg("dir"),
        py::call_guard<py::gil_scoped_release>(),
        "Builds the model of dir/config.json and fills it from dir/model.safetensors (validated first)");
  m.def("_save_checkpoint", &tmm::models::save_checkpoint, py::arg("model"), py::arg("dir"),
        py::call_guard<py::gil_scoped_release>(), "Writes dir/config.json and dir/model.safetensors atomically");
  m.def("_architectures", &tmm::models::architectures, "The architectures build_model knows");

  // What tmm.nn's drop-in layers take from the C++ models (docs/interop.md).
  m.def("_resolve_config", &tmm::models::resolve_config, py::arg("config_json"),
        "The validated config with every key spelled out (JSON text); errors name the key");
  m.def(
      "_norm_eps",
      [] {
        using namespace tmm::models;
        return std::map<std::string, double>{{to_string(NormKind::RMSNorm), kRMSNormEps},
                                             {to_string(NormKind::LayerNorm), kLayerNormEps},
                                             {Mamba2Config::kArch, mamba2::kNormEps}};
      },
      "The norms' epsilons: make_norm's RMSNorm and LayerNorm, and every norm of mamba2");
  m.def(
      "_initial_values",
      [](const std::string& config_json, const std::string& part) {
        const auto built = tmm::models::build_part(config_json, part);
        return std::make_pair(to_vector(built->named_parameters(true)), to_vector(built->named_buffers(true)));
      },
      py::arg("config_json"), py::arg("part"),
      "([(name, parameter)], [(name, buffer)]) of a model part built alone and initialised by C++");
  using tmm::models::OnlineToeplitz;
  py::class_<OnlineToeplitz>(m, "_OnlineToeplitz",
                             "Causal Toeplitz (or lower-triangular matrix) mixing fed a few positions at a time")
      .def(py::init([](at::Tensor weight, std::optional<at::Tensor> bias, int64_t batch, int64_t channels,
                       int64_t capacity, bool matrix, bool fast) {
             const auto kind = matrix ? OnlineToeplitz::Kind::Matrix : OnlineToeplitz::Kind::Toeplitz;
             return std::make_unique<OnlineToeplitz>(kind, std::move(weight), bias ? std::move(*bias) : at::Tensor(),
                                                     batch, channels, capacity, fast);
           }),
           py::arg("weight"), py::arg("bias"), py::arg("batch"), py::arg("channels"), py::arg("capacity"),
           py::arg("matrix") = false, py::arg("fast") = false)
      .def("forward", &OnlineToeplitz::forward, py::arg("x"), py::call_guard<py::gil_scoped_release>(),
           "B x T x C at the next T positions -> B x T x C")
      .def_property_readonly("position", &OnlineToeplitz::position)
      .def_property_readonly("state_bytes", &OnlineToeplitz::state_bytes);
  py::class_<ShortConvDecoder>(m, "_ShortConvDecoder", "The C++ ShortConv's decoding over a drop-in layer's tensors")
      .def(py::init(&make_short_conv_decoder), py::arg("weight"), py::arg("bias"), py::arg("batch"))
      .def(
          "forward", [](ShortConvDecoder& d, const at::Tensor& u) { return d.conv->decode(u, d.last); }, py::arg("u"),
          py::call_guard<py::gil_scoped_release>(), "B x T x C at the next positions -> B x T x C");
  py::class_<Mamba2Decoder>(m, "_Mamba2Decoder", "The C++ Mamba2 decoder over a drop-in layer's tensors")
      .def(py::init(&make_mamba2_decoder), py::arg("config_json"), py::arg("tensors"), py::arg("batch"))
      .def(
          "forward",
          [](Mamba2Decoder& d, const at::Tensor& u) {
            at::Tensor y = d.mixer->decode(u, *d.state, d.position);
            d.position += u.size(1);
            return y;
          },
          py::arg("u"), py::call_guard<py::gil_scoped_release>(),
          "B x T x d at the next positions (any T at position 0, then 1) -> B x T x d")
      .def_property_readonly("position", [](const Mamba2Decoder& d) { return d.position; });
}

}  // namespace tmm::python
