// The op under autocast (the C++ state behind torch.autocast): inputs cast to
// the autocast dtype, the result in it, gradients in the parameters' dtype;
// errors within the tolerance table (tmm/tolerances.json: max|a-e|/max|e|)
// of a float64 reference computed from the same rounded inputs; a model's
// step within the table's whole-step row of the float32 step.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <catch2/catch.hpp>
#include <tmm/models.h>
#include <tmm/ops.h>

#include "naive_reference.h"
#include "repo_paths.h"
#include "skip.h"
#include "tolerances.h"

namespace {

// torch.autocast(device, dtype) for a scope, as the Python context manager
// sets it: enabled, the dtype, the nesting (the outermost exit clears the
// cast cache).
class Autocast {
 public:
  Autocast(c10::DeviceType device, at::ScalarType dtype)
      : device_(device),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        was_dtype_(at::autocast::get_autocast_dtype(device)) {
    at::autocast::set_autocast_enabled(device, true);
    at::autocast::set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

at::Tensor rounded(const at::Tensor& t, at::ScalarType dtype) { return t.detach().to(dtype).to(at::kDouble); }

// Forward under autocast, backward inside or after it, against the naive
// reference on the inputs rounded to `dtype`.
void check_op(c10::DeviceType device, at::ScalarType dtype, bool backward_inside) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  // x: B x L x C = 2 x 37 x 6 (a transposed, non-contiguous view), weight G x K x N = 2 x 2 x 40.
  const at::Tensor x = at::randn({2, 6, 37}, f32).transpose(1, 2).requires_grad_();
  const at::Tensor w = (at::randn({2, 2, 40}, f32) / 6.0).requires_grad_();
  const at::Tensor b = at::randn({2, 40}, f32).requires_grad_();
  const at::Tensor gy = at::randn({2, 37, 6}, f32);
  at::Tensor y;
  {
    Autocast scope(device, dtype);
    y = tmm::ops::causal_toeplitz(x, w, b);
    if (backward_inside) (y.to(at::kFloat) * gy).sum().backward();
  }
  if (!backward_inside) (y.to(at::kFloat) * gy).sum().backward();
  CHECK(y.scalar_type() == dtype);
  const at::Tensor xr = rounded(x, dtype), wr = rounded(w, dtype), br = rounded(b, dtype);
  const double tol = tolerances::of(dtype);
  CHECK(rel_err(y, naive::forward(xr, wr, br)) <= tol);
  // The gradient reaching y is gy rounded to y's dtype (the backward of .to(kFloat)).
  const auto [rx, rw, rb] = naive::backward(rounded(gy, dtype), xr, wr);
  for (const auto& [grad, ref] : {std::pair{x.grad(), rx}, std::pair{w.grad(), rw}, std::pair{b.grad(), rb}}) {
    REQUIRE(grad.defined());
    CHECK(grad.scalar_type() == at::kFloat);
    CHECK(rel_err(grad, ref) <= tol);
  }
}

// One forward + backward of models/tmm-tiny.json (C++ modules, float32
// parameters) under autocast against the same step in float32: logits in the
// autocast dtype, the loss and every parameter's gradient (float32) within the
// table's whole-step row (not the op's: two blocks of dtype-rounded Linear and
// LayerNorm too), each gradient against its own scale, floored at the row
// times the largest gradient's (tmm.testing.grad_errors), so a small bias or
// norm gradient cannot hide behind a large one.
void check_tiny_tmm(c10::DeviceType device, at::ScalarType dtype) {
  std::ostringstream config;
  config << std::ifstream(tmm_test::models_dir() + "/tmm-tiny.json").rdbuf();
  auto model = tmm::models::build_model(config.str());
  model->to(device);
  const at::Tensor ids = at::randint(model->vocab_size(), {2, 24}, at::TensorOptions(at::kLong).device(device));
  const at::Tensor loss32 = at::cross_entropy_loss(model->forward(ids).flatten(0, 1), ids.flatten());
  loss32.backward();
  std::map<std::string, at::Tensor> grads32;
  double largest = 0.0;
  for (const auto& p : model->named_parameters()) {
    REQUIRE(p.value().grad().defined());
    grads32[p.key()] = p.value().grad().detach().clone();
    largest = std::max(largest, p.value().grad().abs().max().item<double>());
  }
  model->zero_grad(/*set_to_none=*/true);
  at::Tensor logits, loss;
  {
    Autocast scope(device, dtype);
    logits = model->forward(ids);
    loss = at::cross_entropy_loss(logits.to(at::kFloat).flatten(0, 1), ids.flatten());
  }
  loss.backward();
  CHECK(logits.scalar_type() == dtype);
  const double tol = tolerances::step(dtype);
  CHECK(rel_err(loss, loss32) <= tol);
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    const at::Tensor& grad = p.value().grad();
    REQUIRE(grad.defined());
    CHECK(grad.scalar_type() == at::kFloat);
    const at::Tensor& want = grads32.at(p.key());
    const double diff = (naive::as_double(grad) - naive::as_double(want)).abs().max().item<double>();
    const double scale = std::max(want.abs().max().item<double>(), tol * largest);
    INFO("max |diff| " << diff << ", scale " << scale);
    CHECK(diff <= tol * scale);  // NaN fails too
  }
}

}  // namespace

