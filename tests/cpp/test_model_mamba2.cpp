// Mamba2-specific checks: the chunked SSD scan against the step-by-step
// recurrence (float64, values and gradients, lengths that are not multiples
// of the chunk, several chunk sizes), the causal depthwise conv against a
// loop, the whole mixer against a reference written from the formulas, the
// initialisation, the optional MLP and the config checks.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "tmm/models/mamba2.h"
#include "tmm/ops.h"

using Catch::Contains;

namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// The SSM recurrence, one time step at a time (tensor ops, so autograd works):
//   s_t = exp(A_h dt_t) s_{t-1} + dt_t x_t B_t^T,  y_t = s_t C_t,
// head h reading group h / (H / G) of B and C.
at::Tensor ssd_sequential(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                          const at::Tensor& C) {
  const int64_t bsz = x.size(0), L = x.size(1), H = x.size(2), P = x.size(3);
  const int64_t G = B.size(2), N = B.size(3);
  const at::Tensor Bh = B.repeat_interleave(H / G, 2), Ch = C.repeat_interleave(H / G, 2);  // b x L x H x N
  at::Tensor s = at::zeros({bsz, H, P, N}, x.options());
  std::vector<at::Tensor> ys;
  for (int64_t t = 0; t < L; ++t) {
    const at::Tensor dt_t = dt.select(1, t).view({bsz, H, 1, 1});
    s = at::exp(A.view({1, H, 1, 1}) * dt_t) * s +
        dt_t * x.select(1, t).unsqueeze(-1) * Bh.select(1, t).unsqueeze(2);
    ys.push_back((s * Ch.select(1, t).unsqueeze(2)).sum(-1));  // b x H x P
  }
  return at::stack(ys, 1);
}

struct SsdInputs {
  at::Tensor x, dt, A, B, C;
};

// Random inputs; `decay` scales A (large values: near-total forgetting).
SsdInputs random_inputs(int64_t bsz, int64_t L, int64_t H, int64_t P, int64_t G, int64_t N, double decay = 1.0,
                        at::ScalarType dtype = at::kDouble) {
  const auto o = at::TensorOptions().dtype(dtype);
  return {at::randn({bsz, L, H, P}, o), at::softplus(at::randn({bsz, L, H}, o) - 1.0),
          -at::exp(at::rand({H}, o) * 2.0) * decay, at::randn({bsz, L, G, N}, o), at::randn({bsz, L, G, N}, o)};
}

nlohmann::json tiny_config() {
  return {{"arch", "mamba2"},  {"vocab_size", 40}, {"d_model", 16}, {"n_layers", 2},  {"max_len", 48},
          {"d_state", 6},      {"headdim", 8},     {"ngroups", 2},  {"chunk_size", 8}, {"d_conv", 3}};
}

std::shared_ptr<tmm::models::Mamba2Model> build(const nlohmann::json& config) {
  return std::make_shared<tmm::models::Mamba2Model>(tmm::models::Mamba2Config::from_json_text(config.dump()));
}

void copy_parameters(torch::nn::Module& from, torch::nn::Module& to) {
  at::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(src[p.key()]);
}

}  // namespace

TEST_CASE("Mamba2 chunked SSD equals the sequential recurrence in float64", "[mamba2]") {
  at::manual_seed(1);
  const int64_t bsz = 2, H = 4, P = 3, G = 2, N = 5;
  for (int64_t L : {1, 5, 16, 37, 64, 100}) {
    const SsdInputs in = random_inputs(bsz, L, H, P, G, N);
    const at::Tensor ref = ssd_sequential(in.x, in.dt, in.A, in.B, in.C);
    for (int64_t Q : {1, 3, 8, 16, 64, 128}) {
      INFO("L = " << L << ", chunk_size = " << Q);
      const at::Tensor y = tmm::ops::mamba2_ssd_chunked(in.x, in.dt, in.A, in.B, in.C, Q);
      REQUIRE(y.sizes() == in.x.sizes());
      CHECK(y.scalar_type() == at::kDouble);
      CHECK(max_abs_diff(y, ref) < 1e-11 * (1.0 + ref.abs().max().item<double>()));
    }
  }
}

