// Transformer-specific checks (the generic ones live in test_models.cpp):
// the whole model against a loop reference written from the formulas
// (RMSNorm, RoPE as explicit pair rotations, softmax(QK^T/sqrt(hd) + mask)V,
// SwiGLU), in float64; the exact receptive field of sliding-window attention;
// RoPE carrying only relative position; configs and parameter counts.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo_paths.h"
#include "tmm/models/transformer.h"

namespace {

using Catch::Matchers::Contains;
using tmm::models::build_model;
using tmm::models::LanguageModel;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json small_config(int64_t window, int64_t n_layers = 2) {
  return {{"arch", "transformer"}, {"vocab_size", 29}, {"d_model", 16}, {"n_layers", n_layers},
          {"n_heads", 2},          {"max_len", 40},    {"window", window}, {"ffn_hidden", 24}};
}

std::shared_ptr<LanguageModel> build_double(const nlohmann::json& config) {
  auto model = build_model(config.dump());
  model->to(at::kDouble);
  model->eval();
  return model;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// ---- The reference, in float64, from the formulas. ----------------------

at::Tensor ref_rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps = 1e-6) {
  return x / at::sqrt(x.pow(2).mean(-1, true) + eps) * w;
}

at::Tensor ref_linear(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); }

// x: B x L x d. Attention of head h at query t over keys s with
// max(0, t - window + 1) <= s <= t (window 0: all s <= t), reading key/value
// head h / (H / H_kv) (grouped-query); hd = wq rows / H, H_kv = wk rows / hd.
// RoPE rotates the pair (i, i + hd/2) of position p by p * theta^(-2i/hd).
at::Tensor ref_attention(const at::Tensor& x, const at::Tensor& wq, const at::Tensor& wk, const at::Tensor& wv,
                         const at::Tensor& wo, int64_t H, double theta, int64_t window) {
  const int64_t B = x.size(0), L = x.size(1), hd = wq.size(0) / H, H_kv = wk.size(0) / hd;
  at::Tensor q = ref_linear(x, wq).contiguous(), k = ref_linear(x, wk).contiguous();
  const at::Tensor v = ref_linear(x, wv).contiguous();
  for (at::Tensor* t : {&q, &k}) {
    at::Tensor r = t->clone();
    auto T = t->accessor<double, 3>();
    auto R = r.accessor<double, 3>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < L; ++p)
        for (int64_t h = 0; h < t->size(2) / hd; ++h)
          for (int64_t i = 0; i < hd / 2; ++i) {
            const double angle = double(p) * std::pow(theta, -2.0 * double(i) / double(hd));
            const int64_t a = h * hd + i, c = h * hd + i + hd / 2;
            R[b][p][a] = T[b][p][a] * std::cos(angle) - T[b][p][c] * std::sin(angle);
            R[b][p][c] = T[b][p][c] * std::cos(angle) + T[b][p][a] * std::sin(angle);
          }
    *t = r;
  }
  at::Tensor y = at::zeros({B, L, H * hd}, x.options());
  auto Q = q.accessor<double, 3>();
  auto K = k.accessor<double, 3>();
  auto Vv = v.accessor<double, 3>();
  auto Y = y.accessor<double, 3>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < L; ++t) {
        const int64_t kv = h / (H / H_kv);
        const int64_t first = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
        std::vector<double> score;
        double mx = -INFINITY;
        for (int64_t s = first; s <= t; ++s) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += Q[b][t][h * hd + i] * K[b][s][kv * hd + i];
          score.push_back(dot / std::sqrt(double(hd)));
          mx = std::max(mx, score.back());
        }
        double z = 0;
        for (double& e : score) z += (e = std::exp(e - mx));
        for (int64_t s = first; s <= t; ++s)
          for (int64_t i = 0; i < hd; ++i) Y[b][t][h * hd + i] += score[s - first] / z * Vv[b][s][kv * hd + i];
      }
  return ref_linear(y, wo);
}

