// Every schema of the tmm operators, and the C++ entry points (tmm/ops.h)
// that call them through the dispatcher, so that every backend and autograd
// are reached. The kernels: causal_toeplitz_{cpu,cuda,meta,autograd,autocast}.cpp;
// the mixers (CompositeImplicitAutograd: autograd, shapes and compiled graphs
// come from the ops they are made of): toeplitz_mixer.cpp, hyena.cpp,
// mamba2.cpp, attention.cpp.
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include "tmm/ops.h"

TORCH_LIBRARY(tmm, m) {
  const std::vector<at::Tag> pt2 = {at::Tag::pt2_compliant_tag};
  m.def("causal_toeplitz(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", pt2);
  m.def("causal_toeplitz_backward(Tensor grad_y, Tensor x, Tensor weight, bool[3] output_mask)"
        " -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias)", pt2);
  m.def("causal_matrix_mix(Tensor x, Tensor matrix, Tensor bias) -> Tensor", pt2);
  m.def("toeplitz_mixer(Tensor x, Tensor weight, Tensor? bias, Tensor? in_weight=None, Tensor? in_bias=None, "
        "Tensor? out_weight=None, Tensor? out_bias=None, Tensor? weight2=None, Tensor? bias2=None, "
        "bool masked=False, float dropout=0., bool train=False) -> Tensor", pt2);
  m.def("hyena_filter(Tensor[] mlp, Tensor freq, Tensor D, int length, int max_len, bool modulate) -> Tensor", pt2);
  m.def("hyena_operator(Tensor x, Tensor in_weight, Tensor in_bias, Tensor short_weight, Tensor short_bias, "
        "Tensor[] filter_mlp, Tensor filter_freq, Tensor filter_D, Tensor out_weight, Tensor out_bias, int max_len, "
        "bool modulate) -> Tensor", pt2);
  m.def("mamba2_ssd_chunked(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, int chunk_size) -> Tensor", pt2);
  m.def("mamba2_ssd_scan(Tensor x, Tensor dt_raw, Tensor dt_bias, Tensor A_log, Tensor B, Tensor C, Tensor D, "
        "int ngroups, int chunk_size) -> Tensor", pt2);
  m.def("mamba2_causal_depthwise_conv1d(Tensor x, Tensor weight, Tensor bias) -> Tensor", pt2);
  m.def("mamba2_gated_rms_norm(Tensor y, Tensor z, Tensor weight, int groups, float eps) -> Tensor", pt2);
  m.def("mamba2_mixer(Tensor u, Tensor in_weight, Tensor conv_weight, Tensor conv_bias, Tensor dt_bias, "
        "Tensor A_log, Tensor D, Tensor norm_weight, Tensor out_weight, int ngroups, int chunk_size, "
        "float norm_eps) -> Tensor", pt2);
  m.def("attention(Tensor x, Tensor wq, Tensor wk, Tensor wv, Tensor wo, int n_heads, int n_kv_heads, "
        "float rope_theta, int window=0, float dropout=0., bool train=False) -> Tensor", pt2);
}

namespace tmm::ops {
namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

using OptTensor = std::optional<at::Tensor>;

}  // namespace

at::Tensor causal_toeplitz(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&)>(
      "tmm::causal_toeplitz");
  return op.call(x, weight, bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_toeplitz_backward(const at::Tensor& grad_y,
                                                                        const at::Tensor& x,
                                                                        const at::Tensor& weight,
                                                                        std::array<bool, 3> output_mask) {
  static const auto op = handle<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, std::array<bool, 3>)>("tmm::causal_toeplitz_backward");
  return op.call(grad_y, x, weight, output_mask);
}

at::Tensor causal_matrix_mix(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
      "tmm::causal_matrix_mix");
  return op.call(x, matrix, bias);
}

