// Autocast kernels (torch.autocast on CPU and CUDA): the op is a "lower
// precision fp" op, as ATen's conv and matmul are. Under autocast its
// floating-point inputs on the autocast device (float32, bfloat16, float16;
// float64 is left alone, as ATen leaves it) are cast to the autocast dtype,
// then the op runs below autocast: one dtype in, the kernels accumulate in
// float32 as always, the result is in the autocast dtype. Autograd records
// the casts, so the gradients of float32 parameters come back in float32.
// The backward op is registered too, so that a backward run inside an
// autocast region (or a direct call) sees one dtype as well.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "tmm/ops.h"

namespace tmm::detail {
namespace {

template <c10::DispatchKey kKey, c10::DeviceType kDevice>
at::Tensor causal_toeplitz_autocast(const at::Tensor& x, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kKey);
  const at::ScalarType to = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  return ops::causal_toeplitz(at::autocast::cached_cast(to, x, kDevice),
                              at::autocast::cached_cast(to, weight, kDevice),
                              at::autocast::cached_cast(to, bias, kDevice));
}

template <c10::DispatchKey kKey, c10::DeviceType kDevice>
std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward_autocast(
    const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight, std::array<bool, 3> mask) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kKey);
  const at::ScalarType to = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  return ops::causal_toeplitz_backward(at::autocast::cached_cast(to, grad_y, kDevice),
                                       at::autocast::cached_cast(to, x, kDevice),
                                       at::autocast::cached_cast(to, weight, kDevice), mask);
}

}  // namespace
}  // namespace tmm::detail

TORCH_LIBRARY_IMPL(tmm, AutocastCPU, m) {
  using c10::DeviceType;
  using c10::DispatchKey;
  m.impl("causal_toeplitz",
         TORCH_FN((tmm::detail::causal_toeplitz_autocast<DispatchKey::AutocastCPU, DeviceType::CPU>)));
  m.impl("causal_toeplitz_backward",
         TORCH_FN((tmm::detail::causal_toeplitz_backward_autocast<DispatchKey::AutocastCPU, DeviceType::CPU>)));
}

TORCH_LIBRARY_IMPL(tmm, AutocastCUDA, m) {
  using c10::DeviceType;
  using c10::DispatchKey;
  m.impl("causal_toeplitz",
         TORCH_FN((tmm::detail::causal_toeplitz_autocast<DispatchKey::AutocastCUDA, DeviceType::CUDA>)));
  m.impl("causal_toeplitz_backward",
         TORCH_FN((tmm::detail::causal_toeplitz_backward_autocast<DispatchKey::AutocastCUDA, DeviceType::CUDA>)));
}