at::Tensor ref_logits(LanguageModel& model, const nlohmann::json& c, const at::Tensor& ids) {
  std::map<std::string, at::Tensor> P;
  for (const auto& item : model.named_parameters()) P[item.key()] = item.value().detach();
  const int64_t H = c["n_heads"], window = c.value("window", 0);
  const double theta = c.value("rope_theta", 10000.0), eps = c.value("norm_eps", 1e-6);
  at::Tensor h = P.at("embed.weight").index_select(0, ids.reshape({-1})).reshape({ids.size(0), ids.size(1), -1});
  for (int64_t i = 0; i < c["n_layers"].get<int64_t>(); ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    const at::Tensor n = ref_rmsnorm(h, P.at(b + "attn_norm.weight"), eps);
    h = h + ref_attention(n, P.at(b + "attn.wq.weight"), P.at(b + "attn.wk.weight"), P.at(b + "attn.wv.weight"),
                          P.at(b + "attn.wo.weight"), H, theta, window);
    const at::Tensor m = ref_rmsnorm(h, P.at(b + "mlp_norm.weight"), eps);
    const at::Tensor gate = ref_linear(m, P.at(b + "mlp.w1.weight"));
    h = h + ref_linear(gate / (1 + at::exp(-gate)) * ref_linear(m, P.at(b + "mlp.w3.weight")),
                       P.at(b + "mlp.w2.weight"));
  }
  h = ref_rmsnorm(h, P.at("norm.weight"), eps);
  return ref_linear(h, c.value("tie_embeddings", false) ? P.at("embed.weight") : P.at("head.weight"));
}

// Parameters of a Transformer, from the formula.
int64_t expected_parameters(const nlohmann::json& c) {
  const int64_t V = c["vocab_size"], d = c["d_model"], N = c["n_layers"], hidden = c["ffn_hidden"];
  const int64_t H = c["n_heads"], H_kv = c["n_kv_heads"], hd = c["head_dim"];
  const bool tied = c["tie_embeddings"];
  return V * d * (tied ? 1 : 2) + N * (2 * d * H * hd + 2 * d * H_kv * hd + 3 * d * hidden + 2 * d) + d;
}

}  // namespace

TEST_CASE("Transformer logits match a loop reference (full and sliding-window attention)", "[transformer]") {
  for (const int64_t window : {0, 1, 3, 40}) {
    for (const bool tied : {false, true}) {
      for (const bool gqa : {false, true}) {
        INFO("window " << window << ", tied " << tied << ", grouped-query " << gqa);
        at::manual_seed(1);
        nlohmann::json c = small_config(window);
        c["tie_embeddings"] = tied;
        c["init"] = "kaiming";  // weights of order 1: the comparison below is then a relative one
        if (gqa) {  // 2 query heads on 1 key/value head, head_dim 6 (not d / n_heads), eps 1e-5
          c["n_kv_heads"] = 1;
          c["head_dim"] = 6;
          c["norm_eps"] = 1e-5;
        }
        c["rope_theta"] = 100.0;  // a small base: the positions' angles differ visibly
        auto model = build_double(c);
        // Non-trivial norm weights, so that a missing or misplaced norm shows.
        {
          at::NoGradGuard no_grad;
          for (auto& item : model->named_parameters())
            if (item.key().find("norm") != std::string::npos) item.value().uniform_(0.5, 1.5);
        }
        const at::Tensor ids = at::randint(29, {2, 13}, at::kLong);
        const at::Tensor logits = model->forward(ids), ref = ref_logits(*model, c, ids);
        // The shared RMSNorm (models/layers.cpp) computes in float32 even for
        // float64 inputs, so the model carries float32 rounding (a few 1e-6
        // here); the attention module alone is checked to 1e-10 below.
        CHECK(max_abs_diff(logits, ref) < 1e-5 * (1 + ref.abs().max().item<double>()));
      }
    }
  }
}

