#include "tmm/models/transformer.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/init.h>

#include "models/config_reader.h"
#include "models/layers.h"
#include "models/registry.h"
#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::models {

namespace {

constexpr OptionName<TransformerInit> kInitNames[] = {{"llama", TransformerInit::Llama},
                                                      {"kaiming", TransformerInit::Kaiming}};

}  // namespace

std::string to_string(TransformerInit init) { return option_name(kInitNames, init); }
constexpr const auto& option_names(TransformerInit) { return kInitNames; }

namespace {
constexpr auto kOwnKeys = [](auto& c, auto&& k) {
  k("n_heads", c.n_heads);
  k("n_kv_heads", c.n_kv_heads);
  k("head_dim", c.head_dim);
  k("norm_eps", c.norm_eps);
  k("init", c.init);
  k("rope_theta", c.rope_theta);
  k("window", c.window);
  k("ffn_mult", c.ffn_mult);
  k("ffn_hidden", c.ffn_hidden);
};
}  // namespace

int64_t llama_ffn_hidden(int64_t d_model, double ffn_mult) {
  const auto h = static_cast<int64_t>(std::floor(2.0 * ffn_mult * double(d_model) / 3.0));
  return (h + 7) / 8 * 8;
}

TransformerConfig TransformerConfig::from_json_text(const std::string& text) {
  ConfigReader r(text, "Transformer config");
  TransformerConfig c = read_config<TransformerConfig>(r, kOwnKeys);
  r.require("n_heads");  // no default
  r.finish();

  r.at_least("n_heads", c.n_heads, 1);
  r.check(c.n_kv_heads >= 0, "n_kv_heads", "must be >= 0 (0 = n_heads), got " + std::to_string(c.n_kv_heads));
  if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;
  r.check(c.n_heads % c.n_kv_heads == 0, "n_kv_heads",
          "must divide n_heads = " + std::to_string(c.n_heads) + ", got " + std::to_string(c.n_kv_heads));
  r.check(c.head_dim >= 0, "head_dim", "must be >= 0 (0 = d_model / n_heads), got " + std::to_string(c.head_dim));
  if (c.head_dim == 0) {
    r.check(c.d_model % c.n_heads == 0, "n_heads",
            "must divide d_model = " + std::to_string(c.d_model) + " unless head_dim is set, got " +
                std::to_string(c.n_heads));
    c.head_dim = c.d_model / c.n_heads;
    r.check(c.head_dim % 2 == 0, "n_heads",
            "must leave an even head dimension for RoPE, got d_model / n_heads = " + std::to_string(c.head_dim));
  }
  r.check(c.head_dim % 2 == 0, "head_dim", "must be even for RoPE, got " + std::to_string(c.head_dim));
  r.product("head_dim", r.product("n_heads", c.n_heads, c.head_dim), c.d_model);
  r.check(std::isfinite(c.norm_eps) && c.norm_eps > 0.0, "norm_eps",
          "must be a finite number > 0, got " + std::to_string(c.norm_eps));
  r.check(std::isfinite(c.rope_theta) && c.rope_theta > 1.0, "rope_theta",
          "must be a finite number > 1, got " + std::to_string(c.rope_theta));
  r.check(c.window >= 0, "window", "must be >= 0 (0 = full causal attention), got " + std::to_string(c.window));
  r.check(std::isfinite(c.ffn_mult) && c.ffn_mult > 0.0, "ffn_mult",
          "must be a finite number > 0, got " + std::to_string(c.ffn_mult));
  r.check(c.ffn_hidden >= 0, "ffn_hidden",
          "must be >= 0 (0 = derived from ffn_mult), got " + std::to_string(c.ffn_hidden));
  if (c.ffn_hidden == 0) {
    // llama_ffn_hidden converts to int64: a width past 2^62 would be undefined
    // behaviour there (and overflow its rounding up to a multiple of 8).
    const double width = std::floor(2.0 * c.ffn_mult * double(c.d_model) / 3.0);
    r.check(width < 0x1p62, "ffn_mult",
            "gives an FFN width 2/3 * ffn_mult * d_model = " + std::to_string(width) + " that does not fit in int64");
    c.ffn_hidden = llama_ffn_hidden(c.d_model, c.ffn_mult);
    r.check(c.ffn_hidden >= 1, "ffn_mult",
            "gives an FFN width of 0 (2/3 * ffn_mult * d_model < 1): raise it or set ffn_hidden");
  }
  return c;
}

