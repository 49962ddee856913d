// CPU glue: validates, allocates, maps torch dtypes onto the kernels'
// storage types and runs the torch-free kernels on torch's thread pool.
#include <atomic>
#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "cpu/toeplitz_cpu.h"
#include "ops/checks.h"
#include "ops/cpu_algorithm.h"
#include "ops/glue.h"
#include "ops/kernel_args.h"

namespace tmm::detail {
namespace {

std::atomic<cpu::Algorithm> g_algorithm{cpu::Algorithm::kAuto};

const cpu::ParallelFor& torch_parallel_for() {
  static const cpu::ParallelFor pf = [](int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    at::parallel_for(0, n, 1, body);
  };
  return pf;
}

at::Tensor causal_toeplitz_cpu(const at::Tensor& x, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias) {
  const kernels::ToeplitzShape s = check_forward_args(x, weight, bias);
  if (s.K > cpu::kMaxTileTaps && s.B * s.L * s.C > 0)
    return forward_per_tap(x, weight, bias, s, causal_toeplitz_cpu);
  at::Tensor y = at::empty({s.B, s.L, s.C}, x.options());
  if (y.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "causal_toeplitz_cpu", [&] {
    const auto p = make_forward_params<scalar_t>(s, x, weight, bias, y);
    cpu::toeplitz_forward(p, torch_parallel_for(), g_algorithm.load());
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_cpu(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> mask) {
  const kernels::ToeplitzShape s = check_backward_args(grad_y, x, weight);
  // Not a structured binding: the dispatch lambda below uses gx and gw, and
  // clang < 16 rejects capturing structured bindings (a C++20 feature).
  at::Tensor gx, gw, gb;
  std::tie(gx, gw, gb) = empty_backward_outputs(x, s, mask);
  const bool empty = s.B * s.L * s.C == 0;
  if (empty) {
    if (mask[0]) gx.zero_();
    if (mask[1]) gw.zero_();
  } else if (s.K > cpu::kMaxTileTaps && (mask[0] || mask[1])) {
    backward_per_tap(grad_y, x, weight, s, mask[0] ? &gx : nullptr, mask[1] ? &gw : nullptr,
                     [](const at::Tensor& gy, const at::Tensor& xi, const at::Tensor& wi, bool want_gx, bool want_gw) {
                       auto grads = causal_toeplitz_backward_cpu(gy, xi, wi, {want_gx, want_gw, false});
                       return std::make_pair(std::get<0>(grads), std::get<1>(grads));
                     });
  } else if (mask[0] || mask[1]) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "causal_toeplitz_backward_cpu", [&] {
      const auto p = make_backward_params<scalar_t>(s, grad_y, x, weight, mask[0] ? &gx : nullptr,
                                                     mask[1] ? &gw : nullptr);
      cpu::toeplitz_backward(p, torch_parallel_for(), g_algorithm.load());
    });
  }
  if (mask[2]) fill_grad_bias(grad_y, s, gb);
  return {gx, gw, gb};
}

}  // namespace

void set_cpu_algorithm(cpu::Algorithm algo) { g_algorithm.store(algo); }
cpu::Algorithm cpu_algorithm() { return g_algorithm.load(); }

}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, CPU, m) {
  m.impl("causal_toeplitz", &tmm::detail::causal_toeplitz_cpu);
  m.impl("causal_toeplitz_backward", &tmm::detail::causal_toeplitz_backward_cpu);
}
