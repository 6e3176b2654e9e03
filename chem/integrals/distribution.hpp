#pragma once
// How a range of functions is shared among ranks (README "MPI"): the same rules for the DF-SCF's and DF-MP2's
// auxiliary blocks, so that a rank's share is always a contiguous run of whole units (shells).
#include <algorithm>
#include <utility>
#include <vector>

#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

using IndexRange = std::pair<linalg::Index, linalg::Index>;  // [begin, end)

// Splits `units` (consecutive ranges covering [0, total)) into `ranks` contiguous runs, each unit going to the rank
// whose even share holds its middle: a run is at most one unit longer than total / ranks.
inline std::vector<std::vector<IndexRange>> share_units(const std::vector<IndexRange>& units, linalg::Index total,
                                                        int ranks) {
  std::vector<std::vector<IndexRange>> runs(static_cast<std::size_t>(std::max(ranks, 1)));
  for (const auto& [p0, p1] : units) {
    const auto r = std::min<linalg::Index>(ranks - 1, (p0 + p1) * linalg::Index(ranks) / std::max<linalg::Index>(2 * total, 1));
    runs[static_cast<std::size_t>(r)].emplace_back(p0, p1);
  }
  return runs;
}

// Cuts a run of consecutive units into blocks of at most `max_size` (a unit larger than that is a block alone).
inline std::vector<IndexRange> cut_blocks(const std::vector<IndexRange>& run, linalg::Index max_size) {
  std::vector<IndexRange> blocks;
  linalg::Index start = -1, end = -1;
  for (const auto& [p0, p1] : run) {
    if (start >= 0 && p1 - start > max_size) {
      blocks.emplace_back(start, end);
      start = -1;
    }
    if (start < 0) start = p0;
    end = p1;
  }
  if (start >= 0) blocks.emplace_back(start, end);
  return blocks;
}

// The first of `n` items that rank r of `ranks` gets in an even split (r = ranks gives n).
inline linalg::Index even_start(linalg::Index n, int ranks, int r) { return n * linalg::Index(r) / linalg::Index(ranks); }

}  // namespace dfmp2::chem