std::string TransformerConfig::to_json_text() const { return write_config(*this, kOwnKeys); }

TransformerAttentionImpl::TransformerAttentionImpl(const TransformerConfig& c)
    : n_heads_(c.n_heads),
      n_kv_heads_(c.n_kv_heads),
      head_dim_(c.head_dim),
      window_(c.window),
      rope_theta_(c.rope_theta),
      dropout_(c.dropout) {
  TORCH_CHECK(n_kv_heads_ >= 1 && n_heads_ % n_kv_heads_ == 0 && head_dim_ >= 2 && head_dim_ % 2 == 0,
              "TransformerAttention: n_kv_heads must divide n_heads and head_dim must be even, got n_heads ", n_heads_,
              ", n_kv_heads ", n_kv_heads_, ", head_dim ", head_dim_);
  wq = register_module("wq", make_linear(c.d_model, n_heads_ * head_dim_, false));
  wk = register_module("wk", make_linear(c.d_model, n_kv_heads_ * head_dim_, false));
  wv = register_module("wv", make_linear(c.d_model, n_kv_heads_ * head_dim_, false));
  wo = register_module("wo", make_linear(n_heads_ * head_dim_, c.d_model, false));
}

at::Tensor TransformerAttentionImpl::forward(const at::Tensor& x) {
  return ops::attention(x, wq->weight, wk->weight, wv->weight, wo->weight, n_heads_, n_kv_heads_, rope_theta_, window_,
                        dropout_, is_training());
}

TransformerKVCache TransformerAttentionImpl::start_decoding(int64_t batch, int64_t capacity) const {
  // A window needs only its last `window` positions: later keys overwrite the oldest.
  const int64_t slots = window_ > 0 ? std::min(window_, capacity) : capacity;
  const auto opts = wk->weight.options();
  return TransformerKVCache(at::zeros({batch, n_kv_heads_, slots, head_dim_}, opts),
                            at::zeros({batch, n_kv_heads_, slots, head_dim_}, opts));
}

at::Tensor TransformerAttentionImpl::decode(const at::Tensor& x, TransformerKVCache& cache, int64_t position) {
  const int64_t T = x.size(1), slots = cache.keys.size(2);
  TORCH_CHECK(position == 0 || T == 1, "TransformerAttention::decode: after the prefill (position 0) one token at a "
              "time, got ", T, " at position ", position);
  using namespace ops::parts;
  const at::Tensor q = attention_heads(x, wq->weight, head_dim_, rope_theta_, position, true);
  const at::Tensor k = attention_heads(x, wk->weight, head_dim_, rope_theta_, position, true);
  const at::Tensor v = attention_heads(x, wv->weight, head_dim_, rope_theta_, position, false);
  const int64_t n_rep = n_heads_ / n_kv_heads_;
  if (position == 0) {  // the prefill: the forward's attention, keeping the last `slots` keys and values
    const int64_t n = std::min(T, slots);
    const at::Tensor slot = at::arange(T - n, T, cache.keys.options().dtype(at::kLong)).remainder(slots);
    cache.keys.index_copy_(2, slot, k.narrow(2, T - n, n));
    cache.values.index_copy_(2, slot, v.narrow(2, T - n, n));
    return merge_heads(causal_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), window_, 0.0), wo->weight);
  }
  cache.keys.narrow(2, position % slots, 1).copy_(k);
  cache.values.narrow(2, position % slots, 1).copy_(v);
  // Filled slots: positions max(0, position - slots + 1) .. position, exactly
  // the window's (or, without one, all so far).
  const int64_t used = std::min(position + 1, slots);
  return merge_heads(at::scaled_dot_product_attention(q, repeat_kv(cache.keys.narrow(2, 0, used), n_rep),
                                                      repeat_kv(cache.values.narrow(2, 0, used), n_rep), std::nullopt,
                                                      0.0, /*is_causal=*/false),
                     wo->weight);
}

