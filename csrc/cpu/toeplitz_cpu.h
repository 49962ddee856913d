// Torch-free CPU kernels of the causal-Toeplitz operator: the entry points
// the glue calls. The glue supplies a ParallelFor (at::parallel_for) so the
// kernels share torch's thread pool without depending on it. Work is split
// into items that do not depend on the thread count, and reductions run in
// item order, so results are bitwise independent of the number of threads.
//
// The hot kernels behind these entry points are compiled once per
// instruction set and run with the best one this CPU supports
// (cpu/capability.h).
#pragma once

#include <cstdint>
#include <functional>

#include "params/half_types.h"
#include "params/toeplitz_params.h"

namespace tmm::cpu {

using kernels::ToeplitzBackwardParams;
using kernels::ToeplitzForwardParams;
using kernels::ToeplitzShape;

// Runs body(begin, end) over sub-ranges covering [0, n), possibly in parallel.
using ParallelFor =
    std::function<void(int64_t n, const std::function<void(int64_t, int64_t)>& body)>;

enum class Algorithm { kAuto, kDirect, kFft };

// The tiles hold K-1 halo channels, so the tiled kernels take K <= kMaxTileTaps;
// wider kernels run as one 1-tap call per tap (cpu/toeplitz_per_tap.h).
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

}  // namespace tmm::cpu
