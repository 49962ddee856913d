// Hyena (csrc/models/hyena.cpp) against independent straightforward
// references in float64: the implicit filter from its formula, the long
// convolution as a direct loop sum_{s<=t} h[c,t-s] v[s] + D v[t], the short
// conv as a loop, the whole operator composed from those; causality of the
// short conv, decay of the filters, prefix consistency, parameter names and
// counts, config validation, dtypes.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/nn/modules/linear.h>

#include "repo_paths.h"
#include "tmm/models/hyena.h"

namespace {

using Catch::Matchers::Contains;
using tmm::models::HyenaModel;
using tmm::models::HyenaConfig;

constexpr double kPi = 3.14159265358979323846;

nlohmann::json base_config() {
  return {{"arch", "hyena"}, {"vocab_size", 50}, {"d_model", 12}, {"n_layers", 2}, {"max_len", 40},
          {"filter_order", 8}};
}

std::shared_ptr<HyenaModel> make(const nlohmann::json& extra = nlohmann::json::object()) {
  auto config = base_config();
  config.update(extra);
  return std::make_shared<HyenaModel>(HyenaConfig::from_json_text(config.dump()));
}

at::Tensor dbl(const at::Tensor& t) { return t.detach().to(at::kDouble).contiguous(); }

// y = x W^T + b over the last dimension, in double.
at::Tensor linear_ref(const at::Tensor& x, const torch::nn::LinearImpl& lin) {
  at::Tensor y = at::matmul(x, dbl(lin.weight).t());
  if (lin.bias.defined()) y = y + dbl(lin.bias);
  return y;
}

// The implicit filter h (d x L, without D) from its formula, element by element.
at::Tensor filter_ref(tmm::models::HyenaFilterImpl& f, const HyenaConfig& c, int64_t L) {
  const int64_t d = c.d_model, E = c.emb_dim, bands = (E - 1) / 2;
  at::Tensor z = at::zeros({L, E}, at::kDouble);
  auto Z = z.accessor<double, 2>();
  for (int64_t p = 0; p < L; ++p) {
    const double w = 2.0 * kPi * double(p) / double(c.max_len);
    Z[p][0] = c.max_len > 1 ? double(p) / double(c.max_len - 1) : 0.0;
    for (int64_t k = 0; k < bands; ++k) {
      const double fk = bands > 1 ? 1e-4 + double(k) * (double(bands - 1) - 1e-4) / double(bands - 1) : 1e-4;
      Z[p][1 + k] = std::cos(fk * w);
      Z[p][1 + bands + k] = -std::sin(fk * w);
    }
  }
  const at::Tensor freq = dbl(f.freq);
  at::Tensor h = z;
  for (size_t i = 0; i < 3; ++i) h = at::sin(freq * linear_ref(h, *f.mlp[i]->as<torch::nn::Linear>()));
  h = linear_ref(h, *f.mlp[3]->as<torch::nn::Linear>());  // L x d
  if (c.modulate) {
    const double lo = std::log(1e-2) / 1.5, hi = std::log(1e-2) / 0.3;
    auto H = h.accessor<double, 2>();
    for (int64_t p = 0; p < L; ++p)
      for (int64_t ch = 0; ch < d; ++ch) {
        const double delta = d > 1 ? lo + double(ch) * (hi - lo) / double(d - 1) : lo;
        H[p][ch] *= std::exp(-Z[p][0] * std::abs(delta));
      }
  }
  return h.t().contiguous();
}

// y[b,t,c] = sum_{s<=t} h[c,t-s] v[b,s,c] + D[c] v[b,t,c]   (h: d x L, v: B x L x d)
at::Tensor long_conv_ref(const at::Tensor& h_, const at::Tensor& D_, const at::Tensor& v_) {
  const at::Tensor h = dbl(h_), D = dbl(D_), v = dbl(v_);
  const int64_t B = v.size(0), L = v.size(1), C = v.size(2);
  at::Tensor y = at::zeros({B, L, C}, at::kDouble);
  auto H = h.accessor<double, 2>();
  auto Dv = D.accessor<double, 1>();
  auto V = v.accessor<double, 3>();
  auto Y = y.accessor<double, 3>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = Dv[c] * V[b][t][c];
        for (int64_t s = 0; s <= t; ++s) acc += H[c][t - s] * V[b][s][c];
        Y[b][t][c] = acc;
      }
  return y;
}

