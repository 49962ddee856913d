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

struct ModelRegistration {
  ModelRegistration(const std::string& arch, ModelBuilder builder);
};

}  // namespace tmm::models
