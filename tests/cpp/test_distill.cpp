// Distillation (tmm/models/distill.h) and decode method "distilled": exact
// recovery of a sum of exponentials, a decoder equal to the exact one when the
// fit is exact or the window covers everything, the reported error against
// the decoder's measured output error, a state of fixed size, stable modes,
// errors naming the argument, the saved fit read back.
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include "models/distilled_toeplitz.h"
#include "models/online_toeplitz.h"
#include "tmm/models/distill.h"
#include "tmm/models/language_model.h"
#include "tolerances.h"

namespace {

using Catch::Matchers::Contains;
using tmm::models::DecodeMethod;
namespace tmod = tmm::models;

// `count` x r random stable modes, |lambda| in [0.5, 0.95], none real.
std::pair<at::Tensor, at::Tensor> random_modes(int64_t count, int64_t r) {
  const at::Tensor radius = at::rand({count, r}, at::kDouble) * 0.45 + 0.5;
  const at::Tensor angle = at::rand({count, r}, at::kDouble) * 2.8 + 0.2;  // away from the real axis
  return {at::polar(radius, angle), at::complex(at::randn({count, r}, at::kDouble), at::randn({count, r}, at::kDouble))};
}

tmod::FitOptions fit_options(int64_t order, int64_t steps) {
  tmod::FitOptions o;
  o.order = order;
  o.steps = steps;
  return o;
}

std::shared_ptr<tmod::LanguageModel> small_model(const std::string& arch, const std::string& extra, int64_t max_len) {
  const std::string common = R"({"vocab_size": 29, "d_model": 12, "n_layers": 2, "max_len": )" +
                             std::to_string(max_len);
  auto model = tmod::build_model(common + R"(, "arch": ")" + arch + "\"" + extra + "}");
  model->eval();
  return model;
}

// Prefill P tokens then steps to L: all logits.
at::Tensor decode_all(tmod::LanguageModel& model, DecodeMethod method, const at::Tensor& ids, int64_t P) {
  const int64_t L = ids.size(1);
  auto state = model.start_decoding(ids.size(0), L, method);
  std::vector<at::Tensor> out{model.decode(*state, ids.narrow(1, 0, P))};
  for (int64_t t = P; t < L; ++t) out.push_back(model.decode(*state, ids.narrow(1, t, 1)));
  return at::cat(out, 1);
}

}  // namespace

TEST_CASE("distill: a sum of r stable exponentials is recovered", "[distill]") {
  at::manual_seed(11);
  const int64_t r = 4, n = 200;
  const auto [lambda, residue] = random_modes(6, r);
  const at::Tensor w = tmod::modal_kernel(lambda, residue, n).view({2, 3, n});
  for (int64_t steps : {0, 30}) {
    const tmod::ModalFit fit = tmod::fit_modal(w, fit_options(r, steps));
    CHECK(fit.lambda.sizes() == at::IntArrayRef({2, 3, r}));
    INFO("steps " << steps << ": relative errors " << fit.error);
    CHECK(fit.error.max().item<double>() < 1e-8);
    CHECK((at::abs(fit.lambda) < 1).all().item<bool>());
    const at::Tensor again = tmod::modal_kernel(fit.lambda, fit.residue, n);
    CHECK((again - w).abs().max().item<double>() < 1e-8 * w.abs().max().item<double>());
  }
}

TEST_CASE("distill: modes stay inside the unit circle, even for a growing kernel", "[distill]") {
  at::manual_seed(2);
  const int64_t n = 120;
  const at::Tensor t = at::arange(n, at::kDouble);
  const at::Tensor w = at::stack({at::pow(1.02, t), at::cos(t * 0.3) * at::pow(1.01, t), at::randn({n}, at::kDouble),
                                  at::ones({n}, at::kDouble)});
  const tmod::ModalFit fit = tmod::fit_modal(w, fit_options(6, 40));
  CHECK((at::abs(fit.lambda) <= 1 - 1e-6 + 1e-15).all().item<bool>());
  CHECK(at::isfinite(fit.error).all().item<bool>());
  CHECK(fit.error[3].item<double>() < 1e-3);  // a constant is a mode at the radius limit
}