// y[b,t,c] = bias[c] + sum_{j<w} weight[c,0,j] u[b,t-(w-1)+j,c]   (u = 0 before 0)
at::Tensor short_conv_ref(const at::Tensor& weight_, const at::Tensor& bias_, const at::Tensor& u_) {
  const at::Tensor W = dbl(weight_), bias = dbl(bias_), u = dbl(u_);
  const int64_t B = u.size(0), L = u.size(1), C = u.size(2), w = W.size(2);
  at::Tensor y = at::zeros({B, L, C}, at::kDouble);
  auto Wa = W.accessor<double, 3>();
  auto Ba = bias.accessor<double, 1>();
  auto U = u.accessor<double, 3>();
  auto Y = y.accessor<double, 3>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = Ba[c];
        for (int64_t j = 0; j < w; ++j) {
          const int64_t s = t - (w - 1) + j;
          if (s >= 0) acc += Wa[c][0][j] * U[b][s][c];
        }
        Y[b][t][c] = acc;
      }
  return y;
}

void check_close(const at::Tensor& a, const at::Tensor& b, double rtol, double atol) {
  const double err = (dbl(a) - dbl(b)).abs().max().item<double>();
  INFO("max abs error " << err << ", max |ref| " << dbl(b).abs().max().item<double>());
  CHECK(at::allclose(dbl(a), dbl(b), rtol, atol));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parameter count from the architecture's formula.
int64_t expected_parameters(const HyenaConfig& c) {
  const int64_t d = c.d_model, F = c.filter_order, V = c.vocab_size;
  const int64_t filter = (c.emb_dim * F + F) + 2 * (F * F + F) + F * d + F /*freq*/ + d /*D*/;
  const int64_t mixer = (d * 3 * d + 3 * d) + (3 * d * c.short_filter + 3 * d) + filter + (d * d + d);
  const int64_t ffn = (d * c.ffn_mult * d + c.ffn_mult * d) + (c.ffn_mult * d * d + d);
  const int64_t block = 2 * 2 * d + mixer + ffn;
  return V * d + c.n_layers * block + (c.final_norm ? 2 * d : 0) + (c.tie_embeddings ? 0 : V * d);
}

}  // namespace

TEST_CASE("Hyena implicit filter matches its formula", "[hyena]") {
  at::manual_seed(1);
  for (const auto& extra : {nlohmann::json::object(), nlohmann::json{{"emb_dim", 7}, {"filter_sin_freq", 3.0}},
                            nlohmann::json{{"modulate", false}, {"emb_dim", 5}}, nlohmann::json{{"max_len", 1}}}) {
    INFO("variant " << extra.dump());
    auto model = make(extra);
    model->to(at::kDouble);
    auto& f = *model->block(1)->mixer->filter;
    for (int64_t L : {int64_t(1), int64_t(7), model->config().max_len}) {
      if (L > model->config().max_len) continue;
      INFO("L = " << L);
      check_close(f.implicit_filter(L), filter_ref(f, model->config(), L), 1e-12, 1e-12);
      // The weight handed to causal_toeplitz: h with D on the lag-0 tap, d x 1 x L.
      const at::Tensor w = f.toeplitz_weight(L);
      CHECK(w.sizes() == at::IntArrayRef{12, 1, L});
      at::Tensor expect = f.implicit_filter(L).clone();
      expect.select(1, 0).add_(f.D);
      check_close(w.squeeze(1), expect, 1e-14, 1e-14);
    }
  }
}

