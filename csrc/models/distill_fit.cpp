// fit_modal: the modal fit of a batch of kernels (distill.h), in float64 on
// the CPU: Hankel SVD for the modes, least squares for the residues, then
// Adam on the L2 error, keeping the better fit per kernel.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/core/GradMode.h>

#include "tmm/models/distill.h"

namespace tmm::models {
namespace {

// lambda^t for t < n: M x r -> M x n x r (complex). A running product, so
// lambda = 0 gives 1, 0, 0, ...
at::Tensor powers(const at::Tensor& lambda, int64_t n) {
  const int64_t M = lambda.size(0), r = lambda.size(1);
  const at::Tensor ones = at::ones({M, 1, r}, lambda.options());
  if (n == 1) return ones;
  return at::cat({ones, lambda.unsqueeze(1).expand({M, n - 1, r})}, 1).cumprod(1);
}

// Residues minimising sum_t (Re(sum_i R_i lambda_i^t) - w_t)^2 for fixed
// modes: real least squares over [Re lambda^t, -Im lambda^t] (gelsd copes
// with the rank a real mode or a repeated one leaves). Singular values below
// 1e-8 of the largest are cut: nearly equal modes otherwise get huge
// cancelling residues (1e11 on noisy kernels), which no float32 recurrence
// can run.
at::Tensor fit_residues(const at::Tensor& lambda, const at::Tensor& w) {
  const at::Tensor P = powers(lambda, w.size(1));                 // M x n x r
  const at::Tensor A = at::cat({at::real(P), -at::imag(P)}, 2);    // M x n x 2r
  const at::Tensor x = std::get<0>(at::linalg_lstsq(A, w.unsqueeze(2), 1e-8, "gelsd")).squeeze(2);
  const int64_t r = lambda.size(1);
  return at::complex(x.narrow(1, 0, r), x.narrow(1, r, r));
}

at::Tensor evaluate(const at::Tensor& lambda, const at::Tensor& residue, int64_t n) {
  return at::real(at::matmul(powers(lambda, n), residue.unsqueeze(2))).squeeze(2);  // M x n
}

at::Tensor clamp_radius(const at::Tensor& lambda, double max_radius) {
  const at::Tensor mag = at::abs(lambda);
  return at::where(mag > max_radius, lambda * (max_radius / mag), lambda);
}

// Kung's method: the leading singular vectors of the Hankel matrix of w are
// shift-invariant, U[1:] = U[:-1] A, and A's eigenvalues are the modes. A
// real kernel's modes come in conjugate pairs, and Re(R lambda^t) already
// covers a pair, so rank 2r is fitted and the upper half-plane kept.
at::Tensor hankel_modes(const at::Tensor& w, const FitOptions& o) {
  const int64_t M = w.size(0), n = w.size(1), r = o.order;
  const int64_t rows = std::min(o.hankel_rows, (n + 1) / 2);
  const int64_t cols = std::min(n - rows + 1, 4 * o.hankel_rows);
  at::Tensor lambda = at::zeros({M, r}, w.options().dtype(at::kComplexDouble));
  if (rows < 2) return lambda;
  const at::Tensor H = w.narrow(1, 0, rows + cols - 1).unfold(1, cols, 1);  // M x rows x cols
  const at::Tensor U = std::get<0>(at::linalg_svd(H, /*full_matrices=*/false));
  const int64_t k = std::min({2 * r, rows - 1, U.size(2)});
  const at::Tensor Uk = U.narrow(2, 0, k);
  const at::Tensor A = std::get<0>(at::linalg_lstsq(Uk.narrow(1, 0, rows - 1), Uk.narrow(1, 1, rows - 1)));
  at::Tensor modes = clamp_radius(std::get<0>(at::linalg_eig(A)), o.max_radius);  // M x k
  // Upper half-plane (and real) modes first, the largest first; at most r.
  const at::Tensor lower = (at::imag(modes) < -1e-12).to(at::kDouble);
  const at::Tensor order = at::argsort(lower * 4.0 - at::abs(modes), /*dim=*/1, /*descending=*/false);
  const int64_t kept = std::min(k, r);
  lambda.narrow(1, 0, kept).copy_(at::gather(modes, 1, order).narrow(1, 0, kept));
  return lambda;
}

// Adam on the relative L2 error of every kernel, over the modes in polar form
// (radius max_radius * exp(-softplus(a)) < 1 whatever a) and the residues.
std::tuple<at::Tensor, at::Tensor> refine(const at::Tensor& w, const at::Tensor& lambda0, const at::Tensor& residue0,
                                          const FitOptions& o) {
  const int64_t n = w.size(1);
  const at::Tensor norm2 = w.square().sum(1).clamp_min(1e-300);
  // a = softplus^-1(-log(rho / max_radius)), the decay kept a little above 0.
  const at::Tensor decay = (-at::log(at::abs(lambda0).clamp_min(1e-30) / o.max_radius)).clamp_min(1e-9);
  std::vector<at::Tensor> params = {at::log(at::expm1(decay)), at::angle(lambda0), at::real(residue0).clone(),
                                    at::imag(residue0).clone()};
  std::vector<at::Tensor> m1, m2;
  for (auto& p : params) {
    p = p.detach().clone().requires_grad_(true);
    m1.push_back(at::zeros_like(p));
    m2.push_back(at::zeros_like(p));
  }
  const at::Tensor t = at::arange(n, w.options()).view({1, n, 1});
  auto kernel_of = [&](const std::vector<at::Tensor>& q) {
    const at::Tensor log_rho = std::log(o.max_radius) - at::softplus(q[0]);                        // M x r
    const at::Tensor mag = at::exp(t * log_rho.unsqueeze(1));                                     // M x n x r
    const at::Tensor phase = t * q[1].unsqueeze(1);
    const at::Tensor term = q[2].unsqueeze(1) * at::cos(phase) - q[3].unsqueeze(1) * at::sin(phase);
    return (mag * term).sum(2);                                                                    // M x n
  };
  const double b1 = 0.9, b2 = 0.999, eps = 1e-12;
  for (int64_t step = 1; step <= o.steps; ++step) {
    at::AutoGradMode grad(true);
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    const at::Tensor loss = ((kernel_of(params) - w).square().sum(1) / norm2).sum();
    loss.backward();
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor g = params[i].grad();
      m1[i].mul_(b1).add_(g, 1 - b1);
      m2[i].mul_(b2).addcmul_(g, g, 1 - b2);
      const double c1 = 1 - std::pow(b1, double(step)), c2 = 1 - std::pow(b2, double(step));
      params[i].sub_(m1[i] / c1 / ((m2[i] / c2).sqrt() + eps) * o.lr);
    }
  }
  at::NoGradGuard no_grad;
  const at::Tensor rho = o.max_radius * at::exp(-at::softplus(params[0]));
  const at::Tensor lambda = at::polar(rho, params[1].detach());
  return {lambda, at::complex(params[2].detach(), params[3].detach())};
}

// Modes, residues and absolute errors of the rows of w (M x n float64).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fit_rows(const at::Tensor& w, const FitOptions& o) {
  const int64_t n = w.size(1);
  at::Tensor lambda = hankel_modes(w, o);
  at::Tensor residue = fit_residues(lambda, w);
  at::Tensor err = (evaluate(lambda, residue, n) - w).norm(2, 1);
  if (o.steps == 0) return {lambda, residue, err};
  auto [l2, r2] = refine(w, lambda, residue, o);
  l2 = clamp_radius(l2, o.max_radius);
  r2 = fit_residues(l2, w);  // the best residues for the refined modes
  const at::Tensor err2 = (evaluate(l2, r2, n) - w).norm(2, 1);
  const at::Tensor better = (err2 < err).unsqueeze(1);
  return {at::where(better, l2, lambda), at::where(better, r2, residue), at::minimum(err, err2)};
}

}  // namespace