TEST_CASE("Mamba2 chunked SSD: one group per head, one group for all, strong decay", "[mamba2]") {
  at::manual_seed(2);
  for (int64_t G : {1, 4}) {
    for (double decay : {1.0, 30.0}) {  // 30: exp(A dt) underflows across a chunk
      INFO("G = " << G << ", decay = " << decay);
      const SsdInputs in = random_inputs(1, 45, 4, 2, G, 3, decay);
      const at::Tensor ref = ssd_sequential(in.x, in.dt, in.A, in.B, in.C);
      const at::Tensor y = tmm::ops::mamba2_ssd_chunked(in.x, in.dt, in.A, in.B, in.C, 16);
      CHECK(at::isfinite(y).all().item<bool>());
      CHECK(max_abs_diff(y, ref) < 1e-11 * (1.0 + ref.abs().max().item<double>()));
    }
  }
}

TEST_CASE("Mamba2 chunked SSD gradients equal the sequential recurrence's", "[mamba2]") {
  at::manual_seed(3);
  for (int64_t Q : {4, 16}) {
    INFO("chunk_size = " << Q);
    SsdInputs a = random_inputs(2, 21, 4, 3, 2, 5, /*decay=*/3.0);
    SsdInputs b{a.x.clone(), a.dt.clone(), a.A.clone(), a.B.clone(), a.C.clone()};
    for (auto* t : {&a.x, &a.dt, &a.A, &a.B, &a.C, &b.x, &b.dt, &b.A, &b.B, &b.C}) t->requires_grad_(true);
    const at::Tensor w = at::randn({2, 21, 4, 3}, kF64);
    (tmm::ops::mamba2_ssd_chunked(a.x, a.dt, a.A, a.B, a.C, Q) * w).sum().backward();
    (ssd_sequential(b.x, b.dt, b.A, b.B, b.C) * w).sum().backward();
    const std::vector<std::pair<const char*, std::pair<at::Tensor, at::Tensor>>> grads = {
        {"x", {a.x.grad(), b.x.grad()}}, {"dt", {a.dt.grad(), b.dt.grad()}}, {"A", {a.A.grad(), b.A.grad()}},
        {"B", {a.B.grad(), b.B.grad()}}, {"C", {a.C.grad(), b.C.grad()}}};
    for (const auto& [name, g] : grads) {
      INFO("gradient of " << name);
      REQUIRE(g.first.defined());
      CHECK(at::isfinite(g.first).all().item<bool>());
      CHECK(max_abs_diff(g.first, g.second) < 1e-10 * (1.0 + g.second.abs().max().item<double>()));
    }
  }
}

TEST_CASE("Mamba2 chunked SSD in float32 stays close to float64", "[mamba2]") {
  at::manual_seed(4);
  const SsdInputs in = random_inputs(2, 77, 4, 8, 1, 16);
  const at::Tensor ref = ssd_sequential(in.x, in.dt, in.A, in.B, in.C);
  const at::Tensor y = tmm::ops::mamba2_ssd_chunked(in.x.to(at::kFloat), in.dt.to(at::kFloat), in.A.to(at::kFloat),
                                       in.B.to(at::kFloat), in.C.to(at::kFloat), 32);
  CHECK(y.scalar_type() == at::kFloat);
  CHECK(max_abs_diff(y, ref) < 1e-4 * (1.0 + ref.abs().max().item<double>()));
}