at::Tensor toeplitz_mixer(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                          const OptTensor& in_weight, const OptTensor& in_bias, const OptTensor& out_weight,
                          const OptTensor& out_bias, const OptTensor& weight2, const OptTensor& bias2, bool masked,
                          double dropout, bool train) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&, const OptTensor&,
                                           const OptTensor&, const OptTensor&, const OptTensor&, const OptTensor&,
                                           const OptTensor&, bool, double, bool)>("tmm::toeplitz_mixer");
  return op.call(x, weight, bias, in_weight, in_bias, out_weight, out_bias, weight2, bias2, masked, dropout, train);
}

at::Tensor hyena_filter(at::TensorList mlp, const at::Tensor& freq, const at::Tensor& D, int64_t length,
                        int64_t max_len, bool modulate) {
  static const auto op = handle<at::Tensor(at::TensorList, const at::Tensor&, const at::Tensor&, int64_t, int64_t,
                                           bool)>("tmm::hyena_filter");
  return op.call(mlp, freq, D, length, max_len, modulate);
}

at::Tensor hyena_operator(const at::Tensor& x, const at::Tensor& in_weight, const at::Tensor& in_bias,
                          const at::Tensor& short_weight, const at::Tensor& short_bias, at::TensorList filter_mlp,
                          const at::Tensor& filter_freq, const at::Tensor& filter_D, const at::Tensor& out_weight,
                          const at::Tensor& out_bias, int64_t max_len, bool modulate) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, at::TensorList, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, const at::Tensor&, int64_t, bool)>(
      "tmm::hyena_operator");
  return op.call(x, in_weight, in_bias, short_weight, short_bias, filter_mlp, filter_freq, filter_D, out_weight,
                 out_bias, max_len, modulate);
}

at::Tensor mamba2_ssd_chunked(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
                              const at::Tensor& C, int64_t chunk_size) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, int64_t)>("tmm::mamba2_ssd_chunked");
  return op.call(x, dt, A, B, C, chunk_size);
}

at::Tensor mamba2_ssd_scan(const at::Tensor& x, const at::Tensor& dt_raw, const at::Tensor& dt_bias,
                           const at::Tensor& A_log, const at::Tensor& B, const at::Tensor& C, const at::Tensor& D,
                           int64_t ngroups, int64_t chunk_size) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, int64_t)>(
      "tmm::mamba2_ssd_scan");
  return op.call(x, dt_raw, dt_bias, A_log, B, C, D, ngroups, chunk_size);
}

at::Tensor mamba2_causal_depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
      "tmm::mamba2_causal_depthwise_conv1d");
  return op.call(x, weight, bias);
}

at::Tensor mamba2_gated_rms_norm(const at::Tensor& y, const at::Tensor& z, const at::Tensor& weight, int64_t groups,
                                 double eps) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, double)>(
      "tmm::mamba2_gated_rms_norm");
  return op.call(y, z, weight, groups, eps);
}

at::Tensor mamba2_mixer(const at::Tensor& u, const at::Tensor& in_weight, const at::Tensor& conv_weight,
                        const at::Tensor& conv_bias, const at::Tensor& dt_bias, const at::Tensor& A_log,
                        const at::Tensor& D, const at::Tensor& norm_weight, const at::Tensor& out_weight,
                        int64_t ngroups, int64_t chunk_size, double norm_eps) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, int64_t, int64_t, double)>("tmm::mamba2_mixer");
  return op.call(u, in_weight, conv_weight, conv_bias, dt_bias, A_log, D, norm_weight, out_weight, ngroups,
                 chunk_size, norm_eps);
}

at::Tensor attention(const at::Tensor& x, const at::Tensor& wq, const at::Tensor& wk, const at::Tensor& wv,
                     const at::Tensor& wo, int64_t n_heads, int64_t n_kv_heads, double rope_theta, int64_t window,
                     double dropout, bool train) {
  static const auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, int64_t, int64_t, double, int64_t, double, bool)>(
      "tmm::attention");
  return op.call(x, wq, wk, wv, wo, n_heads, n_kv_heads, rope_theta, window, dropout, train);
}

}  // namespace tmm::ops
