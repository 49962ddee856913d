// Checkpoint directories: config.json + model.safetensors (see checkpoint.h).
// Loading validates the whole file against the freshly built model before a
// single tensor is copied, so a bad checkpoint never yields a half-loaded model.
#include "tmm/models/checkpoint.h"

#include "io/atomic_file.h"
#include "io/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include "tmm/io/safetensors.h"
#include "tmm/version.h"

namespace tmm::models {
namespace {

// POSIX calls rather than std::filesystem (io/paths.h says why).

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";

// mkdir -p: creates `dir` and its missing parents.
void make_directories(const std::string& dir) {
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    const std::string part = dir.substr(0, pos);
    if (!part.empty() && ::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      TORCH_CHECK(false, "save_checkpoint: cannot create the directory '", part, "': ", std::strerror(errno));
    }
    if (pos == std::string::npos) break;
  }
  TORCH_CHECK(io::is_directory(dir), "save_checkpoint: cannot create the directory '", dir,
              "': a file of that name exists");
}

// Every tensor the model's forward uses: parameters, then buffers.
std::vector<std::pair<std::string, at::Tensor>> named_tensors(const LanguageModel& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

// The dtypes a checkpoint tensor may have for a model tensor: the same kind
// (floating point, integer, boolean, complex); the copy converts within it.
const char* dtype_kind(at::ScalarType t) {
  if (t == at::kBool) return "boolean";
  if (at::isComplexType(t)) return "complex";
  if (at::isFloatingType(t)) return "floating point";
  return "integer";
}

}  // namespace

void save_checkpoint(LanguageModel& model, const std::string& dir) {
  TORCH_CHECK(!dir.empty(), "save_checkpoint: empty directory name");
  make_directories(dir);
  const nlohmann::json config = nlohmann::json::parse(model.config_json());
  const std::string arch = config.value("arch", std::string());
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"arch", arch}, {"tmm_version", TMM_VERSION}};
  // Weights first: a config.json next to them means the pair is complete.
  tmm::io::save_safetensors(io::join_path(dir, kWeightsFile), named_tensors(model), metadata);
  io::write_file_atomically(io::join_path(dir, kConfigFile), config.dump(2) + "\n");
}

// A config.json without a key whose default changes the forward (in
// training mode too) gets the value that computes what the checkpoint's
// model computed. Keys that only change the initialisation need nothing
// (the weights are loaded over it).
static std::string with_missing_forward_keys(const std::string& config_text) {
  nlohmann::json config = nlohmann::json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("arch") || !config["arch"].is_string()) return config_text;
  const std::string arch = config["arch"].get<std::string>();
  // An expanded mixer without "mixer_dropout" has no inner dropout.
  if (arch == "tmm" && config.value("mixer", std::string()) == "expanded" && !config.contains("mixer_dropout"))
    config["mixer_dropout"] = 0.0;
  // A Hyena without "final_norm" has a final LayerNorm.
  if (arch == "hyena" && !config.contains("final_norm")) config["final_norm"] = true;
  return config.dump();
}

std::shared_ptr<LanguageModel> load_checkpoint(const std::string& dir) {
  const std::string config_path = io::join_path(dir, kConfigFile);
  const std::string weights_path = io::join_path(dir, kWeightsFile);
  TORCH_CHECK(io::is_directory(dir), "load_checkpoint: '", dir, "' is not a directory");

  std::shared_ptr<LanguageModel> model;
  const std::string config_text = io::read_text_file(config_path, "checkpoint");
  try {
    model = build_model(with_missing_forward_keys(config_text));
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "checkpoint '", config_path, "': ", e.what_without_backtrace());
  }
  const std::string arch = nlohmann::json::parse(config_text).at("arch").get<std::string>();

  tmm::io::SafetensorsFile file = tmm::io::load_safetensors(weights_path);
  const std::string where = "checkpoint '" + weights_path + "'";
  auto meta_arch = file.metadata.find("arch");
  TORCH_CHECK(meta_arch == file.metadata.end() || meta_arch->second == arch, where, ": written by a \"",
              meta_arch->second, "\" model but config.json describes a \"", arch, "\" model");

  // Validate everything, then copy.
  const auto expected = named_tensors(*model);
  std::vector<std::string> missing;
  for (const auto& [name, t] : expected) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      missing.push_back(name);
      continue;
    }
    const at::Tensor& got = it->second;
    TORCH_CHECK(got.sizes() == t.sizes(), where, ": tensor '", name, "' has shape ", got.sizes(),
                ", the model expects ", t.sizes());
    TORCH_CHECK(std::strcmp(dtype_kind(got.scalar_type()), dtype_kind(t.scalar_type())) == 0, where,
                ": tensor '", name, "' is ", got.scalar_type(), ", the model's is ", t.scalar_type(), " (",
                dtype_kind(t.scalar_type()), ")");
  }
  TORCH_CHECK(missing.empty(), where, ": missing tensor", missing.size() > 1 ? "s" : "", " '",
              c10::Join("', '", missing), "' (", missing.size(), " of ", expected.size(), ")");
  if (file.tensors.size() != expected.size()) {
    std::map<std::string, bool> known;
    for (const auto& [name, _] : expected) known[name] = true;
    std::vector<std::string> extra;
    for (const auto& [name, _] : file.tensors)
      if (!known.count(name)) extra.push_back(name);
    TORCH_CHECK(false, where, ": unexpected tensor", extra.size() > 1 ? "s" : "", " '", c10::Join("', '", extra),
                "' (not in the \"", arch, "\" model of config.json)");
  }
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, t] : expected) {
      at::Tensor dst = t;  // shares the model's TensorImpl
      dst.copy_(file.tensors.at(name));
    }
  }
  return model;
}

}  // namespace tmm::models
