/* Tiled transposes: the block code of Exec::transpose (toeplitz_driver.cuh).
 *
 * A functor F describes a rows x cols matrix M whose element (a, b) it reads
 * with f.load(a, b), where consecutive b are consecutive source addresses,
 * and writes with f.store(a, b, v), where consecutive a are consecutive
 * destination addresses (v of type F::Value). One block of
 * kTransposeThreads threads moves a kTile x kTile tile of M through shared
 * memory:
 *
 *   pass 1   tile[a - a0][b - b0] = f.load(a, b)       (a warp reads along b)
 *   pass 2   f.store(a, b, tile[a - a0][b - b0])       (a warp writes along a)
 *
 * so both the reads and the writes of a warp touch consecutive addresses.
 * The tile has one padding column: pass 2 reads a column, whose elements
 * then fall in distinct banks (4-, 8- and 16-byte values alike).
 *
 * Written against a Block (threads(), sync(), each(f)) like fused_fft.cuh,
 * so that tests/cpp/cuda_host_check.cpp runs the same code on the host.
 */
#pragma once

#include <cstdint>

#include "common.cuh"

namespace tmm::cuda {

constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;
constexpr int kTransposeThreads = kTile * kTileRowsPerPass;  // 256: each thread moves 4 elements a pass

template <class V>
struct TransposeTile {
  V v[kTile][kTile + 1];
};

inline int64_t transpose_tiles(int64_t rows, int64_t cols) {
  return ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
}

// Moves tile `tile` (row-major over the tiles of M) from f.load to f.store.
template <class F, class Block>
TMM_HD void transpose_tile(Block& blk, const F& f, int64_t rows, int64_t cols, int64_t tile,
                           TransposeTile<typename F::Value>& sm) {
  const int64_t col_tiles = (cols + kTile - 1) / kTile;
  const int64_t ta = tile / col_tiles;
  const int64_t a0 = ta * kTile, b0 = (tile - ta * col_tiles) * kTile;
  blk.each([&](int tid, auto&) {
    const int lane = tid % kTile, row = tid / kTile;
    for (int q = row; q < kTile; q += kTileRowsPerPass) {
      const int64_t a = a0 + q, b = b0 + lane;
      if (a < rows && b < cols) sm.v[q][lane] = f.load(a, b);
    }
  });
  blk.sync();
  blk.each([&](int tid, auto&) {
    const int lane = tid % kTile, row = tid / kTile;
    for (int q = row; q < kTile; q += kTileRowsPerPass) {
      const int64_t a = a0 + lane, b = b0 + q;
      if (a < rows && b < cols) f.store(a, b, sm.v[lane][q]);
    }
  });
  blk.sync();  // the next tile of a grid-stride loop reuses sm
}

}  // namespace tmm::cuda
