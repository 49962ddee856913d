// Torch-free CPU kernels of the causal-Toeplitz operator. The glue supplies
// a ParallelFor (at::parallel_for) so the kernels share torch's thread pool
// without depending on it. Work is split into items that do not depend on
// the thread count, and reductions run in item order, so results are
// bitwise independent of the number of threads.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/half_types.h"
#include "kernels/toeplitz_params.h"

namespace tmm::cpu {

using kernels::ToeplitzBackwardParams;
using kernels::ToeplitzForwardParams;
using kernels::ToeplitzShape;

// Runs body(begin, end) over sub-ranges covering [0, n), possibly in parallel.
using ParallelFor =
    std::function<void(int64_t n, const std::function<void(int64_t, int64_t)>& body)>;

enum class Algorithm { kAuto, kDirect, kFft };

// The tiles hold K-1 halo channels, so the kernels take K <= kMaxTileTaps;
// the glue splits wider kernels into one call per tap.
constexpr int64_t kMaxTileTaps = 16;

// The algorithm kAuto picks: direct while L * K <= direct_crossover_length().
Algorithm resolve_algorithm(Algorithm requested, const ToeplitzShape& shape);
int64_t direct_crossover_length();

// y = causal_toeplitz(x, weight) + bias.
template <class T>
void toeplitz_forward(const ToeplitzForwardParams<T>& p, const ParallelFor& pf, Algorithm algo);

// grad_x and grad_weight (each only where its pointer is set).
template <class T>
void toeplitz_backward(const ToeplitzBackwardParams<T>& p, const ParallelFor& pf, Algorithm algo);

// The two implementations behind toeplitz_forward / toeplitz_backward.
template <class T> void toeplitz_forward_direct(const ToeplitzForwardParams<T>&, const ParallelFor&);
template <class T> void toeplitz_backward_direct(const ToeplitzBackwardParams<T>&, const ParallelFor&);
template <class T> void toeplitz_forward_fft(const ToeplitzForwardParams<T>&, const ParallelFor&);
template <class T> void toeplitz_backward_fft(const ToeplitzBackwardParams<T>&, const ParallelFor&);

}  // namespace tmm::cpu
