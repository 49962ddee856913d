// Kernels wider than a tile's halo allows (K > kMaxTileTaps) run one tap at
// a time. Tap i of the K-tap op is a 1-tap op on x shifted right by
// shift = K-1-i channels inside each group (zero-filled where the source
// falls below the group's first channel):
//   y        = sum_i conv(w[:, i], shift_i(x)) + bias
//   grad_x   = sum_i unshift_i(corr(w[:, i], grad_y))
//   grad_w_i = the 1-tap grad_weight of (grad_y, shift_i(x))
// The 1-tap calls run in the compute type (float for float/bf16/fp16,
// double for double) and the taps accumulate there, rounded once at the end.
#pragma once

#include "cpu/toeplitz_cpu.h"

namespace tmm::cpu {

template <class T>
void toeplitz_forward_per_tap(const ToeplitzForwardParams<T>& p, const ParallelFor& pf, Algorithm algo);

template <class T>
void toeplitz_backward_per_tap(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf, Algorithm algo);

}  // namespace tmm::cpu
