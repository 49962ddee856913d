// CPU glue: validates, allocates, maps torch dtypes onto the kernels'
// storage types and runs the torch-free kernels on torch's thread pool, on
// the path that tmm::ops::path() asks for (<tmm/ops/path.h>).
#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "cpu/toeplitz_cpu.h"
#include "ops/backward_outputs.h"
#include "ops/checks.h"
#include "ops/params_from_tensors.h"
#include "ops/run_kernels.h"
#include "tmm/ops/path.h"

namespace tmm::detail {
namespace {

const cpu::ParallelFor& torch_parallel_for() {
  static const cpu::ParallelFor pf = [](int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    at::parallel_for(0, n, 1, body);
  };
  return pf;
}

// The CPU's reading of the path: direct and fft are its own; the CUDA paths
// do not apply here and run auto's choice.
cpu::Algorithm cpu_algorithm() {
  switch (ops::path()) {
    case ops::Path::kDirect: return cpu::Algorithm::kDirect;
    case ops::Path::kFft: return cpu::Algorithm::kFft;
    default: return cpu::Algorithm::kAuto;
  }
}

at::Tensor causal_toeplitz_cpu(const at::Tensor& x, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias) {
  const kernels::ToeplitzShape s = check_forward_args(x, weight, bias);
  at::Tensor y = at::empty({s.B, s.L, s.C}, x.options());
  if (y.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "causal_toeplitz_cpu", [&] {
    const auto p = make_forward_params<scalar_t>(s, x, weight, bias, y);
    run_kernels("causal_toeplitz: ", [&] { cpu::toeplitz_forward(p, torch_parallel_for(), cpu_algorithm()); });
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
  } else if (mask[0] || mask[1]) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "causal_toeplitz_backward_cpu", [&] {
      const auto p = make_backward_params<scalar_t>(s, grad_y, x, weight, mask[0] ? &gx : nullptr,
                                                     mask[1] ? &gw : nullptr);
      run_kernels("causal_toeplitz: ", [&] { cpu::toeplitz_backward(p, torch_parallel_for(), cpu_algorithm()); });
    });
  }
  if (mask[2]) fill_grad_bias(grad_y, s, gb);
  return {gx, gw, gb};
}

}  // namespace
}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, CPU, m) {
  m.impl("causal_toeplitz", &tmm::detail::causal_toeplitz_cpu);
  m.impl("causal_toeplitz_backward", &tmm::detail::causal_toeplitz_backward_cpu);
}
