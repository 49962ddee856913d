// A model of the zoo: LanguageModel with its validated config (config(),
// config_json()) and its blocks as their own type (block(i)). Each model is
// one instantiation, named in its header (using TMMModel =
// ZooModel<TMMConfig, TMMBlock>), and keeps only what is its own: build(),
// specialised in its .cpp (blocks, final norm, head of the validated config).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "tmm/models/language_model.h"

namespace tmm::models {

// Config: a CommonConfig with kArch, from_json_text and to_json_text.
// Block: the block's module holder (TORCH_MODULE), e.g. TMMBlock.
template <class Config, class Block>
class ZooModel : public LanguageModel {
 public:
  std::string config_json() const override { return config_.to_json_text(); }
  const Config& config() const { return config_; }
  Block block(int64_t i) const { return std::dynamic_pointer_cast<typename Block::ContainedType>(blocks().at(i)); }
  // `config` is validated as from_json_text validates it (errors name the
  // key) before anything is built: build() reads config().
  explicit ZooModel(const Config& config) : ZooModel(Config::from_json_text(config.to_json_text()), Validated{}) {
    build();
  }

 private:
  struct Validated {};
  ZooModel(Config validated, Validated) : LanguageModel(Config::kArch, validated), config_(std::move(validated)) {}
  void build();  // the model's own parts, specialised per model
  Config config_;
};

}  // namespace tmm::models
