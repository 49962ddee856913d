// Each model file registers its builder under its "arch" name at load time,
// so adding a model touches no central list.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tmm/models/language_model.h"

namespace tmm::models {

using ModelBuilder = std::function<std::shared_ptr<LanguageModel>(const nlohmann::json& config)>;
// The config as JSON text with every key spelled out, validated as the builder validates it.
using ConfigResolver = std::function<std::string(const nlohmann::json& config)>;
// One named part of the model ("mixer", "block", ...) built alone from the
// config, initialised as the model initialises it; null for a name it lacks.
using PartBuilder =
    std::function<std::shared_ptr<torch::nn::Module>(const nlohmann::json& config, const std::string& part)>;

struct ModelRegistration {
  ModelRegistration(const std::string& arch, ModelBuilder builder, ConfigResolver resolve,
                    PartBuilder parts = nullptr);
};

// The configuration build_model would use: every key spelled out (defaults
// filled in, "arch" included), validated as build_model validates it.
std::string resolve_config(const std::string& config_json);

// One part of the model of `config_json` built alone and initialised as the
// model initialises it: "model" (the whole model), or what the architecture
// names (TMM: "mixer", "block"; Hyena: "filter", "mixer", "block"). The
// drop-in layers of tmm.nn take their initial values from it.
std::shared_ptr<torch::nn::Module> build_part(const std::string& config_json, const std::string& part);

// The resolver of a config struct with from_json_text and to_json_text.
template <class Config>
ConfigResolver resolver_of() {
  return [](const nlohmann::json& config) { return Config::from_json_text(config.dump()).to_json_text(); };
}

}  // namespace tmm::models