TEST_CASE("Hyena long convolution equals the direct sum of (h * v)[t] + D v[t]", "[hyena]") {
  at::manual_seed(2);
  auto m32 = make();
  at::manual_seed(2);
  auto m64 = make();
  m64->to(at::kDouble);
  auto& f32 = *m32->block(0)->mixer->filter;
  auto& f64 = *m64->block(0)->mixer->filter;
  // L = 1, 5, 20: causal_toeplitz's direct path; 33, 40: its FFT path.
  for (int64_t L : {1, 5, 20, 33, 40}) {
    INFO("L = " << L);
    const at::Tensor v = at::randn({3, L, 12}, at::kDouble);
    check_close(f64.forward(v), long_conv_ref(f64.implicit_filter(L), f64.D, v), 1e-10, 1e-10);
    // ... and independently of the filter code: with the formula's filter.
    check_close(f64.forward(v), long_conv_ref(filter_ref(f64, m64->config(), L), f64.D, v), 1e-10, 1e-10);
    // float32, on a strided (non-contiguous) input.
    const at::Tensor v32 = at::randn({3, 12, L}).transpose(1, 2);  // B x L x d
    check_close(f32.forward(v32), long_conv_ref(f32.implicit_filter(L), f32.D, v32), 1e-4, 1e-4);
  }
}

TEST_CASE("Hyena long convolution gradients match the direct sum's", "[hyena]") {
  at::manual_seed(3);
  auto model = make();
  model->to(at::kDouble);
  auto& f = *model->block(0)->mixer->filter;
  const int64_t L = 30;
  const at::Tensor v = at::randn({2, L, 12}, at::kDouble).requires_grad_(true);
  const at::Tensor gy = at::randn({2, L, 12}, at::kDouble);
  (f.forward(v) * gy).sum().backward();
  const at::Tensor gv = v.grad().clone(), gD = f.D.grad().clone(), gfreq = f.freq.grad().clone();
  v.grad().zero_();
  f.D.grad().zero_();
  f.freq.grad().zero_();
  // The same through a dense lower-triangular Toeplitz matrix built from h.
  const at::Tensor h = f.implicit_filter(L);                                        // d x L
  const at::Tensor idx = at::arange(L).unsqueeze(1) - at::arange(L).unsqueeze(0);  // t - s
  const at::Tensor T = h.index({at::indexing::Slice(), idx.clamp_min(0)}) * (idx >= 0).to(at::kDouble);  // d x L x L
  const at::Tensor y = at::einsum("cts,bsc->btc", {T, v}) + v * f.D;
  (y * gy).sum().backward();
  check_close(gv, v.grad(), 1e-10, 1e-10);
  check_close(gD, f.D.grad(), 1e-10, 1e-10);
  check_close(gfreq, f.freq.grad(), 1e-9, 1e-9);
}

TEST_CASE("Hyena short conv is causal, of width short_filter, and matches a loop", "[hyena]") {
  at::manual_seed(4);
  for (int64_t w : {1, 3, 4}) {
    INFO("short_filter = " << w);
    auto model = make({{"short_filter", w}});
    auto& conv = *model->block(0)->mixer->short_filter;
    CHECK(conv.weight.sizes() == at::IntArrayRef{36, 1, w});
    const int64_t L = 17, t0 = 8;
    const at::Tensor u = at::randn({2, L, 36});
    const at::Tensor y = conv.forward(u);
    check_close(y, short_conv_ref(conv.weight, conv.bias, u), 1e-5, 1e-5);
    at::Tensor u2 = u.clone();
    u2.select(1, t0).add_(1.0);
    const at::Tensor diff = (conv.forward(u2) - y).abs().amax({0, 2});  // L
    for (int64_t t = 0; t < L; ++t) {
      INFO("t = " << t);
      if (t < t0 || t > t0 + w - 1)
        CHECK(diff[t].item<double>() == 0.0);
      else
        CHECK(diff[t].item<double>() > 0.0);
    }
  }
}

