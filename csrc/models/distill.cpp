// distill(): every long kernel of a model fitted (distill_fit.cpp), and the
// result saved beside a checkpoint as distilled.json + distilled.safetensors.
#include "tmm/models/distill.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include "io/atomic_file.h"
#include "io/paths.h"
#include "tmm/io/safetensors.h"
#include "tmm/models/language_model.h"

namespace tmm::models {
namespace {

constexpr const char* kJsonFile = "distilled.json";
constexpr const char* kTensorsFile = "distilled.safetensors";
constexpr const char* kFormat = "tmm-distilled-1";

}  // namespace

at::Tensor DistilledKernel::materialize(int64_t n) const {
  const int64_t G = lambda.size(0), K = lambda.size(1), W = taps.size(2);
  at::Tensor out = at::zeros({G, K, n}, at::kDouble);
  const int64_t exact = std::min(W, n);
  out.narrow(2, 0, exact).copy_(taps.narrow(2, 0, exact));
  if (n > W) out.narrow(2, W, n - W).copy_(modal_kernel(lambda, residue, n - W));
  if (W == 0 && direct.defined()) out.select(2, 0).add_(direct.to(at::kDouble));
  return out;
}

const DistilledKernel& Distillation::kernel(const std::string& name) const {
  auto it = kernels.find(name);
  TORCH_CHECK(it != kernels.end(), "distillation: no kernel '", name, "' (it has ", kernels.size(),
              "); was it fitted for another model?");
  return it->second;
}

std::shared_ptr<Distillation> distill(LanguageModel& model, const DistillOptions& options) {
  TORCH_CHECK(options.fit.order >= 1, "order: expected >= 1, got ", options.fit.order);
  TORCH_CHECK(options.window >= 0, "window: expected >= 0, got ", options.window);
  torch::NoGradGuard no_grad;
  const std::vector<LongKernel> kernels = model.long_kernels();
  TORCH_CHECK(!kernels.empty(), "distill: the ", model.arch(), " model has no long convolution kernels ",
              "(tmm and hyena have; tmm's \"masked\" mixer has none)");
  auto out = std::make_shared<Distillation>();
  out->order = options.fit.order;
  out->window = options.window;
  for (const auto& k : kernels) {
    const int64_t G = k.weight.size(0), K = k.weight.size(1), N = k.weight.size(2), W = options.window;
    TORCH_CHECK(W <= N, "window: expected <= the kernels' length ", N, " (", k.name, "), got ", W);
    DistilledKernel d;
    d.length = N;
    d.taps = k.weight.narrow(2, 0, W).detach().to(at::kCPU).clone();
    if (k.direct.defined()) d.direct = k.direct.detach().to(at::kCPU).clone();
    at::Tensor w = k.weight.detach().to(at::kCPU, at::kDouble);
    if (d.direct.defined()) {
      w = w.clone();
      w.select(2, 0).sub_(d.direct.to(at::kDouble));
    }
    const at::Tensor norm = w.norm(2, 2);  // G x K, without the exact direct term
    if (W < N) {
      const ModalFit fit = fit_modal(w.narrow(2, W, N - W), options.fit);
      d.lambda = fit.lambda;
      d.residue = fit.residue;
      d.error = at::where(norm > 0, fit.abs_error / norm.clamp_min(1e-300), at::zeros_like(norm));
    } else {  // the window covers the kernel: nothing left to fit
      d.lambda = at::zeros({G, K, options.fit.order}, at::kComplexDouble);
      d.residue = at::zeros_like(d.lambda);
      d.error = at::zeros({G, K}, at::kDouble);
    }
    out->kernels.emplace(k.name, std::move(d));
  }
  return out;
}

void save_distillation(const Distillation& d, const std::string& dir) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [name, k] : d.kernels) {
    tensors.emplace_back(name + ".taps", k.taps);
    if (k.direct.defined()) tensors.emplace_back(name + ".direct", k.direct);
    tensors.emplace_back(name + ".lambda_re", at::real(k.lambda).contiguous());
    tensors.emplace_back(name + ".lambda_im", at::imag(k.lambda).contiguous());
    tensors.emplace_back(name + ".residue_re", at::real(k.residue).contiguous());
    tensors.emplace_back(name + ".residue_im", at::imag(k.residue).contiguous());
    tensors.emplace_back(name + ".error", k.error);
    kernels[name] = {{"length", k.length},
                     {"error_max", k.error.max().item<double>()},
                     {"error_mean", k.error.mean().item<double>()}};
  }
  io::save_safetensors(io::join_path(dir, kTensorsFile), tensors, {{"format", kFormat}});
  const nlohmann::json j = {{"format", kFormat}, {"order", d.order}, {"window", d.window}, {"kernels", kernels}};
  io::write_file_atomically(io::join_path(dir, kJsonFile), j.dump(2) + "\n");
}