TEST_CASE("Mamba2 causal depthwise conv equals the loop and is causal", "[mamba2]") {
  at::manual_seed(5);
  const int64_t bsz = 2, L = 11, C = 5;
  for (int64_t K : {1, 2, 4, 13}) {
    INFO("K = " << K);
    const at::Tensor x = at::randn({bsz, L, C}, kF64), w = at::randn({C, 1, K}, kF64), bias = at::randn({C}, kF64);
    const at::Tensor y = tmm::ops::mamba2_causal_depthwise_conv1d(x, w, bias);
    at::Tensor ref = at::empty({bsz, L, C}, kF64);
    auto X = x.accessor<double, 3>(), R = ref.accessor<double, 3>();
    auto W = w.accessor<double, 3>();
    auto Bs = bias.accessor<double, 1>();
    for (int64_t b = 0; b < bsz; ++b)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t c = 0; c < C; ++c) {
          double acc = Bs[c];
          for (int64_t k = 0; k < K; ++k)
            if (t - (K - 1) + k >= 0) acc += W[c][0][k] * X[b][t - (K - 1) + k][c];
          R[b][t][c] = acc;
        }
    CHECK(max_abs_diff(y, ref) < 1e-12);
    // Same as torch's Conv1d with K-1 padding on both sides, truncated to L.
    const at::Tensor torch_conv = at::conv1d(x.transpose(1, 2), w, bias, 1, K - 1, 1, C).narrow(2, 0, L);
    CHECK(max_abs_diff(y, torch_conv.transpose(1, 2)) < 1e-12);
    // Causal: a change at t = 6 leaves every output before t = 6 unchanged.
    at::Tensor x2 = x.clone();
    x2.select(1, 6).add_(1.0);
    const at::Tensor y2 = tmm::ops::mamba2_causal_depthwise_conv1d(x2, w, bias);
    CHECK(at::equal(y.narrow(1, 0, 6), y2.narrow(1, 0, 6)));
    CHECK_FALSE(at::equal(y.narrow(1, 6, 1), y2.narrow(1, 6, 1)));
  }
}

TEST_CASE("Mamba2 mixer equals a reference written from the formulas (float64)", "[mamba2]") {
  at::manual_seed(6);
  auto config = tmm::models::Mamba2Config::from_json_text(tiny_config().dump());
  tmm::models::Mamba2Mixer mixer(config);
  mixer->to(at::kDouble);
  {  // non-trivial D and gate-norm weights, so their wiring is checked
    at::NoGradGuard no_grad;
    mixer->D.uniform_(-1, 2);
    mixer->norm->weight.uniform_(0.5, 1.5);
  }
  const int64_t bsz = 2, L = 19, d = config.d_model, di = config.d_inner(), H = config.nheads();
  const int64_t P = config.headdim, G = config.ngroups, N = config.d_state, K = config.d_conv;
  const at::Tensor u = at::randn({bsz, L, d}, kF64);

  // The reference: projection, conv by a loop over taps, silu, the sequential
  // scan, D skip, gate, per-group RMS norm, output projection.
  const at::Tensor zxbcdt = at::matmul(u, mixer->in_proj->weight.t());
  const at::Tensor z = zxbcdt.narrow(-1, 0, di), xBC_in = zxbcdt.narrow(-1, di, di + 2 * G * N);
  const at::Tensor dt_raw = zxbcdt.narrow(-1, 2 * di + 2 * G * N, H);
  const at::Tensor cw = mixer->conv1d->weight, cb = mixer->conv1d->bias;
  at::Tensor conv = cb.expand_as(xBC_in).clone();
  for (int64_t t = 0; t < L; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t src = t - (K - 1) + k;
      if (src >= 0) conv.select(1, t).add_(xBC_in.select(1, src) * cw.select(1, 0).select(1, k));
    }
  const at::Tensor xBC = at::silu(conv);
  const at::Tensor x = xBC.narrow(-1, 0, di).reshape({bsz, L, H, P});
  const at::Tensor Bm = xBC.narrow(-1, di, G * N).reshape({bsz, L, G, N});
  const at::Tensor Cm = xBC.narrow(-1, di + G * N, G * N).reshape({bsz, L, G, N});
  const at::Tensor dt = at::log1p(at::exp(dt_raw + mixer->dt_bias));
  const at::Tensor A = -at::exp(mixer->A_log);
  const at::Tensor y = (ssd_sequential(x, dt, A, Bm, Cm) + x * mixer->D.view({H, 1})).reshape({bsz, L, di});
  const at::Tensor gated = (y * z * at::sigmoid(z)).reshape({bsz, L, G, di / G});
  const at::Tensor normed = gated / at::sqrt(gated.pow(2).mean(-1, true) + 1e-5);
  const at::Tensor ref = at::matmul(normed.reshape({bsz, L, di}) * mixer->norm->weight, mixer->out_proj->weight.t());

  const at::Tensor out = mixer->forward(u);
  CHECK(out.scalar_type() == at::kDouble);
  CHECK(max_abs_diff(out, ref) < 1e-10 * (1.0 + ref.abs().max().item<double>()));
}

