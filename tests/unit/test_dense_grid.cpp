// The block-cyclic layout arithmetic of linalg/dense_grid.hpp (the libraries' own calls are checked under mpirun:
// mpi.dense_grid_N and the mpi tier's grid cases).
#include <gtest/gtest.h>

#include <set>

#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::linalg::BlockCyclicLayout;
using dfmp2::linalg::Index;

TEST(DenseGrid, BlockCyclicCountsCoverTheDimensionOnce) {
  // ScaLAPACK's NUMROC: whole blocks dealt in turn, the last partial block to the next process.
  EXPECT_EQ(dfmp2::linalg::block_cyclic_count(10, 4, 0, 2), 6);  // blocks 0 (4) and 2 (2)
  EXPECT_EQ(dfmp2::linalg::block_cyclic_count(10, 4, 1, 2), 4);
  EXPECT_EQ(dfmp2::linalg::block_cyclic_count(48, 64, 0, 3), 48);
  EXPECT_EQ(dfmp2::linalg::block_cyclic_count(48, 64, 2, 3), 0);
  for (const Index n : {1, 47, 64, 65, 1000})
    for (const Index nb : {1, 16, 64})
      for (int procs = 1; procs <= 8; ++procs) {
        Index total = 0;
        for (int p = 0; p < procs; ++p) total += dfmp2::linalg::block_cyclic_count(n, nb, p, procs);
        EXPECT_EQ(total, n) << n << " " << nb << " " << procs;
      }
}

TEST(DenseGrid, GridShapeIsTheMostSquareFactorisation) {
  using P = std::pair<int, int>;
  EXPECT_EQ(dfmp2::linalg::grid_shape(1), P(1, 1));
  EXPECT_EQ(dfmp2::linalg::grid_shape(4), P(2, 2));
  EXPECT_EQ(dfmp2::linalg::grid_shape(6), P(2, 3));
  EXPECT_EQ(dfmp2::linalg::grid_shape(7), P(1, 7));
  EXPECT_EQ(dfmp2::linalg::grid_shape(12), P(3, 4));
  EXPECT_EQ(dfmp2::linalg::grid_shape(1000), P(25, 40));
}

TEST(DenseGrid, LocalAndGlobalIndicesAreInverse) {
  // Every global row is held by exactly one process row, at the local index that maps back to it.
  const Index n = 203, nb = 16;
  for (int rows = 1; rows <= 4; ++rows) {
    std::set<Index> seen;
    for (int me = 0; me < rows; ++me) {
      BlockCyclicLayout l{n, nb, rows, 1, me, 0, dfmp2::linalg::block_cyclic_count(n, nb, me, rows), n};
      for (Index i = 0; i < l.local_rows; ++i) {
        const Index g = l.global_row(i);
        EXPECT_TRUE(l.holds_row(g));
        EXPECT_EQ(l.local_row(g), i);
        EXPECT_TRUE(seen.insert(g).second);
      }
    }
    EXPECT_EQ(static_cast<Index>(seen.size()), n);
  }
}

TEST(DenseGrid, OneRankHasNoGrid) {
  dfmp2::linalg::SerialComm alone;
  EXPECT_THROW(alone.dense_grid(dfmp2::linalg::DenseOptions{}), dfmp2::UnsupportedError);
}

}  // namespace