bool has_distillation(const std::string& dir) { return io::is_regular_file(io::join_path(dir, kJsonFile)); }

std::shared_ptr<Distillation> load_distillation(const std::string& dir) {
  const std::string json_path = io::join_path(dir, kJsonFile), tensors_path = io::join_path(dir, kTensorsFile);
  std::ifstream f(json_path);
  TORCH_CHECK(f, "load_distillation: cannot read '", json_path, "'");
  std::stringstream text;
  text << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  TORCH_CHECK(j.is_object() && j.contains("format") && j["format"] == kFormat && j.contains("kernels") &&
                  j["kernels"].is_object(),
              "load_distillation: '", json_path, "' is not a ", kFormat, " file");
  // An integer field >= low of a JSON object (`where` names it in the error).
  auto count = [&](const nlohmann::json& obj, const char* key, int64_t low, const std::string& where) {
    TORCH_CHECK(obj.is_object() && obj.contains(key) && obj[key].is_number_integer() && obj[key].get<int64_t>() >= low,
                "load_distillation: '", json_path, "': ", where, "\"", key, "\" must be an integer >= ", low);
    return obj[key].get<int64_t>();
  };
  io::SafetensorsFile file = io::load_safetensors(tensors_path);
  auto tensor = [&](const std::string& name, bool required) {
    auto it = file.tensors.find(name);
    TORCH_CHECK(!required || it != file.tensors.end(), "load_distillation: '", tensors_path, "' has no tensor '",
                name, "'");
    return it == file.tensors.end() ? at::Tensor() : it->second;
  };
  auto out = std::make_shared<Distillation>();
  out->order = count(j, "order", 1, "");
  out->window = count(j, "window", 0, "");
  for (const auto& [name, info] : j["kernels"].items()) {
    DistilledKernel k;
    k.length = count(info, "length", std::max<int64_t>(out->window, 1), "kernel '" + name + "': ");
    k.taps = tensor(name + ".taps", true);
    k.direct = tensor(name + ".direct", false);
    k.lambda = at::complex(tensor(name + ".lambda_re", true), tensor(name + ".lambda_im", true));
    k.residue = at::complex(tensor(name + ".residue_re", true), tensor(name + ".residue_im", true));
    k.error = tensor(name + ".error", true);
    TORCH_CHECK(k.lambda.dim() == 3 && k.lambda.size(2) == out->order && k.taps.dim() == 3 &&
                    k.taps.sizes().slice(0, 2) == k.lambda.sizes().slice(0, 2) && k.taps.size(2) == out->window &&
                    k.residue.sizes() == k.lambda.sizes() && k.error.sizes() == k.lambda.sizes().slice(0, 2) &&
                    (!k.direct.defined() || k.direct.sizes() == k.lambda.sizes().slice(0, 2)),
                "load_distillation: '", tensors_path, "': kernel '", name, "' has modes ", k.lambda.sizes(),
                ", taps ", k.taps.sizes(), ", error ", k.error.sizes(),
                k.direct.defined() ? ", direct " + c10::str(k.direct.sizes()) : std::string(),
                ", expected G x K x order ", out->order, ", G x K x window ", out->window, ", G x K");
    TORCH_CHECK((at::abs(k.lambda) < 1).all().item<bool>(), "load_distillation: '", tensors_path, "': kernel '",
                name, "' has a mode with |lambda| >= 1 (unstable)");
    out->kernels.emplace(name, std::move(k));
  }
  return out;
}

}  // namespace tmm::models