TEST_CASE("Mamba2 logits do not depend on the chunk size", "[mamba2]") {
  at::manual_seed(7);
  auto base = build(tiny_config());
  const at::Tensor ids = at::randint(40, {2, 45}, at::kLong);
  const at::Tensor logits = base->forward(ids);
  for (int64_t Q : {1, 5, 45, 64}) {
    INFO("chunk_size = " << Q);
    auto config = tiny_config();
    config["chunk_size"] = Q;
    auto other = build(config);
    copy_parameters(*base, *other);
    CHECK(max_abs_diff(other->forward(ids), logits) < 1e-4);
  }
}

TEST_CASE("Mamba2 parameters: names, shapes, count, initialisation", "[mamba2]") {
  at::manual_seed(8);
  const auto json = tiny_config();
  auto model = build(json);
  const auto& c = model->config();
  const int64_t V = 40, d = 16, di = 32, H = 4, G = 2, N = 6, K = 3, conv_dim = di + 2 * G * N;
  auto params = model->named_parameters();
  CHECK(params["embed.weight"].sizes() == at::IntArrayRef{V, d});
  CHECK(params["blocks.1.norm.weight"].sizes() == at::IntArrayRef{d});
  CHECK(params["blocks.0.mixer.in_proj.weight"].sizes() == at::IntArrayRef{2 * di + 2 * G * N + H, d});
  CHECK(params["blocks.0.mixer.conv1d.weight"].sizes() == at::IntArrayRef{conv_dim, 1, K});
  CHECK(params["blocks.0.mixer.conv1d.bias"].sizes() == at::IntArrayRef{conv_dim});
  CHECK(params["blocks.0.mixer.dt_bias"].sizes() == at::IntArrayRef{H});
  CHECK(params["blocks.0.mixer.A_log"].sizes() == at::IntArrayRef{H});
  CHECK(params["blocks.0.mixer.D"].sizes() == at::IntArrayRef{H});
  CHECK(params["blocks.0.mixer.norm.weight"].sizes() == at::IntArrayRef{di});
  CHECK(params["blocks.0.mixer.out_proj.weight"].sizes() == at::IntArrayRef{d, di});
  CHECK(params["norm.weight"].sizes() == at::IntArrayRef{d});
  CHECK(params["head.weight"].sizes() == at::IntArrayRef{V, d});
  CHECK(model->named_buffers().size() == 0);
  const int64_t per_block = d + d * (2 * di + 2 * G * N + H) + conv_dim * (K + 1) + 3 * H + di + di * d;
  CHECK(model->parameter_count() == 2 * V * d + d + c.n_layers * per_block);
  CHECK(params.size() == 3 + 9 * static_cast<size_t>(c.n_layers));

  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".mixer.";
    const at::Tensor A = -at::exp(params[p + "A_log"]);
    CHECK(A.max().item<double>() <= -1.0);
    CHECK(A.min().item<double>() >= -16.0);
    const at::Tensor dt0 = at::softplus(params[p + "dt_bias"].to(at::kDouble));
    CHECK(dt0.min().item<double>() >= 1e-3 * (1 - 1e-5));
    CHECK(dt0.max().item<double>() <= 1e-1 * (1 + 1e-5));
    CHECK(at::equal(params[p + "D"], at::ones({H})));
    CHECK(at::equal(params[p + "norm.weight"], at::ones({di})));
  }

  auto tied_json = json;
  tied_json["tie_embeddings"] = true;
  auto tied = build(tied_json);
  CHECK_FALSE(tied->named_parameters().contains("head.weight"));
  CHECK(tied->parameter_count() == model->parameter_count() - V * d);
  const at::Tensor ids = at::randint(V, {1, 7}, at::kLong);
  const at::Tensor h = tied->hidden_states(ids);
  CHECK(max_abs_diff(tied->head(h), at::matmul(h, tied->embedding()->weight.t())) < 1e-6);
}

