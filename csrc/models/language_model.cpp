#include "tmm/models/language_model.h"

#include <map>
#include <mutex>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/functional/linear.h>

#include "models/config_reader.h"
#include "models/registry.h"

namespace tmm::models {
namespace {

struct Architecture {
  ModelBuilder build;
  ConfigResolver resolve;
  PartBuilder parts;
};

std::map<std::string, Architecture>& registry() {
  static std::map<std::string, Architecture> archs;
  return archs;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// The parsed config and its architecture's registration; errors name "arch".
std::pair<nlohmann::json, Architecture> find_architecture(const std::string& config_json) {
  nlohmann::json config = parse_config_text(config_json, "model config");
  TORCH_CHECK(config.is_object(), "model config: expected a JSON object, got ", config.type_name());
  TORCH_CHECK(config.contains("arch") && config["arch"].is_string(),
              "model config: missing string key \"arch\" (one of ", c10::Join(", ", architectures()), ")");
  const std::string arch = config["arch"].get<std::string>();
  Architecture found;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(arch);
    if (it != registry().end()) found = it->second;
  }
  TORCH_CHECK(found.build, "model config: unknown \"arch\" \"", arch, "\" (known: ", c10::Join(", ", architectures()),
              ")");
  return {std::move(config), std::move(found)};
}

}  // namespace

ModelRegistration::ModelRegistration(const std::string& arch, ModelBuilder builder, ConfigResolver resolve,
                                     PartBuilder parts) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[arch] = {std::move(builder), std::move(resolve), std::move(parts)};
}

std::vector<std::string> architectures() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, _] : registry()) names.push_back(name);
  return names;
}

std::shared_ptr<LanguageModel> build_model(const std::string& config_json) {
  const auto [config, arch] = find_architecture(config_json);
  return arch.build(config);
}

std::string resolve_config(const std::string& config_json) {
  const auto [config, arch] = find_architecture(config_json);
  return arch.resolve(config);
}

std::shared_ptr<torch::nn::Module> build_part(const std::string& config_json, const std::string& part) {
  const auto [config, arch] = find_architecture(config_json);
  if (part == "model") return arch.build(config);
  std::shared_ptr<torch::nn::Module> built = arch.parts ? arch.parts(config, part) : nullptr;
  TORCH_CHECK(built, "model config: \"arch\" \"", config["arch"].get<std::string>(), "\" has no part \"", part, "\"");
  return built;
}

LanguageModel::LanguageModel(std::string arch, const CommonConfig& common) : arch_(std::move(arch)), common_(common) {
  embed_ = register_module("embed", torch::nn::Embedding(common.vocab_size, common.d_model));
  block_list_ = register_module("blocks", torch::nn::ModuleList());
}

void LanguageModel::add_block(std::shared_ptr<LanguageModelBlock> block) {
  block_list_->push_back(block);
  blocks_.push_back(std::move(block));
}

void LanguageModel::set_final_norm(const std::string& name, torch::nn::AnyModule norm) {
  TORCH_INTERNAL_ASSERT(final_norm_.is_empty(), arch_, ": the final norm is set twice");
  register_module(name, norm.ptr());
  final_norm_ = std::move(norm);
}

void LanguageModel::add_head(const std::function<torch::nn::Linear()>& make_head) {
  TORCH_INTERNAL_ASSERT(int64_t(blocks_.size()) == common_.n_layers, arch_, ": ", blocks_.size(),
                        " blocks added for n_layers = ", common_.n_layers);
  if (common_.tie_embeddings) return;
  torch::nn::Linear head = make_head();
  TORCH_INTERNAL_ASSERT(head->weight.sizes() == embed_->weight.sizes(), arch_, ": the head must be d -> V");
  head_ = register_module("head", head);
}

at::Tensor LanguageModel::hidden_states(const at::Tensor& input_ids) {
  check_input_ids(input_ids, common_.vocab_size, common_.max_len);
  at::Tensor h = embed_->forward(input_ids);  // B x L x d
  for (const auto& block : blocks_) h = block->forward(h);
  return final_norm_.is_empty() ? h : final_norm_.forward(h);
}

at::Tensor LanguageModel::head(const at::Tensor& hidden) {
  if (common_.tie_embeddings) return torch::nn::functional::linear(hidden, embed_->weight);
  TORCH_INTERNAL_ASSERT(head_, arch_, ": the model's constructor did not call add_head");
  return head_->forward(hidden);
}

at::Tensor LanguageModel::forward(const at::Tensor& input_ids) { return head(hidden_states(input_ids)); }

LanguageModelOutput LanguageModel::forward_with(const at::Tensor& input_ids, const std::optional<at::Tensor>& labels,
                                                bool return_hidden) {
  LanguageModelOutput out;
  at::Tensor hidden = hidden_states(input_ids);
  out.logits = head(hidden);
  if (return_hidden) out.hidden = hidden;
  if (labels.has_value()) {
    const at::Tensor& y = *labels;
    TORCH_CHECK(y.sizes() == input_ids.sizes(), "labels: expected the shape of input_ids ", input_ids.sizes(),
                ", got ", y.sizes());
    TORCH_CHECK(y.scalar_type() == at::kLong, "labels: expected int64, got ", y.scalar_type());
    const int64_t V = out.logits.size(-1);
    out.loss = at::cross_entropy_loss(out.logits.reshape({-1, V}).to(at::kFloat), y.reshape({-1}),
                                      std::nullopt, at::Reduction::Mean, /*ignore_index=*/-100);
  }
  return out;
}

int64_t LanguageModel::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void check_input_ids(const at::Tensor& input_ids, int64_t vocab_size, int64_t max_len) {
  TORCH_CHECK(input_ids.dim() == 2, "input_ids: expected B x L, got a ", input_ids.dim(), "-D tensor of shape ",
              input_ids.sizes());
  TORCH_CHECK(input_ids.scalar_type() == at::kLong, "input_ids: expected int64, got ", input_ids.scalar_type());
  TORCH_CHECK(max_len <= 0 || input_ids.size(1) <= max_len, "input_ids: sequence length ", input_ids.size(1),
              " exceeds the model's maximum ", max_len);
  if (input_ids.numel() == 0) return;
  const int64_t lo = input_ids.min().item<int64_t>(), hi = input_ids.max().item<int64_t>();
  TORCH_CHECK(lo >= 0 && hi < vocab_size, "input_ids: expected token ids in [0, ", vocab_size, "), got values in [",
              lo, ", ", hi, "]");
}

}  // namespace tmm::models