TEST_CASE("distill: an exactly modal TMM decodes as the exact decoder, to rounding", "[distill]") {
  torch::NoGradGuard no_grad;
  at::manual_seed(5);
  for (const std::string extra : {std::string(""), std::string(R"(, "heads": 2, "kernel": 2)"),
                                  std::string(R"(, "mixer": "expanded", "heads": 3)")}) {
    INFO("tmm" << extra);
    auto model = small_model("tmm", extra, 60);
    model->to(at::kDouble);
    for (const auto& k : model->long_kernels()) {
      const auto [lambda, residue] = random_modes(k.weight.size(0) * k.weight.size(1), 3);
      at::Tensor w = k.weight;  // the parameter itself
      w.copy_(tmod::modal_kernel(lambda, residue, w.size(2)).view(w.sizes()) * 0.3);
    }
    const at::Tensor ids = at::randint(29, {2, 60}, at::kLong);
    const at::Tensor expected = model->forward(ids);
    for (int64_t window : {0, 5}) {
      tmod::DistillOptions o;
      o.fit = fit_options(3, 0);
      o.window = window;
      model->set_distillation(tmod::distill(*model, o));
      for (int64_t P : {1, 17}) {
        const double err = (decode_all(*model, DecodeMethod::Distilled, ids, P) - expected).abs().max().item<double>();
        INFO("window " << window << ", prompt " << P << ": max error " << err);
        CHECK(err < 1e-9 * expected.abs().max().item<double>());
      }
    }
  }
}

TEST_CASE("distill: a window covering the context reproduces the exact decoder bit for bit", "[distill]") {
  torch::NoGradGuard no_grad;
  at::manual_seed(8);
  for (const auto& [arch, extra] : std::vector<std::pair<std::string, std::string>>{
           {"tmm", R"(, "heads": 2, "kernel": 3)"}, {"hyena", R"(, "filter_order": 8)"}}) {
    INFO(arch);
    auto model = small_model(arch, extra, 48);
    tmod::DistillOptions o;
    o.fit = fit_options(4, 0);
    o.window = 48;
    model->set_distillation(tmod::distill(*model, o));
    const at::Tensor ids = at::randint(29, {2, 48}, at::kLong);
    CHECK(at::equal(decode_all(*model, DecodeMethod::Distilled, ids, 7), decode_all(*model, DecodeMethod::Cached, ids, 7)));
  }
}

TEST_CASE("distill: Hyena with active modes decodes as a dense causal convolution of the fitted kernels",
          "[distill]") {
  // A window shorter than the context: every step past it reads the modes.
  // The decoder's output is the causal convolution of its input with
  // materialize() (the exact taps, then the modes' tail), to float64 rounding.
  torch::NoGradGuard no_grad;
  at::manual_seed(6);
  const int64_t L = 40, B = 2, P = 3;
  auto model = small_model("hyena", R"(, "filter_order": 8, "emb_dim": 5, "filter_sin_freq": 10)", L);  // rough filters
  model->to(at::kDouble);
  for (at::Tensor p : model->parameters()) p.copy_(at::randn_like(p) * 0.5);
  for (const int64_t window : {0, 4}) {  // 0: Hyena's skip D as the direct term
    tmod::DistillOptions o;
    o.fit = fit_options(3, 5);
    o.window = window;
    const auto d = tmod::distill(*model, o);
    for (const tmod::LongKernel& k : model->long_kernels()) {
      const tmod::DistilledKernel& fitted = d->kernel(k.name);
      const at::Tensor m = fitted.materialize(L).select(1, 0);  // C x L (Hyena: one tap per channel)
      const int64_t C = m.size(0);
      const at::Tensor x = at::randn({B, L, C}, at::kDouble);
      auto mixer = tmod::make_distilled_mixer(fitted, k.weight, at::Tensor(), B, C, L);
      std::vector<at::Tensor> out{mixer->forward(x.narrow(1, 0, P))};
      for (int64_t t = P; t < L; ++t) out.push_back(mixer->forward(x.narrow(1, t, 1)));
      // y[b, t, c] = sum_{s <= t} m[c, t - s] x[b, s, c], lag by lag.
      at::Tensor expected = at::zeros_like(x);
      for (int64_t lag = 0; lag < L; ++lag)
        expected.narrow(1, lag, L - lag).add_(x.narrow(1, 0, L - lag) * m.select(1, lag));
      const double err = rel_err(at::cat(out, 1), expected);
      INFO(k.name << ", window " << window << ": rel err " << err << ", fit error " << fitted.error.max().item<double>());
      CHECK(fitted.error.max().item<double>() > 1e-3);  // the fitted kernels are not the model's
      CHECK(err <= tolerances::of(at::kDouble));
    }
  }
}

