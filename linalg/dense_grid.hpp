#pragma once
// Dense factorisations distributed over the ranks (README "MPI": distributed factorisations).
//
// The metric's Cholesky factor, its triangular solves and the SCF's eigenproblem are the parts of DF-SCF and DF-MP2
// whose matrices grow as naux^2 or nbf^2 on every rank when they are replicated. Over several ranks they run here
// on the block-cyclic layout of ScaLAPACK (Debian's libscalapack-openmpi) and ELPA (libelpa), the distributed dense
// libraries of computing centres: each rank holds its share of the matrix, naux^2 / ranks, and the libraries move the
// panels. Nothing here is a home-made factorisation; this file only lays the matrices out and calls them.
//
//   cholesky     J = L L^T of a symmetric positive definite matrix (ScaLAPACK pdpotrf or ELPA's)
//   solve_rows   X L^T = B for each rank's own rows of B (any count, also none): the fitting B = A L^-T, where
//                every rank holds whole rows (occupied blocks, or packed pairs) with all auxiliary columns
//   eigh         eigenvalues and eigenvectors of a symmetric matrix (ScaLAPACK pdsyevd or ELPA's two-stage solver)
//   multiply     C = op(A) op(B) (ScaLAPACK pdgemm) and C = A^T + C (pdtran), for the SCF's orthogonal
//                transformations and its orbital gradient
//
// One rank never comes here (its replicated path is the same maths with the backend's kernels), and neither does a
// build without MPI or without ScaLAPACK (make_dense_grid says so).
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linalg/comm.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::linalg {

// Which library serves each factorisation (README "MPI"; measured in bench/README.md "Distributed factorisations").
enum class DenseLibrary { scalapack, elpa };
const char* dense_library_name(DenseLibrary library);

// The library that serves an n x n Cholesky factor or eigenproblem on a grid_rows x grid_cols grid when `asked` is
// asked for: ELPA refuses a rank that holds no part of the matrix (ScaLAPACK does not), and a matrix of fewer rows than
// the grid's longer side leaves some rank without any, so ScaLAPACK serves it instead (the report names the library
// that ran, and why).
DenseLibrary dense_library_for(DenseLibrary asked, Index n, int grid_rows, int grid_cols);
// Why `dense_library_for` did not give `asked` ("" when it did).
std::string dense_library_fallback(DenseLibrary asked, Index n, int grid_rows, int grid_cols);

struct DenseOptions {
  DenseLibrary cholesky = DenseLibrary::scalapack;
  DenseLibrary eigh = DenseLibrary::elpa;
  Index block = 64;  // the block-cyclic block (ScaLAPACK's NB, ELPA's nblk)
};

// Where a rank's part of an n x n block-cyclic matrix lies: a grid of grid_rows x grid_cols ranks, square blocks
// of `block`, block (I, J) on rank (I mod grid_rows, J mod grid_cols); the local part is column-major.
struct BlockCyclicLayout {
  Index n = 0, block = 64;
  int grid_rows = 1, grid_cols = 1, my_row = 0, my_col = 0;
  Index local_rows = 0, local_cols = 0;
  Index global_row(Index i) const { return ((i / block) * grid_rows + my_row) * block + i % block; }
  Index global_col(Index j) const { return ((j / block) * grid_cols + my_col) * block + j % block; }
  // Global row or column g: whether this rank holds it, and where (valid only when it does).
  bool holds_row(Index g) const { return (g / block) % grid_rows == my_row; }
  bool holds_col(Index g) const { return (g / block) % grid_cols == my_col; }
  Index local_row(Index g) const { return (g / block / grid_rows) * block + g % block; }
  Index local_col(Index g) const { return (g / block / grid_cols) * block + g % block; }
};
// The most square grid rows x cols = ranks with rows <= cols (ScaLAPACK and ELPA both prefer it).
std::pair<int, int> grid_shape(int ranks);
// The rows or columns of an n-long dimension in blocks of `block` that process `p` of `procs` holds.
Index block_cyclic_count(Index n, Index block, int p, int procs);

// A symmetric matrix or a factor, distributed; move-only (it owns a grid context's descriptor).
struct DistributedMatrix {
  BlockCyclicLayout layout;
  Matrix local;          // local_rows x local_cols
  int descriptor[9] = {};
  bool upper = false;    // a triangular factor held as its upper triangle (U = L^T), as ELPA's Cholesky leaves it
  // Calls `tile(row0, col0, out)` for each local tile of the global matrix, `out` the local view of
  // the rows [row0, row0 + out.rows) and columns [col0, col0 + out.cols).
  void for_each_tile(const std::function<void(Index row0, Index col0, MatrixView out)>& tile);
  // This rank's part of a matrix every rank holds whole.
  void copy_from(ConstMatrixView whole);
};

class DenseGrid {
 public:
  virtual ~DenseGrid() = default;
  virtual int grid_rows() const = 0;
  virtual int grid_cols() const = 0;
  virtual const DenseOptions& options() const = 0;
  // The libraries that serve an n x n problem on this grid (dense_library_for).
  DenseLibrary cholesky_library(Index n) const {
    return dense_library_for(options().cholesky, n, grid_rows(), grid_cols());
  }
  DenseLibrary eigh_library(Index n) const { return dense_library_for(options().eigh, n, grid_rows(), grid_cols()); }
  // An n x n matrix on the grid, its local part zero: blocks small enough that every rank holds part of it when n is
  // at least the grid's longer side.
  virtual DistributedMatrix matrix(Index n) const = 0;
  // J = L L^T in place; throws NumericalError naming `what` when J is not positive definite.
  virtual void cholesky(DistributedMatrix& j, const std::string& what) = 0;
  // The factor laid out for solve_rows, on a ranks x 1 grid: each rank's rows of B are then its own rows of a
  // block-cyclic matrix with every column local, so pdtrsm moves panels of the factor and B never leaves its rank.
  virtual DistributedMatrix for_row_solves(const DistributedMatrix& factor) = 0;
  // Collective: X L^T = B for this rank's rows B (in place; B.rows may differ between ranks, and be 0); with
  // `transposed`, X L = B. Both together solve with J^-1 = L^-T L^-1.
  virtual void solve_rows(const DistributedMatrix& factor, MatrixView b, bool transposed = false) = 0;
  // Eigenvalues (ascending, every rank) and eigenvectors of the symmetric `a` (destroyed).
  virtual void eigh(DistributedMatrix& a, Vector& eigenvalues, DistributedMatrix& vectors) = 0;
  // C = alpha op(A) op(B) + beta C, all on the grid.
  virtual void multiply(bool transpose_a, bool transpose_b, double alpha, const DistributedMatrix& a,
                        const DistributedMatrix& b, double beta, DistributedMatrix& c) = 0;
  // C = alpha A^T + beta C.
  virtual void add_transpose(double alpha, const DistributedMatrix& a, double beta, DistributedMatrix& c) = 0;
  // The whole matrix on every rank (the SCF's orbitals).
  virtual void gather(const DistributedMatrix& a, MatrixView whole) = 0;
};

// The grid over `comm`'s ranks (as square as their count allows). Throws UnsupportedError when the build has no
// ScaLAPACK (or no ELPA and `options` asks for it).
std::unique_ptr<DenseGrid> make_dense_grid(Comm& comm, const DenseOptions& options);
// "ScaLAPACK 2.2.1, ELPA 2022.11.001", "ScaLAPACK 2.2.1 (no ELPA)", or "" when the build has neither.
std::string dense_libraries();
bool have_elpa();
// The one rule for every dense matrix (JK and MP2 metrics, SCF eigenproblems): it is distributed over the ranks'
// grid when the build has ScaLAPACK, there is more than one rank, and its order is at least `min_order`
// (mpi.distributed_min_order: below it a matrix costs less whole on every rank than in the grid's messages).
bool order_on_grid(Index order, int ranks, Index min_order);

}  // namespace dfmp2::linalg