TEST_CASE("Mamba2 with the optional gated MLP trains every parameter and stays causal", "[mamba2]") {
  at::manual_seed(9);
  auto json = tiny_config();
  json["d_intermediate"] = 24;
  auto model = build(json);
  const int64_t d = 16, h = 24;
  auto params = model->named_parameters();
  CHECK(params["blocks.0.norm2.weight"].sizes() == at::IntArrayRef{d});
  CHECK(params["blocks.0.mlp.fc1.weight"].sizes() == at::IntArrayRef{2 * h, d});
  CHECK(params["blocks.1.mlp.fc2.weight"].sizes() == at::IntArrayRef{d, h});
  const at::Tensor ids = at::randint(40, {2, 30}, at::kLong);
  const auto out = model->forward_with(ids, ids, false);
  out.loss.backward();
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    REQUIRE(p.value().grad().defined());
    CHECK(p.value().grad().abs().sum().item<double>() > 0);
  }
  at::Tensor ids2 = ids.clone();
  ids2.select(1, 20).copy_((ids.select(1, 20) + 1) % 40);
  const at::Tensor a = out.logits.detach(), b = model->forward(ids2).detach();
  CHECK(max_abs_diff(a.narrow(1, 0, 20), b.narrow(1, 0, 20)) < 1e-6);
  CHECK(max_abs_diff(a.narrow(1, 20, 1), b.narrow(1, 20, 1)) > 0.0);
}

TEST_CASE("Mamba2 runs in float64 and bfloat16, and on empty sequences", "[mamba2]") {
  at::manual_seed(10);
  auto model = build(tiny_config());
  const at::Tensor ids = at::randint(40, {2, 33}, at::kLong);
  const at::Tensor ref = model->forward(ids).detach();
  model->to(at::kDouble);
  const at::Tensor y64 = model->forward(ids);
  CHECK(y64.scalar_type() == at::kDouble);
  CHECK(max_abs_diff(y64, ref) < 1e-4);
  model->to(at::kBFloat16);
  const at::Tensor y16 = model->forward(ids);
  CHECK(y16.scalar_type() == at::kBFloat16);
  CHECK(at::isfinite(y16).all().item<bool>());
  CHECK(max_abs_diff(y16, ref) < 0.1 * (1.0 + ref.abs().max().item<double>()));
  model->to(at::kFloat);
  CHECK(model->forward(at::zeros({2, 0}, at::kLong)).sizes() == at::IntArrayRef{2, 0, 40});
}

TEST_CASE("Mamba2 config: defaults, round trip and impossible values", "[mamba2]") {
  const nlohmann::json minimal = {
      {"arch", "mamba2"}, {"vocab_size", 10}, {"d_model", 64}, {"n_layers", 1}, {"max_len", 8}};
  const auto c = tmm::models::Mamba2Config::from_json_text(minimal.dump());
  CHECK(c.d_state == 64);
  CHECK(c.d_conv == 4);
  CHECK(c.expand == 2);
  CHECK(c.headdim == 64);
  CHECK(c.ngroups == 1);
  CHECK(c.chunk_size == 64);
  CHECK(c.d_intermediate == 0);
  CHECK(c.nheads() == 2);
  CHECK(tmm::models::Mamba2Config::from_json_text(c.to_json_text()).to_json_text() == c.to_json_text());
  auto model = tmm::models::build_model(minimal.dump());
  CHECK(model->config_json() == c.to_json_text());

  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {{{"headdim", 48}}, "headdim"},         // 128 % 48 != 0
      {{{"ngroups", 3}}, "ngroups"},          // 2 heads
      {{{"chunk_size", 0}}, "chunk_size"},
      {{{"d_state", 0}}, "d_state"},
      {{{"d_conv", 0}}, "d_conv"},
      {{{"expand", 0}}, "expand"},
      {{{"d_intermediate", -1}}, "d_intermediate"},
      {{{"dropout", 1.0}}, "dropout"},
      {{{"d_state", 2.5}}, "d_state"},
      {{{"heads", 4}}, "heads"},              // unknown key
  };
  for (const auto& [extra, key] : bad) {
    auto json = minimal;
    json.update(extra);
    INFO(json.dump());
    CHECK_THROWS_WITH(tmm::models::build_model(json.dump()), Contains("\"" + key + "\""));
  }
  auto json = minimal;
  json.erase("d_model");
  CHECK_THROWS_WITH(tmm::models::build_model(json.dump()), Contains("\"d_model\""));
}