TEST_CASE("distill: the reported kernel error is the decoder's output error", "[distill]") {
  // White-noise inputs: the output error at position t has variance
  // sum_{j<=t} (w - fit)[j]^2, the squared absolute error at t = N - 1.
  torch::NoGradGuard no_grad;
  at::manual_seed(4);
  const int64_t C = 4, N = 160, B = 400, window = 3;
  const at::Tensor t = at::arange(N, at::kDouble);
  std::vector<at::Tensor> rows;
  for (int64_t c = 0; c < C; ++c)
    rows.push_back(at::exp(-t / (20.0 + 15 * c)) * at::cos(t / (5.0 + c) + c) + 0.5 * at::exp(-at::square((t - 30 - 10 * c) / 12.0)));
  const at::Tensor weight = at::stack(rows).view({C, 1, N});  // C groups of one channel (Hyena's layout)
  tmod::DistilledKernel k;
  const tmod::ModalFit fit = tmod::fit_modal(weight.narrow(2, window, N - window), fit_options(3, 50));
  k.taps = weight.narrow(2, 0, window).clone();
  k.lambda = fit.lambda;
  k.residue = fit.residue;
  k.length = N;
  const at::Tensor reported = fit.abs_error.view({C});
  const at::Tensor x = at::randn({B, N, C}, at::kDouble);
  tmod::OnlineToeplitz exact(tmod::OnlineToeplitz::Kind::Toeplitz, weight, at::Tensor(), B, C, N, /*fast=*/false);
  auto distilled = tmod::make_distilled_mixer(k, weight, at::Tensor(), B, C, N);
  exact.forward(x.narrow(1, 0, 1));
  distilled->forward(x.narrow(1, 0, 1));
  at::Tensor e;
  for (int64_t s = 1; s < N; ++s) e = distilled->forward(x.narrow(1, s, 1)) - exact.forward(x.narrow(1, s, 1));
  const at::Tensor measured = e.squeeze(1).square().mean(0).sqrt();  // C
  INFO("reported " << reported << " measured " << measured);
  CHECK((reported > 1e-4).all().item<bool>());  // a real approximation, not an exact fit
  CHECK(((measured / reported - 1).abs() < 0.15).all().item<bool>());
}

TEST_CASE("distill: the state has the same size at every step, 10k steps", "[distill]") {
  torch::NoGradGuard no_grad;
  at::manual_seed(1);
  const int64_t L = 10005;
  auto model = tmod::build_model(R"({"arch": "tmm", "vocab_size": 11, "d_model": 4, "n_layers": 1, "ffn_mult": 1, "max_len": )" +
                               std::to_string(L) + "}");
  model->eval();
  tmod::DistillOptions o;
  o.fit = fit_options(4, 0);
  o.window = 4;
  model->set_distillation(tmod::distill(*model, o));
  auto state = model->start_decoding(1, L, DecodeMethod::Distilled);
  const at::Tensor ids = at::randint(11, {1, L}, at::kLong);
  model->decode(*state, ids.narrow(1, 0, 5));
  const int64_t bytes = state->state_bytes();
  // ring 1 x 1 x 4 x 4 float + modes 1 x 1 x 1 x 4 x 4 complex128
  CHECK(bytes == 4 * 4 * 4 + 4 * 4 * 16);
  bool constant = true;
  for (int64_t t = 5; t < L; ++t) {
    model->decode(*state, ids.narrow(1, t, 1));
    constant = constant && state->state_bytes() == bytes;
  }
  CHECK(constant);
  auto cached = model->start_decoding(1, L, DecodeMethod::Cached);
  CHECK(cached->state_bytes() >= L * 4 * 4);  // the cached decoder keeps every input
}