TEST_CASE("Transformer attention module matches softmax(QK^T/sqrt(hd) + mask)V", "[transformer]") {
  for (const int64_t window : {0, 2, 5}) {
    INFO("window " << window);
    at::manual_seed(2);
    auto c = tmm::models::TransformerConfig::from_json_text(
        nlohmann::json{{"arch", "transformer"}, {"vocab_size", 5}, {"d_model", 24}, {"n_layers", 1}, {"max_len", 17},
                       {"n_heads", 3}, {"window", window}}
            .dump());
    tmm::models::TransformerAttention attn(c);
    attn->to(at::kDouble);
    const at::Tensor x = at::randn({3, 17, 24}, at::kDouble);
    const at::Tensor y = attn->forward(x);
    const at::Tensor ref = ref_attention(x, attn->wq->weight.detach(), attn->wk->weight.detach(),
                                         attn->wv->weight.detach(), attn->wo->weight.detach(), 3, 10000.0, window);
    CHECK(y.sizes() == x.sizes());
    CHECK(max_abs_diff(y, ref) < 1e-10);
  }
}

TEST_CASE("sliding-window attention limits the receptive field to n_layers*(window-1) tokens", "[transformer]") {
  // Token s can reach position t only through n_layers hops of at most
  // window - 1 positions each: the logits at t depend on exactly the tokens
  // t - n_layers*(window-1) .. t.
  for (const auto& [window, n_layers] : std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {4, 3}, {1, 2}}) {
    INFO("window " << window << ", n_layers " << n_layers);
    at::manual_seed(3);
    const auto model = build_double(small_config(window, n_layers));
    const int64_t L = 32, reach = n_layers * (window - 1);
    const at::Tensor ids = at::randint(29, {2, L}, at::kLong);
    const at::Tensor logits = model->forward(ids);
    for (const int64_t s : {0, 7, 20}) {
      at::Tensor ids2 = ids.clone();
      ids2.select(1, s).copy_((ids.select(1, s) + 5) % 29);
      const at::Tensor logits2 = model->forward(ids2);
      for (int64_t t = 0; t < L; ++t) {
        INFO("changed token " << s << ", position " << t);
        const double diff = max_abs_diff(logits.select(1, t), logits2.select(1, t));
        if (t >= s && t <= s + reach)
          CHECK(diff > 1e-6);
        else
          CHECK(diff < 1e-12);
      }
    }
  }
}

TEST_CASE("RoPE carries only relative position: a windowed model is shift-invariant", "[transformer]") {
  // Past its receptive field the model has no way to know where it is: the
  // logits at t of a sequence equal those at t + k of the same sequence with
  // k tokens prepended, once t >= n_layers*(window-1).
  at::manual_seed(4);
  const auto model = build_double(small_config(/*window=*/3, /*n_layers=*/2));
  const int64_t L = 20, k = 9, reach = 4;
  const at::Tensor ids = at::randint(29, {2, L}, at::kLong);
  const at::Tensor shifted = at::cat({at::randint(29, {2, k}, at::kLong), ids}, 1);
  const at::Tensor a = model->forward(ids).narrow(1, reach, L - reach);
  const at::Tensor b = model->forward(shifted).narrow(1, k + reach, L - reach);
  CHECK(max_abs_diff(a, b) < 1e-9);
  // Before the receptive field is full, position does matter (the prefix is seen).
  CHECK(max_abs_diff(model->forward(ids).narrow(1, 0, reach), model->forward(shifted).narrow(1, k, reach)) > 1e-6);
}

TEST_CASE("Transformer runs in float32 and bfloat16 close to float64", "[transformer]") {
  for (const int64_t window : {0, 4}) {
    INFO("window " << window);
    at::manual_seed(5);
    const auto model = build_double(small_config(window));
    const at::Tensor ids = at::randint(29, {2, 21}, at::kLong);
    const at::Tensor ref = model->forward(ids);
    model->to(at::kFloat);
    CHECK(model->forward(ids).scalar_type() == at::kFloat);
    CHECK(max_abs_diff(model->forward(ids), ref) < 1e-4 * (1 + ref.abs().max().item<double>()));
    model->to(at::kBFloat16);
    const at::Tensor low = model->forward(ids);
    CHECK(low.scalar_type() == at::kBFloat16);
    CHECK(max_abs_diff(low, ref) < 0.1 * (1 + ref.abs().max().item<double>()));
  }
}