at::Tensor modal_kernel(const at::Tensor& lambda, const at::Tensor& residue, int64_t n) {
  TORCH_CHECK(lambda.sizes() == residue.sizes() && lambda.dim() >= 1, "modal_kernel: lambda and residue must be ",
              "... x r of the same shape, got ", lambda.sizes(), " and ", residue.sizes());
  TORCH_CHECK(n >= 0, "modal_kernel: n must be >= 0, got ", n);
  std::vector<int64_t> shape(lambda.sizes().begin(), lambda.sizes().end() - 1);
  shape.push_back(n);
  const int64_t r = lambda.size(-1);
  if (n == 0) return at::zeros(shape, at::kDouble);
  const at::Tensor l = lambda.to(at::kCPU, at::kComplexDouble).reshape({-1, r});
  const at::Tensor R = residue.to(at::kCPU, at::kComplexDouble).reshape({-1, r});
  return evaluate(l, R, n).reshape(shape);
}

ModalFit fit_modal(const at::Tensor& kernels, const FitOptions& o) {
  TORCH_CHECK(o.order >= 1, "order: expected >= 1, got ", o.order);
  TORCH_CHECK(o.steps >= 0, "steps: expected >= 0, got ", o.steps);
  TORCH_CHECK(std::isfinite(o.lr) && o.lr > 0, "lr: expected a finite value > 0, got ", o.lr);
  TORCH_CHECK(o.hankel_rows >= 2, "hankel_rows: expected >= 2, got ", o.hankel_rows);
  TORCH_CHECK(o.max_radius > 0 && o.max_radius < 1, "max_radius: expected a value in (0, 1), got ", o.max_radius);
  TORCH_CHECK(kernels.dim() >= 1 && kernels.size(-1) >= 1 && !kernels.is_complex() &&
                  at::isFloatingType(kernels.scalar_type()),
              "kernels: expected real floating-point ... x n with n >= 1, got ", kernels.scalar_type(), " ",
              kernels.sizes());
  const int64_t n = kernels.size(-1), r = o.order;
  std::vector<int64_t> batch(kernels.sizes().begin(), kernels.sizes().end() - 1);
  at::NoGradGuard no_grad;
  const at::Tensor w = kernels.detach().to(at::kCPU, at::kDouble).reshape({-1, n}).contiguous();
  TORCH_CHECK(at::isfinite(w).all().item<bool>(), "kernels: not finite");
  const at::Tensor norm = w.norm(2, 1);

  // In chunks of kernels, so the n x 2r least-squares systems stay small.
  const int64_t M = w.size(0), chunk = std::max<int64_t>(1, (int64_t(1) << 22) / (n * 2 * r));
  std::vector<at::Tensor> lambdas, residues, errors;
  for (int64_t first = 0; first < M; first += chunk) {
    const auto [l, R, e] = fit_rows(w.narrow(0, first, std::min(chunk, M - first)), o);
    lambdas.push_back(l);
    residues.push_back(R);
    errors.push_back(e);
  }
  const at::Tensor lambda = M > 0 ? at::cat(lambdas) : at::zeros({0, r}, at::kComplexDouble);
  const at::Tensor residue = M > 0 ? at::cat(residues) : at::zeros({0, r}, at::kComplexDouble);
  const at::Tensor err = M > 0 ? at::cat(errors) : at::zeros({0}, at::kDouble);
  ModalFit fit;
  std::vector<int64_t> modal_shape = batch;
  modal_shape.push_back(r);
  fit.lambda = lambda.reshape(modal_shape);
  fit.residue = residue.reshape(modal_shape);
  fit.abs_error = err.reshape(batch);
  fit.error = at::where(norm > 0, err / norm.clamp_min(1e-300), at::zeros_like(err)).reshape(batch);
  return fit;
}

}  // namespace tmm::models
