// Voxel tiles for the tensor-core window kernel (cuda_tensor_core_window.cu): 16 voxels whose
// sample indices for any one receiver lie within a few samples, so that one window of 8 samples
// covers both interpolation taps of every voxel in the tile.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "das/executor.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::das::detail {

namespace {

// Spreads the low 21 bits of v to every third bit (3-D Morton keys of 63 bits).
std::uint64_t spread3(std::uint64_t v) {
  v &= 0x1fffff;
  v = (v | (v << 32)) & 0x1f00000000ffffull;
  v = (v | (v << 16)) & 0x1f0000ff0000ffull;
  v = (v | (v << 8)) & 0x100f00f00f00f00full;
  v = (v | (v << 4)) & 0x10c30c30c30c30c3ull;
  v = (v | (v << 2)) & 0x1249249249249249ull;
  return v;
}

// Cuts an order into tiles without holes except at the end.
std::vector<std::int32_t> cut(std::vector<std::int32_t> order, int tile) {
  const std::size_t n = (order.size() + tile - 1) / tile * tile;
  order.resize(n, -1);
  return order;
}

}  // namespace

std::vector<std::int32_t> tile_order(const std::vector<Vec3>& voxels, int tile) {
  if (tile < 1 || (tile & (tile - 1)) != 0)
    fail(ErrorCategory::invalid_argument, "tile size {} is not a power of two", tile);
  const std::size_t nv = voxels.size();
  // Lattice coordinates: the rank of each coordinate among the distinct values of its axis.
  std::array<std::vector<double>, 3> values;
  std::array<double, 3> step{};
  for (int a = 0; a < 3; ++a) {
    auto& v = values[a];
    v.resize(nv);
    for (std::size_t i = 0; i < nv; ++i)
      v[i] = voxels[i][a];
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    step[a] = v.size() > 1 ? (v.back() - v.front()) / static_cast<double>(v.size() - 1) : 0.0;
  }
  const double cells = static_cast<double>(values[0].size()) *
                       static_cast<double>(values[1].size()) *
                       static_cast<double>(values[2].size());
  // Not a grid (scattered voxels): the lattice would be mostly empty.
  if (cells > 2.0 * static_cast<double>(nv) || values[0].size() > (1u << 21) ||
      values[1].size() > (1u << 21) || values[2].size() > (1u << 21))
    return cut(locality_order(voxels), tile);

  // Tile shape (powers of two, product `tile`) of least extent in path length, depth weighted
  // twice (a step in z changes the transmit and the receive path); no wider than the grid.
  int lg = 0;
  while ((1 << lg) < tile)
    ++lg;
  std::array<int, 3> best{tile, 1, 1};
  double best_cost = INFINITY;
  const std::array<double, 3> weight{1.0, 1.0, 2.0};
  for (int ex = 0; ex <= lg; ++ex)
    for (int ey = 0; ey <= lg - ex; ++ey) {
      const std::array<int, 3> d{1 << ex, 1 << ey, 1 << (lg - ex - ey)};
      double cost = 0;
      bool fits = true;
      for (int a = 0; a < 3; ++a) {
        // A dimension larger than the axis (rounded up to a power of two) only makes holes.
        std::size_t span = 1;
        while (span < values[a].size())
          span *= 2;
        if (static_cast<std::size_t>(d[a]) > span) fits = false;
        cost += (d[a] - 1) * step[a] * weight[a];
      }
      if (fits && cost < best_cost) {
        best_cost = cost;
        best = d;
      }
    }

  // Key of each voxel: Morton order of its tile's lattice coordinates.
  std::vector<std::uint64_t> key(nv);
  for (std::size_t i = 0; i < nv; ++i) {
    std::uint64_t k = 0;
    for (int a = 0; a < 3; ++a) {
      const auto r = static_cast<std::uint64_t>(
          std::lower_bound(values[a].begin(), values[a].end(), voxels[i][a]) - values[a].begin());
      k |= spread3(r / static_cast<std::uint64_t>(best[a])) << a;
    }
    key[i] = k;
  }
  std::vector<std::int32_t> order(nv);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return key[a] < key[b]; });
  // One tile per key (more if a key holds more than `tile` voxels: repeated coordinates).
  std::vector<std::int32_t> slots;
  slots.reserve(nv + nv / 2);
  for (std::size_t i = 0; i < nv;) {
    std::size_t j = i;
    while (j < nv && key[order[j]] == key[order[i]])
      ++j;
    for (std::size_t s = i; s < j; s += tile) {
      const std::size_t e = std::min(j, s + tile);
      slots.insert(slots.end(), order.begin() + s, order.begin() + e);
      slots.resize(slots.size() + (tile - (e - s)), -1);
    }
    i = j;
  }
  return slots;
}

}  // namespace warpbeam::das::detail