TEST_CASE("Transformer windowed variant: gradients and dropout", "[transformer]") {
  at::manual_seed(6);
  nlohmann::json c = small_config(/*window=*/3);
  c["dropout"] = 0.5;
  auto model = build_model(c.dump());
  const at::Tensor ids = at::randint(29, {2, 19}, at::kLong);
  model->train();
  const at::Tensor a = model->forward(ids);
  CHECK(max_abs_diff(a, model->forward(ids)) > 1e-4);  // dropout is active in training
  a.pow(2).mean().backward();
  for (const auto& p : model->named_parameters()) {
    INFO("parameter " << p.key());
    REQUIRE(p.value().grad().defined());
    CHECK(p.value().grad().abs().sum().item<double>() > 0);
  }
  model->eval();
  CHECK(max_abs_diff(model->forward(ids), model->forward(ids)) == 0);
}

TEST_CASE("Transformer parameters: names, shapes, counts of the zoo's configs", "[transformer]") {
  auto model = build_model(small_config(0).dump());
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& p : model->named_parameters()) shapes[p.key()] = p.value().sizes().vec();
  CHECK(shapes.size() == 2 + 2 * 9 + 1);
  CHECK(shapes.at("embed.weight") == std::vector<int64_t>{29, 16});
  CHECK(shapes.at("blocks.1.attn_norm.weight") == std::vector<int64_t>{16});
  CHECK(shapes.at("blocks.1.attn.wq.weight") == std::vector<int64_t>{16, 16});
  CHECK(shapes.at("blocks.1.attn.wo.weight") == std::vector<int64_t>{16, 16});
  CHECK(shapes.at("blocks.0.mlp.w1.weight") == std::vector<int64_t>{24, 16});
  CHECK(shapes.at("blocks.0.mlp.w3.weight") == std::vector<int64_t>{24, 16});
  CHECK(shapes.at("blocks.0.mlp.w2.weight") == std::vector<int64_t>{16, 24});
  CHECK(shapes.at("norm.weight") == std::vector<int64_t>{16});
  CHECK(shapes.at("head.weight") == std::vector<int64_t>{29, 16});
  CHECK(model->named_buffers().size() == 0);  // RoPE and masks are computed in forward

  nlohmann::json tied = small_config(0);
  tied["tie_embeddings"] = true;
  auto tied_model = build_model(tied.dump());
  CHECK(tied_model->named_parameters().find("head.weight") == nullptr);

  const std::map<std::string, int64_t> expected_count = {
      {"transformer-tiny.json", 29'344}, {"transformer-cpu-small.json", 1'648'768},
      {"transformer-paper.json", 75'317'760}};
  for (const auto& [file, count] : expected_count) {
    INFO("config " << file);
    const std::string text = read_file(tmm_test::models_dir() + "/" + file);
    const auto resolved = nlohmann::json::parse(tmm::models::TransformerConfig::from_json_text(text).to_json_text());
    CHECK(expected_parameters(resolved) == count);
    if (file != "transformer-paper.json") CHECK(build_model(text)->parameter_count() == count);
  }
}