TEST_CASE("distill: clear errors", "[distill]") {
  auto model = small_model("tmm", "", 32);
  tmod::DistillOptions o;
  o.fit.order = 0;
  CHECK_THROWS_WITH(tmod::distill(*model, o), Contains("order: expected >= 1, got 0"));
  o.fit.order = 4;
  o.window = -1;
  CHECK_THROWS_WITH(tmod::distill(*model, o), Contains("window: expected >= 0, got -1"));
  o.window = 33;
  CHECK_THROWS_WITH(tmod::distill(*model, o), Contains("window: expected <= the kernels' length 32"));
  CHECK_THROWS_WITH(tmod::fit_modal(at::ones({3, 5}), fit_options(0, 0)), Contains("order"));
  tmod::FitOptions bad = fit_options(2, 0);
  bad.max_radius = 1.0;
  CHECK_THROWS_WITH(tmod::fit_modal(at::ones({3, 5}), bad), Contains("max_radius"));
  CHECK_THROWS_WITH(model->start_decoding(1, 8, DecodeMethod::Distilled), Contains("has no distillation"));
  CHECK_THROWS_WITH(tmod::parse_decode_method("distiled"), Contains("distilled"));
  auto masked = small_model("tmm", R"(, "mixer": "masked")", 32);
  CHECK_THROWS_WITH(tmod::distill(*masked, tmod::DistillOptions{}), Contains("no long convolution kernels"));
  CHECK_THROWS_WITH(masked->start_decoding(1, 8, DecodeMethod::Distilled), Contains("long-convolution models"));
  auto transformer = small_model("transformer", R"(, "n_heads": 2)", 32);
  CHECK_THROWS_WITH(transformer->start_decoding(1, 8, DecodeMethod::Distilled), Contains("long-convolution models"));
  auto other = small_model("tmm", R"(, "heads": 2)", 32);
  CHECK_THROWS_WITH(other->set_distillation(tmod::distill(*model, tmod::DistillOptions{})), Contains("blocks.0.mixer.weight"));
}

TEST_CASE("distill: a saved distillation reads back and decodes the same", "[distill]") {
  torch::NoGradGuard no_grad;
  at::manual_seed(9);
  auto model = small_model("hyena", R"(, "filter_order": 8)", 40);
  tmod::DistillOptions o;
  o.fit = fit_options(5, 10);
  o.window = 2;
  const auto d = tmod::distill(*model, o);
  char dir[] = "/tmp/tmm_distill_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  tmod::save_distillation(*d, dir);
  CHECK(tmod::has_distillation(dir));
  const auto back = tmod::load_distillation(dir);
  CHECK(back->order == 5);
  CHECK(back->window == 2);
  REQUIRE(back->kernels.size() == d->kernels.size());
  for (const auto& [name, k] : d->kernels) {
    CHECK(at::equal(back->kernel(name).lambda, k.lambda));
    CHECK(at::equal(back->kernel(name).direct, k.direct));
  }
  const at::Tensor ids = at::randint(29, {1, 40}, at::kLong);
  model->set_distillation(d);
  const at::Tensor a = decode_all(*model, DecodeMethod::Distilled, ids, 3);
  model->set_distillation(back);
  CHECK(at::equal(a, decode_all(*model, DecodeMethod::Distilled, ids, 3)));
  for (const char* f : {"distilled.json", "distilled.safetensors"}) std::remove((std::string(dir) + "/" + f).c_str());
  rmdir(dir);
}
