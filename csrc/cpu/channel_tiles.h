// How the CPU kernels cut the channel axis into tiles, shared by the direct
// and the FFT path.
//
// A tile is `width` adjacent channels starting at first(t) = t*step - halo,
// with halo = K-1 and step = width - halo. Column m of tile t is channel
// first(t) + m. The tile owns:
//   - the outputs y / the grad_weight terms of columns [halo, width),
//     which read x in columns [0, width);
//   - grad_x of columns [0, step), which reads grad_y in columns [0, width).
// Both families partition the channels, so every output is written once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/isa_variant.h"
#include "params/half_types.h"
#include "params/toeplitz_params.h"

namespace tmm::cpu::TMM_CPU_CAPABILITY {

struct ChannelTiles {
  int64_t width, halo, step, count;

  ChannelTiles(const kernels::ToeplitzShape& s, int64_t width_)
      : width(width_), halo(s.halo()), step(width_ - s.halo()),
        count((s.C + s.halo() + step - 1) / step) {}

  int64_t first(int64_t t) const { return t * step - halo; }
};

// Per-column facts of one tile.
struct TileColumns {
  std::vector<int64_t> group;     // group of the column's channel (-1: no channel)
  std::vector<int64_t> first_tap; // taps i >= first_tap feed this output from its own group
  int64_t group_lo = 0, group_hi = -1;  // groups of the owned outputs

  TileColumns(const kernels::ToeplitzShape& s, const ChannelTiles& tiles, int64_t t)
      : group(tiles.width, -1), first_tap(tiles.width, s.K) {
    const int64_t cg = s.group_channels();
    for (int64_t m = 0; m < tiles.width; ++m) {
      const int64_t c = tiles.first(t) + m;
      if (c < 0 || c >= s.C) continue;
      group[m] = c / cg;
      // Source channel c - halo + i must be >= the group's first channel.
      first_tap[m] = std::max<int64_t>(0, group[m] * cg - (c - s.halo()));
    }
    for (int64_t m = tiles.halo; m < tiles.width; ++m) {
      if (group[m] < 0) continue;
      if (group_hi < 0) group_lo = group[m];
      group_hi = group[m];
    }
  }
  int64_t owned_groups() const { return group_hi - group_lo + 1; }
  // True when every owned output is in one group and uses one tap (K == 1).
  bool uniform(int64_t K) const { return K == 1 && group_lo == group_hi; }
};

// dst[t*ld + m] = src[b, t, c0 + m] for t < L and m < width, zero where the
// channel is outside [0, C). src is B x L x C with element strides `stride`.
template <class T, class R>
void load_columns(const T* src, const int64_t* stride, int64_t b, int64_t L, int64_t C,
                  int64_t c0, int64_t width, R* dst, int64_t ld) {
  const int64_t lo = std::max<int64_t>(0, -c0), hi = std::min(width, C - c0);
  for (int64_t t = 0; t < L; ++t) {
    R* __restrict row = dst + t * ld;
    const T* in = src + b * stride[0] + t * stride[1] + c0 * stride[2];
    for (int64_t m = 0; m < std::min(lo, width); ++m) row[m] = R(0);
    if (stride[2] == 1) {
      #pragma GCC ivdep
      for (int64_t m = lo; m < hi; ++m) row[m] = R(kernels::to_float(in[m]));
    } else {
      #pragma GCC ivdep
      for (int64_t m = lo; m < hi; ++m) row[m] = R(kernels::to_float(in[m * stride[2]]));
    }
    for (int64_t m = std::max(lo, hi); m < width; ++m) row[m] = R(0);
  }
}

// Rounds a compute value to the storage type.
template <class T, class R>
inline T store_as(R v) { return kernels::from_float<T>(v); }

}  // namespace tmm::cpu::TMM_CPU_CAPABILITY
