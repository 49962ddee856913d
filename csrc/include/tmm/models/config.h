// What every model's configuration shares: the common keys (each model's
// config struct derives from CommonConfig, and one reader and one writer
// handle them for all), and the option enums more than one model can use.
// In config JSON an enum is its name, e.g. "norm": "rmsnorm".
#pragma once

#include <cstdint>
#include <string>

namespace tmm::models {

struct CommonConfig {
  int64_t vocab_size = 0;       // V: token ids are in [0, V)
  int64_t d_model = 0;          // d: the width of the residual stream
  int64_t n_layers = 0;         // the number of blocks
  int64_t max_len = 0;          // the longest sequence the model takes
  double dropout = 0.0;         // in [0, 1): in training mode only, where each model says
  bool tie_embeddings = false;  // the LM head reuses the embedding matrix (no "head.weight")
};

enum class NormKind { LayerNorm, RMSNorm };    // "layernorm" (with bias) | "rmsnorm"
enum class Activation { SiLU, GELU, ReLU };    // "silu" | "gelu" | "relu"

// The names config JSON uses.
std::string to_string(NormKind kind);
std::string to_string(Activation kind);

}  // namespace tmm::models