TEST_CASE("Hyena operator equals its composition from references", "[hyena]") {
  at::manual_seed(5);
  auto model = make();
  model->to(at::kDouble);
  auto& op = *model->block(1)->mixer;
  const int64_t L = 29, d = 12;
  const at::Tensor x = at::randn({2, L, d}, at::kDouble);
  const at::Tensor u = short_conv_ref(op.short_filter->weight, op.short_filter->bias, linear_ref(x, *op.in_proj));
  const at::Tensor x0 = u.narrow(2, 0, d), x1 = u.narrow(2, d, d), v = u.narrow(2, 2 * d, d);
  const at::Tensor vc = long_conv_ref(filter_ref(*op.filter, model->config(), L), op.filter->D, v * x1);
  check_close(op.forward(x), linear_ref(vc * x0, *op.out_proj), 1e-10, 1e-10);
}

TEST_CASE("Hyena filters decay", "[hyena]") {
  // max_len 11: position p is at t = p / 10, so the fastest channel (the last)
  // reaches the target 1e-2 at p = 3 (t = 0.3) and the slowest (the first)
  // 1e-2^(1/1.5) at p = 10 (t = 1).
  auto model = make({{"max_len", 11}});
  auto& f = *model->block(0)->mixer->filter;
  const at::Tensor dec = dbl(f.decay(11));  // L x d
  CHECK(dec.sizes() == at::IntArrayRef{11, 12});
  CHECK(at::allclose(dec[0], at::ones({12}, at::kDouble)));
  CHECK((dec.narrow(0, 1, 10) < dec.narrow(0, 0, 10)).all().item<bool>());  // decreasing in time
  CHECK((dec.narrow(1, 1, 11) < dec.narrow(1, 0, 11)).narrow(0, 1, 10).all().item<bool>());  // faster per channel
  CHECK(dec[3][11].item<double>() == Approx(1e-2).epsilon(1e-5));
  CHECK(dec[10][0].item<double>() == Approx(std::pow(1e-2, 1.0 / 1.5)).epsilon(1e-5));

  // The modulated filter is the unmodulated one times the decay.
  auto plain = make({{"max_len", 11}, {"modulate", false}});
  {
    at::NoGradGuard no_grad;
    auto src = model->named_parameters();
    for (auto& p : plain->named_parameters()) p.value().copy_(src[p.key()]);
  }
  auto& g = *plain->block(0)->mixer->filter;
  CHECK(at::allclose(g.decay(11), at::ones({11, 12})));
  check_close(f.implicit_filter(11), g.implicit_filter(11) * dec.t(), 1e-6, 1e-7);

  // A long filter (cpu-small's length) is far smaller at its end than at its start
  // (for this draw: how much smaller depends on the MLP's init, so it is seeded).
  at::manual_seed(0);
  auto longer = make({{"max_len", 512}});
  const at::Tensor h = longer->block(0)->mixer->filter->implicit_filter(512).detach().abs();  // d x L
  CHECK(h.narrow(1, 448, 64).max().item<double>() < 0.1 * h.narrow(1, 0, 64).max().item<double>());
}

TEST_CASE("Hyena filters do not depend on the sequence length: a prefix gives the same states", "[hyena]") {
  at::manual_seed(6);
  auto model = make();
  const at::Tensor ids = at::randint(50, {2, 40}, at::kLong);
  const at::Tensor full = model->hidden_states(ids);
  for (int64_t k : {1, 9, 25}) {
    INFO("prefix " << k);
    check_close(model->hidden_states(ids.narrow(1, 0, k).contiguous()), full.narrow(1, 0, k), 1e-5, 1e-5);
  }
}

