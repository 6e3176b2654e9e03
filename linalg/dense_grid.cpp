// The layout arithmetic of linalg/dense_grid.hpp, in every build; the libraries' calls are in
// dense_grid_scalapack.cpp (built with MPI and ScaLAPACK).
#include "linalg/dense_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "linalg/errors.hpp"

namespace dfmp2::linalg {

const char* dense_library_name(DenseLibrary library) { return library == DenseLibrary::elpa ? "ELPA" : "ScaLAPACK"; }

DenseLibrary dense_library_for(DenseLibrary asked, Index n, int grid_rows, int grid_cols) {
  return asked == DenseLibrary::elpa && n < std::max(grid_rows, grid_cols) ? DenseLibrary::scalapack : asked;
}

std::string dense_library_fallback(DenseLibrary asked, Index n, int grid_rows, int grid_cols) {
  if (dense_library_for(asked, n, grid_rows, grid_cols) == asked) return {};
  return fmt::format("ScaLAPACK instead of ELPA: the {} x {} grid has ranks that hold no part of an order-{} matrix, "
                     "which ELPA refuses", grid_rows, grid_cols, n);
}

std::pair<int, int> grid_shape(int ranks) {
  int rows = static_cast<int>(std::sqrt(double(ranks)));
  while (rows > 1 && ranks % rows != 0) --rows;
  return {std::max(rows, 1), ranks / std::max(rows, 1)};
}

Index block_cyclic_count(Index n, Index block, int p, int procs) {
  // ScaLAPACK's NUMROC with the first block on process 0.
  const Index blocks = n / block, whole = blocks / procs, extra = blocks % procs;
  Index count = whole * block;
  if (p < extra) count += block;
  else if (p == extra) count += n % block;
  return count;
}

void DistributedMatrix::for_each_tile(const std::function<void(Index, Index, MatrixView)>& tile) {
  const Index nb = layout.block;
  for (Index j = 0; j < layout.local_cols; j += nb) {
    const Index nc = std::min(nb, layout.local_cols - j);
    for (Index i = 0; i < layout.local_rows; i += nb) {
      const Index nr = std::min(nb, layout.local_rows - i);
      tile(layout.global_row(i), layout.global_col(j), view(local).block(i, j, nr, nc));
    }
  }
}

void DistributedMatrix::copy_from(ConstMatrixView whole) {
  for_each_tile([&](Index r0, Index c0, MatrixView out) {
    for (Index c = 0; c < out.cols; ++c)
      for (Index r = 0; r < out.rows; ++r) out(r, c) = whole(r0 + r, c0 + c);
  });
}

bool order_on_grid(Index order, int ranks, Index min_order) {
  return !dense_libraries().empty() && ranks > 1 && order >= min_order;
}

#ifndef DFMP2_HAVE_SCALAPACK
std::unique_ptr<DenseGrid> make_dense_grid(Comm&, const DenseOptions&) {
  throw UnsupportedError("distributed factorisations need ScaLAPACK: this build has none (DFMP2_SCALAPACK=OFF or "
                         "built without MPI)");
}
std::string dense_libraries() { return ""; }
bool have_elpa() { return false; }
#endif

}  // namespace dfmp2::linalg
