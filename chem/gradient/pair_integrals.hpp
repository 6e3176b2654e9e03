#pragma once
// The amplitude pass's pair integrals (ka|ib) = (B_k B_i^T)_ab, row k's with each block of i (gradient_blocks.cpp).
//
// Kept (the plan's keep_pair_integrals), each pair's are computed once, by the row that comes to them first: on one
// rank, row k computes them for i >= k and keeps those with i > k for row i, which takes them transposed
// ((ia|kb) = (kb|ia)); a quarter of the pass's flops saved for na (na - 1) / 2 nv^2 doubles. With several ranks,
// rows k and i on different ranks go through their rows at the same time; row k asks i's rank how many rows of i's
// block it has finished (they are finished in order) and takes those rows' pair integrals with k from it, computing
// (and keeping) the rest. Whoever finished row i computed (ia|kb) itself, since row k was not finished yet; so every
// pair is computed once (twice only when both rows are on at the same moment), the work is shared evenly between the
// ranks, and no rank ever waits for another's rows: the lender answers at once with what there is.
#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "chem/gradient/gradient_detail.hpp"

namespace dfmp2::chem::gradient_detail {

// f(a, b) for every a, b < n, tile by tile (32 x 32): a loop that also reads element (b, a) of an n x n matrix
// then finds it in cache (reading it row by row took a new cache line for every element).
template <class F>
void for_tiles(Index n, const F& f) {
  constexpr Index kTile = 32;
  for (Index b0 = 0; b0 < n; b0 += kTile)
    for (Index a0 = 0; a0 < n; a0 += kTile)
      for (Index b = b0; b < std::min(b0 + kTile, n); ++b)
        for (Index a = a0; a < std::min(a0 + kTile, n); ++a) f(a, b);
}

// The doubles the rank keeping the most keeps: nv^2 for each of its rows k and every row i it may compute them for
// (later rows of its own, every row of the others), with blocks of `block` orbitals (active_blocks) dealt to
// `ranks` as held_blocks does.
double kept_pair_doubles(Index na, Index nv, Index block, int ranks);

class PairIntegrals {
 public:
  // keep false: every row computes (ka|ib) for every i, and nothing is kept or lent.
  PairIntegrals(bool keep, const std::vector<std::pair<Index, Index>>& blocks, const Ranks& ranks, Index nv);

  // Whether row k asks the rank of block I for pair integrals (kept, I on another rank). The lender's requests
  // (negative ids: its blocks of B are 0, 1, ...): how many rows of block I its rank has finished (one Index), then
  // the pair integrals of the first `rows` of them with row k.
  bool asks(Index I) const;
  long long rows_finished_request(Index I) const { return -1 - I; }
  long long pairs_request(Index k, Index I) const;
  std::size_t pairs_bytes(Index rows) const { return sizeof(double) * std::size_t(rows * nv_ * nv_); }

  // (ka|ib) of row k (this rank's) with block I (B_k's and B_I's rows) into `tile` at a + nv (i nv + b); of another
  // rank's block, its first `from_rank_rows` rows' as that rank sent them (`from_rank`).
  void tile(Index k, Index I, linalg::ConstMatrixView b_k, linalg::ConstMatrixView b_I, const double* from_rank,
            Index from_rank_rows, double* tile, Kernels& kernels);
  // Row k (this rank's) is finished: its kept pair integrals may go to the other ranks.
  void finished(Index k);

  // For the block lender: a request's answer (into `buffer`).
  const void* lend(long long id, std::size_t bytes, std::vector<std::byte>& buffer);

 private:
  // Where row k's (this rank's) pair integrals with row i are kept: every other rank's row, then its own after k.
  double* kept(Index k, Index i);
  Index block_of(Index row) const;
  Index first_row(Index I) const { return blocks_[std::size_t(I)].first; }
  Index rows(Index I) const { return blocks_[std::size_t(I)].second - blocks_[std::size_t(I)].first; }

  bool keep_;
  const std::vector<std::pair<Index, Index>>& blocks_;
  const Ranks& ranks_;
  Index na_, nv_;
  std::vector<Index> position_;     // row i's place among this rank's rows, or among the others'
  Index others_ = 0;                // the other ranks' rows
  std::vector<std::size_t> first_;  // where row k's kept pair integrals start in kept_ (this rank's rows only)
  std::vector<double> kept_;
  std::unique_ptr<std::atomic<Index>[]> rows_finished_;  // of each block this rank holds, in order
};

}  // namespace dfmp2::chem::gradient_detail