TEST_CASE("Hyena parameters: names, shapes, counts, tying", "[hyena]") {
  auto model = make();
  auto params = model->named_parameters();
  const int64_t d = 12, F = 8;
  CHECK(params["embed.weight"].sizes() == at::IntArrayRef{50, d});
  CHECK(params["blocks.0.mixer_norm.weight"].sizes() == at::IntArrayRef{d});
  CHECK(params["blocks.0.mixer.in_proj.weight"].sizes() == at::IntArrayRef{3 * d, d});
  CHECK(params["blocks.0.mixer.short_filter.weight"].sizes() == at::IntArrayRef{3 * d, 1, 3});
  CHECK(params["blocks.0.mixer.short_filter.bias"].sizes() == at::IntArrayRef{3 * d});
  CHECK(params["blocks.0.mixer.filter.mlp.0.weight"].sizes() == at::IntArrayRef{F, 3});
  CHECK(params["blocks.0.mixer.filter.mlp.2.bias"].sizes() == at::IntArrayRef{F});
  CHECK(params["blocks.1.mixer.filter.mlp.3.weight"].sizes() == at::IntArrayRef{d, F});
  CHECK_FALSE(params.contains("blocks.1.mixer.filter.mlp.3.bias"));
  CHECK(params["blocks.1.mixer.filter.freq"].sizes() == at::IntArrayRef{F});
  CHECK(params["blocks.1.mixer.filter.D"].sizes() == at::IntArrayRef{d});
  CHECK(params["blocks.1.mixer.out_proj.weight"].sizes() == at::IntArrayRef{d, d});
  CHECK(params["blocks.1.ffn_norm.bias"].sizes() == at::IntArrayRef{d});
  CHECK(params["blocks.1.ffn_in.weight"].sizes() == at::IntArrayRef{4 * d, d});
  CHECK(params["blocks.1.ffn_out.weight"].sizes() == at::IntArrayRef{d, 4 * d});
  CHECK_FALSE(params.contains("final_norm.weight"));  // the authors' HyenaModel has none
  CHECK(params["head.weight"].sizes() == at::IntArrayRef{50, d});
  CHECK(make({{"final_norm", true}})->named_parameters()["final_norm.weight"].sizes() == at::IntArrayRef{d});
  CHECK(model->named_buffers().size() == 0);  // positions and decays are computed in forward
  CHECK(model->parameter_count() == expected_parameters(model->config()));

  for (const char* name : {"hyena-tiny.json", "hyena-cpu-small.json"}) {
    INFO(name);
    auto m = tmm::models::build_model(read_text(tmm_test::models_dir() + "/" + name));
    const auto& c = dynamic_cast<HyenaModel&>(*m).config();
    CHECK(m->parameter_count() == expected_parameters(c));
  }

  at::manual_seed(7);
  auto tied = make({{"tie_embeddings", true}});
  CHECK_FALSE(tied->named_parameters().contains("head.weight"));
  const at::Tensor ids = at::randint(50, {2, 9}, at::kLong);
  const at::Tensor hidden = tied->hidden_states(ids);
  check_close(tied->head(hidden), at::matmul(hidden, tied->named_parameters()["embed.weight"].t()), 1e-5, 1e-5);
}

