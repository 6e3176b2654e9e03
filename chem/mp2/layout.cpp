// Who does what in a DF-MP2 run over the ranks (Mp2Layout, chem/mp2/dfmp2.hpp): auxiliary blocks, occupied blocks
// and the block pairs of each system, with their kinds and the ranks that compute them.
#include "chem/mp2/dfmp2.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "linalg/errors.hpp"
#include "chem/integrals/distribution.hpp"

namespace dfmp2::chem {

using linalg::Index;

double Mp2Layout::pair_cost(const OccupiedBlockPair& p) {
  return double(p.i1 - p.i0) * double(p.j1 - p.j0) * (p.diagonal() ? 0.5 : 1.0);
}

Mp2Layout make_layout(const ThreeIndexSource& source, Index aux_block, const std::vector<SpinSpace>& spaces,
                      Index occupied_block, int ranks, int rank) {
  Mp2Layout l;
  l.ranks = ranks;
  l.rank = rank;
  l.occupied_block = occupied_block;
  const Index naux = source.naux();
  // Auxiliary units (shells) to ranks by their middle, then each rank's run cut into blocks of at most aux_block.
  const auto runs = share_units(source.blocks(1), naux, ranks);
  l.col0.assign(static_cast<std::size_t>(ranks) + 1, naux);
  for (int r = ranks - 1; r >= 0; --r) {
    const auto& run = runs[static_cast<std::size_t>(r)];
    l.col0[static_cast<std::size_t>(r)] = run.empty() ? l.col0[static_cast<std::size_t>(r) + 1] : run.front().first;
  }
  for (int r = 0; r < ranks; ++r) {
    for (const auto& block : cut_blocks(runs[static_cast<std::size_t>(r)], aux_block)) {
      l.aux_blocks.push_back(block);
      l.aux_rank.push_back(r);
    }
  }
  // Occupied blocks of every space in turn, held in contiguous runs of about equal counts.
  for (std::size_t spin = 0; spin < spaces.size(); ++spin) {
    const Index nact = spaces[spin].nact;
    for (Index i0 = 0; i0 < nact; i0 += occupied_block) {
      l.occupied.emplace_back(i0, std::min(i0 + occupied_block, nact));
      l.occupied_spin.push_back(static_cast<int>(spin));
    }
  }
  const Index nbo = static_cast<Index>(l.occupied.size());
  for (Index b = 0; b < nbo; ++b) l.occupied_rank.push_back(static_cast<int>(b * Index(ranks) / nbo));
  // Pairs: every I >= J of one system over the blocks in order (within a space the pairs of occupied_block_pairs, in
  // its order). The systems' electrons do not meet: no pair across two.
  for (Index bi = 0; bi < nbo; ++bi) {
    for (Index bj = 0; bj <= bi; ++bj) {
      const auto& [i0, i1] = l.occupied[static_cast<std::size_t>(bi)];
      const auto& [j0, j1] = l.occupied[static_cast<std::size_t>(bj)];
      const int si = l.occupied_spin[static_cast<std::size_t>(bi)], sj = l.occupied_spin[static_cast<std::size_t>(bj)];
      const SpinSpace& space_i = spaces[static_cast<std::size_t>(si)];
      if (space_i.system != spaces[static_cast<std::size_t>(sj)].system) continue;
      const PairKind kind = si != sj ? PairKind::opposite_spin
                            : space_i.spin == SpaceSpin::both ? PairKind::closed_shell
                                                              : PairKind::same_spin;
      l.pairs.push_back({i0, i1, j0, j1, si, sj, kind});
      l.pair_blocks.emplace_back(bi, bj);
    }
  }
  // Who computes each pair (see the header): largest first, each to the less loaded of its holders, unless some
  // other rank (one that holds no block, say) is less loaded by more than the pair's cost; that rank then fetches both
  // blocks. So every rank computes pairs at any rank count, and a pair leaves its holders only where that balances.
  l.pair_rank.assign(l.pairs.size(), 0);
  std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
  std::vector<std::size_t> order(l.pairs.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return Mp2Layout::pair_cost(l.pairs[a]) > Mp2Layout::pair_cost(l.pairs[b]);
  });
  for (const std::size_t k : order) {
    const auto [bi, bj] = l.pair_blocks[k];
    const int ri = l.occupied_rank[static_cast<std::size_t>(bi)], rj = l.occupied_rank[static_cast<std::size_t>(bj)];
    const double li = load[static_cast<std::size_t>(ri)], lj = load[static_cast<std::size_t>(rj)];
    int r = li < lj || (li == lj && (bi + bj) % 2 == 1) ? ri : rj;
    const double cost = Mp2Layout::pair_cost(l.pairs[k]);
    const auto least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    if (load[static_cast<std::size_t>(least)] + cost < load[static_cast<std::size_t>(r)]) r = least;
    l.pair_rank[k] = r;
    load[static_cast<std::size_t>(r)] += cost;
  }
  const double mean = std::accumulate(load.begin(), load.end(), 0.0) / double(ranks);
  l.predicted_imbalance = mean > 0 ? *std::max_element(load.begin(), load.end()) / mean : 1.0;
  for (std::size_t k = 0; k < l.pairs.size(); ++k) {
    const auto [bi, bj] = l.pair_blocks[k];
    if (l.pair_rank[k] != l.occupied_rank[static_cast<std::size_t>(bi)] &&
        l.pair_rank[k] != l.occupied_rank[static_cast<std::size_t>(bj)])
      ++l.pairs_away;
  }
  return l;
}

std::vector<OccupiedBlockPair> occupied_block_pairs(Index nact, Index block) {
  std::vector<OccupiedBlockPair> pairs;
  for (Index i0 = 0; i0 < nact; i0 += block) {
    for (Index j0 = 0; j0 <= i0; j0 += block) {
      pairs.push_back({i0, std::min(i0 + block, nact), j0, std::min(j0 + block, nact)});
    }
  }
  return pairs;
}

}  // namespace dfmp2::chem