TEST_CASE("Transformer config: SwiGLU width, round trip, errors name the key", "[transformer]") {
  using tmm::models::llama_ffn_hidden;
  using tmm::models::TransformerConfig;
  CHECK(llama_ffn_hidden(512, 4.0) == 1368);  // floor(2/3 * 2048) = 1365, rounded up to 8
  CHECK(llama_ffn_hidden(128, 4.0) == 344);
  CHECK(llama_ffn_hidden(32, 4.0) == 88);
  CHECK(llama_ffn_hidden(96, 3.0) == 192);

  nlohmann::json c = small_config(0);
  c.erase("ffn_hidden");
  const auto derived = TransformerConfig::from_json_text(c.dump());
  CHECK(derived.ffn_hidden == 48);  // floor(2/3 * 64) = 42 -> 48
  CHECK(derived.rope_theta == 10000.0);
  CHECK(derived.window == 0);
  CHECK_FALSE(derived.tie_embeddings);
  // ffn_hidden > 0 wins over ffn_mult.
  c["ffn_hidden"] = 40;
  c["ffn_mult"] = 2.5;
  CHECK(TransformerConfig::from_json_text(c.dump()).ffn_hidden == 40);

  // Round trip: config_json() spells out every key and rebuilds the same config.
  auto model = build_model(c.dump());
  const auto written = nlohmann::json::parse(model->config_json());
  for (const char* key : {"arch", "vocab_size", "d_model", "n_layers", "max_len", "n_heads", "n_kv_heads", "head_dim",
                          "norm_eps", "init", "rope_theta", "window", "ffn_mult", "ffn_hidden", "dropout",
                          "tie_embeddings"})
    CHECK(written.contains(key));
  CHECK(written.size() == 16);
  CHECK(written["n_kv_heads"] == 2);  // resolved: n_heads
  CHECK(written["head_dim"] == 8);    // resolved: d_model / n_heads
  CHECK(written["init"] == "llama");
  CHECK(build_model(written.dump())->config_json() == model->config_json());

  auto bad = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json b = small_config(0);
    if (value.is_null())
      b.erase(key);
    else
      b[key] = value;
    return b.dump();
  };
  CHECK_THROWS_WITH(build_model(bad("n_heads", 3)), Contains("\"n_heads\"") && Contains("divide"));
  CHECK_THROWS_WITH(build_model(bad("n_heads", 16)), Contains("\"n_heads\"") && Contains("even"));
  CHECK_THROWS_WITH(build_model(bad("n_heads", 0)), Contains("\"n_heads\""));
  CHECK_THROWS_WITH(build_model(bad("n_heads", nullptr)), Contains("missing key \"n_heads\""));
  CHECK_THROWS_WITH(build_model(bad("window", -1)), Contains("\"window\""));
  CHECK_THROWS_WITH(build_model(bad("window", 2.5)), Contains("\"window\"") && Contains("integer"));
  CHECK_THROWS_WITH(build_model(bad("rope_theta", 0.5)), Contains("\"rope_theta\""));
  CHECK_THROWS_WITH(build_model(bad("rope_theta", "big")), Contains("\"rope_theta\""));
  CHECK_THROWS_WITH(build_model(bad("ffn_mult", 0)), Contains("\"ffn_mult\""));
  CHECK_THROWS_WITH(build_model(bad("ffn_hidden", -8)), Contains("\"ffn_hidden\""));
  CHECK_THROWS_WITH(build_model(bad("dropout", 1.0)), Contains("\"dropout\""));
  CHECK_THROWS_WITH(build_model(bad("n_kv_head", 1)), Contains("unknown key \"n_kv_head\""));
  CHECK_THROWS_WITH(build_model(bad("n_kv_heads", 3)), Contains("key \"n_kv_heads\" must divide n_heads = 2, got 3"));
  CHECK_THROWS_WITH(build_model(bad("head_dim", 5)), Contains("key \"head_dim\" must be even for RoPE, got 5"));
  CHECK_THROWS_WITH(build_model(bad("norm_eps", -1.0)), Contains("key \"norm_eps\" must be a finite number > 0"));
  CHECK_THROWS_WITH(build_model(bad("init", "xavier")), Contains("key \"init\" must be llama or kaiming"));
}

TEST_CASE("Transformer: empty sequences", "[transformer]") {
  for (const int64_t window : {0, 3}) {
    auto model = build_model(small_config(window).dump());
    const at::Tensor logits = model->forward(at::zeros({2, 0}, at::kLong));
    CHECK(logits.sizes() == at::IntArrayRef{2, 0, 29});
  }
}