TEST_CASE("Hyena config: defaults, round trip, bad values", "[hyena]") {
  const HyenaConfig c = HyenaConfig::from_json_text(base_config().dump());
  CHECK(c.ffn_mult == 4);
  CHECK(c.short_filter == 3);
  CHECK(c.emb_dim == 3);
  CHECK(c.filter_sin_freq == 1.0);
  CHECK(c.modulate);
  CHECK(c.dropout == 0.0);
  CHECK_FALSE(c.tie_embeddings);
  CHECK_FALSE(c.final_norm);
  CHECK(c.init == tmm::models::HyenaInit::Torch);
  const auto j = nlohmann::json::parse(c.to_json_text());
  for (const char* key : {"arch", "vocab_size", "d_model", "n_layers", "max_len", "dropout", "tie_embeddings",
                          "ffn_mult", "short_filter", "filter_order", "emb_dim", "filter_sin_freq", "modulate",
                          "final_norm", "init"})
    CHECK(j.contains(key));
  CHECK(j.size() == 15);
  CHECK(HyenaConfig::from_json_text(c.to_json_text()).to_json_text() == c.to_json_text());

  auto bad = [](const nlohmann::json& extra) {
    auto config = base_config();
    config.update(extra);
    return config.dump();
  };
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"emb_dim", 4}})), Contains("emb_dim"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"emb_dim", 1}})), Contains("emb_dim"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"short_filter", 0}})), Contains("short_filter"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"filter_order", 0}})), Contains("filter_order"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"ffn_mult", 0}})), Contains("ffn_mult"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"filter_sin_freq", 0.0}})), Contains("filter_sin_freq"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"modulate", 1}})), Contains("modulate"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"dropout", 1.0}})), Contains("dropout"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"arch", "tmm"}})), Contains("arch"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"filter_ord", 8}})), Contains("filter_ord"));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"init", "gpt2"}})),
                    Contains("key \"init\" must be torch, safari or kaiming, got \"gpt2\""));
  CHECK_THROWS_WITH(HyenaConfig::from_json_text(bad({{"final_norm", "yes"}})), Contains("final_norm"));
}

TEST_CASE("Hyena runs in float64 and bfloat16, and on empty sequences", "[hyena]") {
  at::manual_seed(8);
  auto model = make();
  const at::Tensor ids = at::randint(50, {2, 21}, at::kLong);
  const at::Tensor ref = model->forward(ids);
  model->to(at::kDouble);
  const at::Tensor y64 = model->forward(ids);
  CHECK(y64.scalar_type() == at::kDouble);
  check_close(y64, ref, 1e-4, 1e-4);
  model->to(at::kBFloat16);
  const at::Tensor y16 = model->forward(ids);
  CHECK(y16.scalar_type() == at::kBFloat16);
  CHECK(at::isfinite(y16).all().item<bool>());
  const double rel = (dbl(y16) - dbl(ref)).norm().item<double>() / dbl(ref).norm().item<double>();
  CHECK(rel < 0.1);
  model->to(at::kFloat);
  CHECK(model->forward(at::zeros({2, 0}, at::kLong)).sizes() == at::IntArrayRef{2, 0, 50});
}

TEST_CASE("Hyena: twenty Adam steps on a tiny batch lower the loss", "[hyena]") {
  at::manual_seed(9);
  auto model = make();
  const at::Tensor ids = at::randint(50, {4, 24}, at::kLong);
  const at::Tensor labels = at::roll(ids, -1, 1);
  std::vector<at::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p);
  // Plain Adam written out (the optimizer headers are heavy): lr 3e-3.
  std::vector<at::Tensor> m, v;
  for (auto& p : params) {
    m.push_back(at::zeros_like(p));
    v.push_back(at::zeros_like(p));
  }
  double first = 0.0, last = 0.0;
  for (int step = 1; step <= 20; ++step) {
    for (auto& p : params)
      if (p.grad().defined()) p.grad().zero_();
    const at::Tensor loss = model->forward_with(ids, labels).loss;
    loss.backward();
    if (step == 1) first = loss.item<double>();
    last = loss.item<double>();
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor g = params[i].grad();
      m[i].mul_(0.9).add_(g, 0.1);
      v[i].mul_(0.999).addcmul_(g, g, 0.001);
      const at::Tensor mh = m[i] / (1 - std::pow(0.9, step)), vh = v[i] / (1 - std::pow(0.999, step));
      params[i].sub_(3e-3 * mh / (vh.sqrt() + 1e-8));
    }
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < first - 0.5);
}

TEST_CASE("Hyena dropout acts in training only", "[hyena]") {
  at::manual_seed(10);
  auto model = make({{"dropout", 0.5}});
  const at::Tensor ids = at::randint(50, {2, 15}, at::kLong);
  model->train();
  CHECK_FALSE(at::allclose(model->forward(ids), model->forward(ids)));
  model->eval();
  CHECK(at::equal(model->forward(ids), model->forward(ids)));
}