SwiGLUImpl::SwiGLUImpl(int64_t d_model, int64_t hidden) {
  w1 = register_module("w1", make_linear(d_model, hidden, false));
  w2 = register_module("w2", make_linear(hidden, d_model, false));
  w3 = register_module("w3", make_linear(d_model, hidden, false));
}

at::Tensor SwiGLUImpl::forward(const at::Tensor& x) {
  return w2->forward(at::silu(w1->forward(x)) * w3->forward(x));
}

TransformerBlockImpl::TransformerBlockImpl(const TransformerConfig& c) {
  attn_norm = register_module("attn_norm", RMSNorm(c.d_model, c.norm_eps));
  attn = register_module("attn", TransformerAttention(c));
  mlp_norm = register_module("mlp_norm", RMSNorm(c.d_model, c.norm_eps));
  mlp = register_module("mlp", SwiGLU(c.d_model, c.ffn_hidden));
  drop_ = register_module("drop", torch::nn::Dropout(c.dropout));
}

at::Tensor TransformerBlockImpl::forward(const at::Tensor& x) {
  const at::Tensor h = x + drop_->forward(attn->forward(attn_norm->forward(x)));
  return h + drop_->forward(mlp->forward(mlp_norm->forward(h)));
}

std::unique_ptr<LayerDecodeState> TransformerBlockImpl::start_decoding(int64_t batch, int64_t capacity,
                                                                        DecodeMethod /*method*/) {
  return std::make_unique<TransformerKVCache>(attn->start_decoding(batch, capacity));
}

at::Tensor TransformerBlockImpl::decode(const at::Tensor& x, LayerDecodeState& cache, int64_t position) {
  const at::Tensor h = x + attn->decode(attn_norm->forward(x), static_cast<TransformerKVCache&>(cache), position);
  return h + mlp->forward(mlp_norm->forward(h));
}

template <>
void TransformerModel::build() {
  const TransformerConfig& c = config();  // validated
  for (int64_t i = 0; i < c.n_layers; ++i) add_block(TransformerBlock(c).ptr());
  set_final_norm("norm", torch::nn::AnyModule(RMSNorm(c.d_model, c.norm_eps)));
  // "llama": HF Llama's _init_weights, every Linear weight and the embedding
  // N(0, initializer_range^2) with initializer_range 0.02; norms stay 1. The
  // head is drawn last, so tying changes no other initial value.
  const bool llama = c.init == TransformerInit::Llama;
  constexpr double kStd = 0.02;
  if (llama) {
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(embedding()->weight, 0.0, kStd);
    for (const auto& m : modules(/*include_self=*/false))
      if (auto* linear = m->as<torch::nn::LinearImpl>()) torch::nn::init::normal_(linear->weight, 0.0, kStd);
  }
  add_head([&] {
    torch::nn::Linear head = make_linear(c.d_model, c.vocab_size, false);
    if (llama) {
      torch::NoGradGuard no_grad;
      torch::nn::init::normal_(head->weight, 0.0, kStd);
    }
    return head;
  });
}

static ModelRegistration registration(
    TransformerConfig::kArch,
    [](const nlohmann::json& config) {
      return std::make_shared<TransformerModel>(TransformerConfig::from_json_text(config.dump()));
    },
    resolver_of<TransformerConfig>());

}  // namespace tmm::models