TEST_CASE("autocast on CPU: the op runs in bf16 and fp16, gradients float32", "[autocast]") {
  at::manual_seed(3);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    for (const bool inside : {false, true}) {
      INFO("dtype " << dtype << ", backward " << (inside ? "inside" : "after") << " the autocast region");
      check_op(c10::DeviceType::CPU, dtype, inside);
    }
  }
}

TEST_CASE("autocast on CPU: inputs are brought to one dtype; float64 is left alone", "[autocast]") {
  const at::Tensor x = at::randn({1, 8, 4}).to(at::kBFloat16), w = at::randn({1, 1, 8}), b = at::randn({1, 8});
  {
    Autocast scope(c10::DeviceType::CPU, at::kBFloat16);
    // Mixed bf16 / float32 inputs: all become bf16.
    CHECK(tmm::ops::causal_toeplitz(x, w, b).scalar_type() == at::kBFloat16);
    CHECK(tmm::ops::causal_toeplitz(x.to(at::kFloat), w).scalar_type() == at::kBFloat16);
    // The backward op too.
    const auto [gx, gw, gb] = tmm::ops::causal_toeplitz_backward(x.to(at::kFloat), x, w);
    CHECK(gx.scalar_type() == at::kBFloat16);
    CHECK(gw.scalar_type() == at::kBFloat16);
    CHECK(gb.scalar_type() == at::kBFloat16);
    // float64 is not autocast (as with ATen's own ops): it stays float64.
    CHECK(tmm::ops::causal_toeplitz(x.to(at::kDouble), w.to(at::kDouble)).scalar_type() == at::kDouble);
  }
  // Outside an autocast region the op's dtype check applies.
  CHECK_THROWS_WITH(tmm::ops::causal_toeplitz(x, w), Catch::Matchers::Contains("expected weight to have x's dtype"));
}

TEST_CASE("autocast on CPU: a tiny TMM model trains a step", "[autocast]") {
  at::manual_seed(4);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    INFO("dtype " << dtype);
    check_tiny_tmm(c10::DeviceType::CPU, dtype);
  }
}

TEST_CASE("autocast on CUDA: the op and a tiny TMM model", "[autocast][cuda]") {
  if (!at::hasCUDA()) TMM_SKIP("no CUDA device on this machine");
  at::manual_seed(5);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    INFO("dtype " << dtype);
    check_op(c10::DeviceType::CUDA, dtype, false);
    check_tiny_tmm(c10::DeviceType::CUDA, dtype);
  }
}
