#include "tmm/models/tmm.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/init.h>

#include "models/config_reader.h"
#include "models/distilled_toeplitz.h"
#include "models/layers.h"
#include "models/online_toeplitz.h"
#include "models/option_names.h"
#include "models/registry.h"
#include "tmm/ops.h"

namespace tmm::models {

namespace {

constexpr OptionName<TMMMixerKind> kMixerNames[] = {{"toeplitz", TMMMixerKind::Toeplitz},
                                                    {"expanded", TMMMixerKind::Expanded},
                                                    {"frozen", TMMMixerKind::Frozen},
                                                    {"masked", TMMMixerKind::Masked}};
constexpr OptionName<TMMBlockOrder> kBlockOrderNames[] = {{"ffn_first", TMMBlockOrder::FfnFirst},
                                                          {"mixer_first", TMMBlockOrder::MixerFirst}};
constexpr OptionName<TMMInit> kInitNames[] = {{"kaiming", TMMInit::Kaiming}, {"scaled", TMMInit::Scaled}};

}  // namespace

std::string to_string(TMMMixerKind kind) { return option_name(kMixerNames, kind); }
std::string to_string(TMMBlockOrder order) { return option_name(kBlockOrderNames, order); }
std::string to_string(TMMInit init) { return option_name(kInitNames, init); }
constexpr const auto& option_names(TMMMixerKind) { return kMixerNames; }
constexpr const auto& option_names(TMMBlockOrder) { return kBlockOrderNames; }
constexpr const auto& option_names(TMMInit) { return kInitNames; }

namespace {
constexpr auto kOwnKeys = [](auto& c, auto&& k) {
  k("heads", c.heads);
  k("kernel", c.kernel);
  k("mixer", c.mixer);
  k("ffn_mult", c.ffn_mult);
  k("activation", c.activation);
  k("block_order", c.block_order);
  k("norm", c.norm);
  k("mixer_dropout", c.mixer_dropout);
  k("final_norm", c.final_norm);
  k("init", c.init);
};
}  // namespace

TMMConfig TMMConfig::from_json_text(const std::string& text) {
  ConfigReader r(text, "TMM config");
  TMMConfig c = read_config<TMMConfig>(r, kOwnKeys);
  r.finish();

  r.check(c.heads >= 0, "heads", "must be >= 0 (0 = flat), got " + std::to_string(c.heads));
  r.check(c.heads == 0 || c.d_model % c.heads == 0, "heads",
          "must divide d_model = " + std::to_string(c.d_model) + ", got " + std::to_string(c.heads));
  const int64_t per_group = c.heads == 0 ? c.d_model : c.d_model / std::max<int64_t>(c.heads, 1);
  r.check(c.kernel >= 1 && c.kernel <= per_group, "kernel",
          "must be in [1, channels per head = " + std::to_string(per_group) + "], got " + std::to_string(c.kernel));
  r.check(c.mixer != TMMMixerKind::Masked || c.kernel == 1, "kernel", "must be 1 with mixer \"masked\"");
  r.at_least("ffn_mult", c.ffn_mult, 1);
  r.product("ffn_mult", c.ffn_mult, c.d_model);
  r.product("max_len", c.kernel, c.max_len);
  const bool expanded = c.mixer == TMMMixerKind::Expanded;
  if (c.mixer_dropout == -1.0) c.mixer_dropout = expanded ? 0.1 : 0.0;  // unset
  r.check(c.mixer_dropout >= 0.0 && c.mixer_dropout < 1.0, "mixer_dropout",
          "must be in [0, 1), got " + std::to_string(c.mixer_dropout));
  r.check(expanded || c.mixer_dropout == 0.0, "mixer_dropout",
          "applies to mixer \"expanded\" only, got " + std::to_string(c.mixer_dropout) + " with mixer \"" +
              to_string(c.mixer) + "\"");
  return c;
}

std::string TMMConfig::to_json_text() const { return write_config(*this, kOwnKeys); }

namespace {

// Toeplitz vectors, G x K x N: Kaiming-normal with fan-in N per tap, w ~
// N(0, 2/N) (the authors' kernel weight is K x N: torch's fan-in is its N).
at::Tensor toeplitz_init(int64_t G, int64_t K, int64_t N) { return at::randn({G, K, N}) * std::sqrt(2.0 / double(N)); }

// The masked mixer's G x N x N matrix and G x N bias: the authors'
// Conv1d(N, N, 1) default init, U(-1/sqrt(N), 1/sqrt(N)) for both (fan-in N).
at::Tensor masked_init(at::IntArrayRef shape, int64_t N) {
  const double bound = 1.0 / std::sqrt(double(N));
  return at::empty(shape).uniform_(-bound, bound);
}

}  // namespace

ToeplitzMixerImpl::ToeplitzMixerImpl(const TMMConfig& c) : c_(c), groups_(c.heads == 0 ? 1 : c.heads) {
  const int64_t N = c.max_len, G = groups_, K = c.kernel;
  if (c.heads > 0) {
    in_proj_ = register_module("in_proj", make_linear(c.d_model, c.d_model, true));
  }
  if (c.mixer == TMMMixerKind::Masked) {  // the masked mixer: a full learned lower-triangular N x N matrix per group
    weight_ = register_parameter("weight", masked_init({G, N, N}, N));
    bias_ = register_parameter("bias", masked_init({G, N}, N));
  } else if (c.mixer == TMMMixerKind::Frozen) {  // fixed Toeplitz vectors and bias (the authors freeze both): buffers,
                                                 // saved but never trained
    weight_ = register_buffer("weight", toeplitz_init(G, K, N));
    bias_ = register_buffer("bias", at::zeros({G, N}));
  } else {
    weight_ = register_parameter("weight", toeplitz_init(G, K, N));
    bias_ = register_parameter("bias", at::zeros({G, N}));
  }
  if (c.mixer == TMMMixerKind::Expanded) {
    weight2_ = register_parameter("weight2", toeplitz_init(G, K, N));
    bias2_ = register_parameter("bias2", at::zeros({G, N}));
  }
  if (c.heads > 0) {
    out_proj_ = register_module("out_proj", make_linear(c.d_model, c.d_model, true));
  }
  if (c.init == TMMInit::Scaled) {  // the branch's last weight, GPT-2's 1/sqrt(2 n_layers)
    torch::NoGradGuard no_grad;
    const double scale = 1.0 / std::sqrt(2.0 * double(std::max<int64_t>(c.n_layers, 1)));
    if (c.heads > 0) {
      out_proj_->weight.mul_(scale);
    } else {
      weight_.mul_(scale);
      if (weight2_.defined()) weight2_.mul_(scale);
    }
  }
}

at::Tensor ToeplitzMixerImpl::forward(const at::Tensor& x) {
  const auto maybe = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
  const bool heads = c_.heads > 0;
  return ops::toeplitz_mixer(x, weight_, bias_, heads ? maybe(in_proj_->weight) : std::nullopt,
                             heads ? maybe(in_proj_->bias) : std::nullopt, heads ? maybe(out_proj_->weight) : std::nullopt,
                             heads ? maybe(out_proj_->bias) : std::nullopt, maybe(weight2_), maybe(bias2_),
                             c_.mixer == TMMMixerKind::Masked, c_.mixer_dropout, is_training());
}

struct TMMMixerDecodeState : LayerDecodeState {
  std::unique_ptr<OnlineMixer> first, second;  // second: the expanded mixer's
  int64_t state_bytes() const override {
    return first->state_bytes() + (second ? second->state_bytes() : 0);
  }
};

std::unique_ptr<TMMMixerDecodeState> ToeplitzMixerImpl::start_decoding(int64_t batch, int64_t capacity,
                                                                       bool fast) const {
  const auto kind = c_.mixer == TMMMixerKind::Masked ? OnlineToeplitz::Kind::Matrix : OnlineToeplitz::Kind::Toeplitz;
  auto state = std::make_unique<TMMMixerDecodeState>();
  state->first = std::make_unique<OnlineToeplitz>(kind, weight_, bias_, batch, c_.d_model, capacity, fast);
  if (c_.mixer == TMMMixerKind::Expanded)
    state->second = std::make_unique<OnlineToeplitz>(kind, weight2_, bias2_, batch, c_.d_model, capacity, fast);
  return state;
}

std::vector<LongKernel> ToeplitzMixerImpl::long_kernels() const {
  if (c_.mixer == TMMMixerKind::Masked) return {};
  std::vector<LongKernel> out = {{"mixer.weight", weight_, at::Tensor()}};
  if (c_.mixer == TMMMixerKind::Expanded) out.push_back({"mixer.weight2", weight2_, at::Tensor()});
  return out;
}

std::unique_ptr<TMMMixerDecodeState> ToeplitzMixerImpl::start_distilled_decoding(int64_t batch, int64_t capacity,
                                                                                 const Distillation& d,
                                                                                 const std::string& prefix) const {
  TORCH_CHECK(c_.mixer != TMMMixerKind::Masked,
              "decode method \"distilled\" needs a Toeplitz mixer; mixer \"masked\" has auto, recompute and cached");
  auto state = std::make_unique<TMMMixerDecodeState>();
  state->first = make_distilled_mixer(d.kernel(prefix + "mixer.weight"), weight_, bias_, batch, c_.d_model, capacity);
  if (c_.mixer == TMMMixerKind::Expanded)
    state->second =
        make_distilled_mixer(d.kernel(prefix + "mixer.weight2"), weight2_, bias2_, batch, c_.d_model, capacity);
  return state;
}

at::Tensor ToeplitzMixerImpl::decode(const at::Tensor& x, TMMMixerDecodeState& state) {
  at::Tensor h = c_.heads > 0 ? in_proj_->forward(x) : x;
  h = state.first->forward(h);
  if (state.second) h = state.second->forward(at::silu(h));
  return c_.heads > 0 ? out_proj_->forward(h) : h;
}

TMMBlockImpl::TMMBlockImpl(const TMMConfig& c) : c_(c) {
  ffn_norm_ = make_norm(c.norm, c.d_model);
  register_module("ffn_norm", ffn_norm_.ptr());
  ffn_in_ = register_module("ffn_in", make_linear(c.d_model, c.ffn_mult * c.d_model, true));
  ffn_out_ = register_module("ffn_out", make_linear(c.ffn_mult * c.d_model, c.d_model, true));
  mixer_norm_ = make_norm(c.norm, c.d_model);
  register_module("mixer_norm", mixer_norm_.ptr());
  mixer_ = register_module("mixer", ToeplitzMixer(c));
  drop_ = register_module("drop", torch::nn::Dropout(c.dropout));
  if (c.init == TMMInit::Scaled) {
    torch::NoGradGuard no_grad;
    ffn_out_->weight.div_(std::sqrt(2.0 * double(std::max<int64_t>(c.n_layers, 1))));
  }
}

at::Tensor TMMBlockImpl::forward(const at::Tensor& x) {
  auto ffn = [&](const at::Tensor& h) {
    return drop_->forward(ffn_out_->forward(activation(c_.activation, ffn_in_->forward(ffn_norm_.forward(h)))));
  };
  auto mix = [&](const at::Tensor& h) { return drop_->forward(mixer_->forward(mixer_norm_.forward(h))); };
  if (c_.block_order == TMMBlockOrder::FfnFirst) {
    const at::Tensor h = x + ffn(x);
    return h + mix(h);
  }
  const at::Tensor h = x + mix(x);
  return h + ffn(h);
}

std::unique_ptr<LayerDecodeState> TMMBlockImpl::start_decoding(int64_t batch, int64_t capacity,
                                                                DecodeMethod method) {
  return mixer_->start_decoding(batch, capacity, method == DecodeMethod::Fast);
}

bool TMMBlockImpl::has_long_kernels() const { return c_.mixer != TMMMixerKind::Masked; }

std::vector<LongKernel> TMMBlockImpl::long_kernels() { return mixer_->long_kernels(); }

std::unique_ptr<LayerDecodeState> TMMBlockImpl::start_distilled_decoding(int64_t batch, int64_t capacity,
                                                                          const Distillation& d,
                                                                          const std::string& prefix) {
  return mixer_->start_distilled_decoding(batch, capacity, d, prefix);
}

at::Tensor TMMBlockImpl::decode(const at::Tensor& x, LayerDecodeState& state, int64_t /*position*/) {
  // The FFN and the norms act on each position alone; only the mixer keeps state.
  auto& mixer_state = static_cast<TMMMixerDecodeState&>(state);
  auto ffn = [&](const at::Tensor& h) {
    return ffn_out_->forward(activation(c_.activation, ffn_in_->forward(ffn_norm_.forward(h))));
  };
  auto mix = [&](const at::Tensor& h) { return mixer_->decode(mixer_norm_.forward(h), mixer_state); };
  if (c_.block_order == TMMBlockOrder::FfnFirst) {
    const at::Tensor h = x + ffn(x);
    return h + mix(h);
  }
  const at::Tensor h = x + mix(x);
  return h + ffn(h);
}

template <>
void TMMModel::build() {
  const TMMConfig& c = config();  // validated
  for (int64_t i = 0; i < c.n_layers; ++i) add_block(TMMBlock(c).ptr());
  if (c.final_norm) set_final_norm("final_norm", make_norm(c.norm, c.d_model));
  add_head([&] { return make_linear(c.d_model, c.vocab_size, false); });
  if (c.tie_embeddings) {  // the authors' tie_io: the shared weight (V x d) re-initialised Kaiming, N(0, 2/d)
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_normal_(embedding()->weight, 0.0, torch::kFanIn, torch::kReLU);
  }
}

// Parts "mixer" and "block": tmm.nn's ToeplitzMixer and MixerBlock take their initial values from them.
static std::shared_ptr<torch::nn::Module> build_tmm_part(const nlohmann::json& config, const std::string& part) {
  const TMMConfig c = TMMConfig::from_json_text(config.dump());
  if (part == "mixer") return ToeplitzMixer(c).ptr();
  if (part == "block") return TMMBlock(c).ptr();
  return nullptr;
}

static ModelRegistration registration(
    TMMConfig::kArch,
    [](const nlohmann::json& config) { return std::make_shared<TMMModel>(TMMConfig::from_json_text(config.dump())); },
    resolver_of<TMMConfig>(), build_tmm_part);

}  // namespace tmm::models
