// Torch-free description of one causal-Toeplitz call, shared by the CPU and
// CUDA kernels. Pointers are raw (host or device), strides are in elements.
//
//   y[b,t,c] = sum_{i<K} sum_{s<=t} w[g,i,t-s] * x[b,s,c-(K-1)+i] + bias[g,t]
//   with Cg = C/G, g = c/Cg, and source channels below g*Cg counting as zero.
#pragma once

#include <cstdint>

namespace tmm::kernels {

struct ToeplitzShape {
  int64_t B = 0, L = 0, C = 0;  // x: B x L x C
  int64_t G = 1, K = 1, N = 0;  // weight: G x K x N
  int64_t group_channels() const { return C / G; }
  int64_t halo() const { return K - 1; }  // channels below c that feed c
};

// T is the storage type (float, double, bf16_t, f16_t on the CPU).
template <class T>
struct ToeplitzForwardParams {
  ToeplitzShape shape;
  const T* x = nullptr;       // B x L x C
  int64_t x_stride[3] = {};
  const T* weight = nullptr;  // G x K x N
  int64_t w_stride[3] = {};
  const T* bias = nullptr;    // G x N, or nullptr
  int64_t bias_stride[2] = {};
  T* y = nullptr;             // B x L x C, contiguous, written with =
};

template <class T>
struct ToeplitzBackwardParams {
  ToeplitzShape shape;
  const T* grad_y = nullptr;  // B x L x C
  int64_t gy_stride[3] = {};
  const T* x = nullptr;       // B x L x C
  int64_t x_stride[3] = {};
  const T* weight = nullptr;  // G x K x N
  int64_t w_stride[3] = {};
  T* grad_x = nullptr;        // B x L x C contiguous (=), or nullptr: not wanted
  T* grad_weight = nullptr;   // G x K x N contiguous (=), or nullptr: not wanted
};

}  // namespace tmm::kernels
