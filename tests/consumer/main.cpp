// Smoke test of the installed library: run the op forward and backward from
// C++ and check it against a dense masked-matrix computation.
#include <cstdio>

#include <ATen/ATen.h>
#include <tmm/tmm.h>

int main() {
  const int64_t B = 2, L = 37, C = 8;
  at::Tensor x = at::randn({B, L, C}, at::kDouble).requires_grad_();
  at::Tensor w = at::randn({1, 1, L}, at::kDouble).requires_grad_();
  at::Tensor y = tmm::ops::causal_toeplitz(x, w);

  // Dense reference: T[t, s] = w[t - s] for t >= s.
  at::Tensor lag = at::arange(L).unsqueeze(1) - at::arange(L).unsqueeze(0);
  at::Tensor T = w.detach().flatten().index({lag.clamp_min(0)}) * (lag >= 0);
  at::Tensor expected = at::matmul(T, x.detach());
  const double err = (y.detach() - expected).abs().max().item<double>();

  y.sum().backward();
  const bool grads = x.grad().defined() && w.grad().defined();
  std::printf("tmm %s (torch %s): max error %.3g, gradients %s\n", TMM_VERSION, TMM_TORCH_VERSION, err,
              grads ? "ok" : "missing");
  return err < 1e-10 && grads ? 0 : 1;
}
