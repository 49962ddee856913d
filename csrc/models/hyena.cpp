#include "tmm/models/hyena.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/init.h>

#include "models/config_reader.h"
#include "models/distilled_toeplitz.h"
#include "models/layers.h"
#include "models/online_toeplitz.h"
#include "models/registry.h"
#include "ops/mixer_parts.h"
#include "tmm/ops.h"

namespace tmm::models {

namespace {

constexpr OptionName<HyenaInit> kInitNames[] = {
    {"torch", HyenaInit::Torch}, {"safari", HyenaInit::Safari}, {"kaiming", HyenaInit::Kaiming}};

// The projections, MLP and head: Kaiming-normal (make_linear) for "kaiming",
// torch's default otherwise ("safari" re-initialises the whole model after).
torch::nn::Linear hyena_linear(const HyenaConfig& c, int64_t in, int64_t out, bool bias) {
  if (c.init == HyenaInit::Kaiming) return make_linear(in, out, bias);
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// "safari": safari's _init_weights (long_conv_lm.py), applied to every
// module: Linear (and Embedding, by the model) N(0, 0.02^2), biases zero;
// then the residual branches' out_proj.weight and fc2.weight (ffn_out here)
// N(0, (0.02 / sqrt(2 n_layers))^2). The model draws its head last, so tying
// changes no other initial value.
constexpr double kSafariStd = 0.02;

void safari_init(torch::nn::Module& m, int64_t n_layers) {
  torch::NoGradGuard no_grad;
  for (const auto& sub : m.modules(/*include_self=*/false)) {
    if (auto* linear = sub->as<torch::nn::LinearImpl>()) {
      torch::nn::init::normal_(linear->weight, 0.0, kSafariStd);
      if (linear->bias.defined()) linear->bias.zero_();
    }
  }
  const double residual_std = kSafariStd / std::sqrt(2.0 * double(std::max<int64_t>(n_layers, 1)));
  // In registration order: each block's out_proj, then its ffn_out.
  for (const auto& item : m.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    const std::string leaf = name.substr(name.rfind('.') + 1);  // the whole name when it has no '.'
    if (leaf == "out_proj" || leaf == "ffn_out")
      torch::nn::init::normal_(item.value()->as<torch::nn::LinearImpl>()->weight, 0.0, residual_std);
  }
}

}  // namespace

std::string to_string(HyenaInit init) { return option_name(kInitNames, init); }
constexpr const auto& option_names(HyenaInit) { return kInitNames; }

namespace {
constexpr auto kOwnKeys = [](auto& c, auto&& k) {
  k("ffn_mult", c.ffn_mult);
  k("short_filter", c.short_filter);
  k("filter_order", c.filter_order);
  k("emb_dim", c.emb_dim);
  k("filter_sin_freq", c.filter_sin_freq);
  k("modulate", c.modulate);
  k("final_norm", c.final_norm);
  k("init", c.init);
};
}  // namespace

HyenaConfig HyenaConfig::from_json_text(const std::string& text) {
  ConfigReader r(text, "Hyena config");
  HyenaConfig c = read_config<HyenaConfig>(r, kOwnKeys);
  r.finish();

  r.at_least("ffn_mult", c.ffn_mult, 1);
  r.at_least("short_filter", c.short_filter, 1);
  r.at_least("filter_order", c.filter_order, 1);
  r.check(c.emb_dim >= 3 && c.emb_dim % 2 == 1, "emb_dim",
          "must be odd and >= 3 (time, then cosine and sine bands), got " + std::to_string(c.emb_dim));
  r.check(std::isfinite(c.filter_sin_freq) && c.filter_sin_freq != 0.0, "filter_sin_freq",
          "must be finite and nonzero, got " + std::to_string(c.filter_sin_freq));
  r.product("d_model", 3, c.d_model);
  r.product("ffn_mult", c.ffn_mult, c.d_model);
  return c;
}

std::string HyenaConfig::to_json_text() const { return write_config(*this, kOwnKeys); }

// --- implicit filter ------------------------------------------------------

HyenaFilterImpl::HyenaFilterImpl(const HyenaConfig& c) : c_(c) {
  // The filter MLP keeps torch's default Linear init, as safari's HyenaFilter
  // does; the zoo's Kaiming-normal init (make_linear) is for the projections.
  const int64_t F = c.filter_order;
  mlp->push_back(torch::nn::Linear(c.emb_dim, F));
  mlp->push_back(torch::nn::Linear(F, F));
  mlp->push_back(torch::nn::Linear(F, F));
  mlp->push_back(torch::nn::Linear(torch::nn::LinearOptions(F, c.d_model).bias(false)));
  register_module("mlp", mlp);
  freq = register_parameter("freq", at::full({F}, c.filter_sin_freq));
  D = register_parameter("D", at::randn({c.d_model}));
}

std::vector<at::Tensor> HyenaFilterImpl::mlp_tensors() const {
  std::vector<at::Tensor> out;
  for (const auto& layer : *mlp) {
    const auto& linear = *layer->as<torch::nn::Linear>();
    out.push_back(linear.weight);
    if (linear.bias.defined()) out.push_back(linear.bias);
  }
  return out;
}

at::Tensor HyenaFilterImpl::positional_features(int64_t L) const {
  return ops::parts::hyena_positional_features(L, c_.max_len, c_.emb_dim, ops::parts::hyena_feature_options(freq));
}

at::Tensor HyenaFilterImpl::decay(int64_t L) const {
  return ops::parts::hyena_decay(L, c_.max_len, c_.d_model, c_.modulate, ops::parts::hyena_feature_options(freq));
}

at::Tensor HyenaFilterImpl::implicit_filter(int64_t L) {
  return ops::parts::hyena_implicit_filter(mlp_tensors(), freq, L, c_.max_len, c_.modulate);
}

at::Tensor HyenaFilterImpl::toeplitz_weight(int64_t L) {
  return ops::hyena_filter(mlp_tensors(), freq, D, L, c_.max_len, c_.modulate);
}

at::Tensor HyenaFilterImpl::forward(const at::Tensor& v) {
  // y[b,t,c] = sum_{s<=t} h[c,t-s] v[b,s,c] + D[c] v[b,t,c]
  return ops::causal_toeplitz(v, toeplitz_weight(v.size(1)), std::nullopt);  // B x L x d
}

// --- short conv -----------------------------------------------------------

ShortConvImpl::ShortConvImpl(int64_t channels, int64_t width) {
  // torch's Conv1d default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = width.
  const double bound = 1.0 / std::sqrt(double(width));
  weight = register_parameter("weight", at::empty({channels, 1, width}).uniform_(-bound, bound));
  bias = register_parameter("bias", at::empty({channels}).uniform_(-bound, bound));
}

at::Tensor ShortConvImpl::forward(const at::Tensor& u) { return ops::parts::short_conv(u, weight, bias); }

at::Tensor ShortConvImpl::decode(const at::Tensor& u, at::Tensor& last) {
  const int64_t C = weight.size(0), w = weight.size(2);
  const at::Tensor window = at::cat({last, u}, 1);  // B x (w-1+T) x C
  last = window.narrow(1, window.size(1) - (w - 1), w - 1);
  return at::conv1d(window.transpose(1, 2), weight, bias, at::IntArrayRef{1}, at::IntArrayRef{0},
                    at::IntArrayRef{1}, C)
      .transpose(1, 2);  // B x T x C
}

// --- operator, block, model -----------------------------------------------

HyenaOperatorImpl::HyenaOperatorImpl(const HyenaConfig& c) : max_len_(c.max_len), modulate_(c.modulate) {
  in_proj = register_module("in_proj", hyena_linear(c, c.d_model, 3 * c.d_model, true));
  short_filter = register_module("short_filter", ShortConv(3 * c.d_model, c.short_filter));
  filter = register_module("filter", HyenaFilter(c));
  out_proj = register_module("out_proj", hyena_linear(c, c.d_model, c.d_model, true));
}

at::Tensor HyenaOperatorImpl::forward(const at::Tensor& x) {
  HyenaFilterImpl& f = *filter;
  return ops::hyena_operator(x, in_proj->weight, in_proj->bias, short_filter->weight, short_filter->bias,
                             f.mlp_tensors(), f.freq, f.D, out_proj->weight, out_proj->bias, max_len_, modulate_);
}

struct HyenaOperatorDecodeState : LayerDecodeState {
  at::Tensor short_inputs;            // B x (w-1) x 3d: the short conv's previous inputs
  std::unique_ptr<OnlineMixer> long_conv;
  int64_t state_bytes() const override { return int64_t(short_inputs.nbytes()) + long_conv->state_bytes(); }
};

std::unique_ptr<HyenaOperatorDecodeState> HyenaOperatorImpl::start_decoding(int64_t batch, int64_t capacity,
                                                                             bool fast) {
  auto state = std::make_unique<HyenaOperatorDecodeState>();
  const at::Tensor& w = short_filter->weight;
  state->short_inputs = at::zeros({batch, w.size(2) - 1, w.size(0)}, w.options());
  // The implicit filter does not depend on the sequence length: generate it once for the capacity.
  const at::Tensor weight = filter->toeplitz_weight(capacity);
  state->long_conv = std::make_unique<OnlineToeplitz>(OnlineToeplitz::Kind::Toeplitz, weight, at::Tensor(), batch,
                                                      weight.size(0), capacity, fast);
  return state;
}

std::unique_ptr<HyenaOperatorDecodeState> HyenaOperatorImpl::start_distilled_decoding(int64_t batch,
                                                                                      int64_t capacity,
                                                                                      const DistilledKernel& kernel) {
  auto state = std::make_unique<HyenaOperatorDecodeState>();
  const at::Tensor& w = short_filter->weight;
  state->short_inputs = at::zeros({batch, w.size(2) - 1, w.size(0)}, w.options());
  const at::Tensor weight = filter->toeplitz_weight(capacity);  // the exact decoder's, for a window covering it
  state->long_conv = make_distilled_mixer(kernel, weight, at::Tensor(), batch, weight.size(0), capacity);
  return state;
}

LongKernel HyenaOperatorImpl::long_kernel(int64_t length) {
  return {"filter", filter->toeplitz_weight(length), filter->D.unsqueeze(1)};
}

at::Tensor HyenaOperatorImpl::decode(const at::Tensor& x, HyenaOperatorDecodeState& state) {
  const at::Tensor u = short_filter->decode(in_proj->forward(x), state.short_inputs);
  const auto parts = u.chunk(3, -1);
  const at::Tensor v = state.long_conv->forward(parts[2] * parts[1]);
  return out_proj->forward(v * parts[0]);
}

HyenaBlockImpl::HyenaBlockImpl(const HyenaConfig& c) {
  mixer_norm = register_module("mixer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  mixer = register_module("mixer", HyenaOperator(c));
  ffn_norm = register_module("ffn_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  ffn_in = register_module("ffn_in", hyena_linear(c, c.d_model, c.ffn_mult * c.d_model, true));
  ffn_out = register_module("ffn_out", hyena_linear(c, c.ffn_mult * c.d_model, c.d_model, true));
  drop_ = register_module("drop", torch::nn::Dropout(c.dropout));
  max_len_ = c.max_len;
}

at::Tensor HyenaBlockImpl::forward(const at::Tensor& x) {
  const at::Tensor h = x + drop_->forward(mixer->forward(mixer_norm->forward(x)));
  return h + drop_->forward(ffn_out->forward(at::gelu(ffn_in->forward(ffn_norm->forward(h)))));
}

std::unique_ptr<LayerDecodeState> HyenaBlockImpl::start_decoding(int64_t batch, int64_t capacity,
                                                                  DecodeMethod method) {
  return mixer->start_decoding(batch, capacity, method == DecodeMethod::Fast);
}

bool HyenaBlockImpl::has_long_kernels() const { return true; }

std::vector<LongKernel> HyenaBlockImpl::long_kernels() {
  LongKernel k = mixer->long_kernel(max_len_);
  k.name = "mixer." + k.name;
  return {k};
}

std::unique_ptr<LayerDecodeState> HyenaBlockImpl::start_distilled_decoding(int64_t batch, int64_t capacity,
                                                                            const Distillation& d,
                                                                            const std::string& prefix) {
  return mixer->start_distilled_decoding(batch, capacity, d.kernel(prefix + "mixer.filter"));
}

at::Tensor HyenaBlockImpl::decode(const at::Tensor& x, LayerDecodeState& state, int64_t /*position*/) {
  const at::Tensor h = x + mixer->decode(mixer_norm->forward(x), static_cast<HyenaOperatorDecodeState&>(state));
  return h + ffn_out->forward(at::gelu(ffn_in->forward(ffn_norm->forward(h))));
}

template <>
void HyenaModel::build() {
  const HyenaConfig& c = config();  // validated
  for (int64_t i = 0; i < c.n_layers; ++i) add_block(HyenaBlock(c).ptr());
  if (c.final_norm)
    set_final_norm("final_norm",
                   torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model}))));
  const bool safari = c.init == HyenaInit::Safari;
  if (safari) {
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(embedding()->weight, 0.0, kSafariStd);
    safari_init(*this, c.n_layers);
  }
  add_head([&] {
    torch::nn::Linear head = hyena_linear(c, c.d_model, c.vocab_size, false);
    if (safari) {
      torch::NoGradGuard no_grad;
      torch::nn::init::normal_(head->weight, 0.0, kSafariStd);
    }
    return head;
  });
}

// Parts "filter", "mixer" and "block": tmm.nn's HyenaFilter, HyenaOperator
// and MixerBlock take their initial values from them ("safari" applied to the part).
static std::shared_ptr<torch::nn::Module> build_hyena_part(const nlohmann::json& config, const std::string& part) {
  const HyenaConfig c = HyenaConfig::from_json_text(config.dump());
  std::shared_ptr<torch::nn::Module> built;
  if (part == "filter") built = HyenaFilter(c).ptr();
  if (part == "mixer") built = HyenaOperator(c).ptr();
  if (part == "block") built = HyenaBlock(c).ptr();
  if (built && c.init == HyenaInit::Safari) safari_init(*built, c.n_layers);
  return built;
}

static ModelRegistration registration(
    HyenaConfig::kArch,
    [](const nlohmann::json& config) {
      return std::make_shared<HyenaModel>(HyenaConfig::from_json_text(config.dump()));
    },
    resolver_of<HyenaConfig>(), build_hyena_part);

}  // namespace tmm::models
