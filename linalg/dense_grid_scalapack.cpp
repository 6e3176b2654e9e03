// linalg/dense_grid.hpp through ScaLAPACK (BLACS grids, pdpotrf, pdtrsm, pdsyevd, pdgemm, pdgemr2d) and ELPA
// (Cholesky and the two-stage eigensolver). Built with MPI and ScaLAPACK (DFMP2_SCALAPACK); ELPA with DFMP2_ELPA.
#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include "linalg/dense_grid.hpp"
#include "linalg/errors.hpp"

#ifdef DFMP2_HAVE_ELPA
#include <elpa/elpa.h>
#endif

// The Fortran and BLACS entry points, with gfortran's hidden lengths of character arguments.
extern "C" {
int Csys2blacs_handle(MPI_Comm comm);
void Cfree_blacs_system_handle(int handle);
void Cblacs_gridinit(int* context, const char* order, int rows, int cols);
void Cblacs_gridinfo(int context, int* rows, int* cols, int* my_row, int* my_col);
void Cblacs_gridexit(int context);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc,
               const int* icsrc, const int* context, const int* lld, int* info);
void pdpotrf_(const char* uplo, const int* n, double* a, const int* ia, const int* ja, const int* desca, int* info,
              std::size_t);
void pdtrsm_(const char* side, const char* uplo, const char* trans, const char* diag, const int* m, const int* n,
             const double* alpha, const double* a, const int* ia, const int* ja, const int* desca, double* b,
             const int* ib, const int* jb, const int* descb, std::size_t, std::size_t, std::size_t, std::size_t);
void pdsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* ia, const int* ja,
              const int* desca, double* w, double* z, const int* iz, const int* jz, const int* descz, double* work,
              const int* lwork, int* iwork, const int* liwork, int* info, std::size_t, std::size_t);
void pdgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc, std::size_t, std::size_t);
void pdtran_(const int* m, const int* n, const double* alpha, const double* a, const int* ia, const int* ja,
             const int* desca, const double* beta, double* c, const int* ic, const int* jc, const int* descc);
void Cpdgemr2d(int m, int n, double* a, int ia, int ja, int* desca, double* b, int ib, int jb, int* descb,
               int context);
}

namespace dfmp2::linalg {
namespace {

int as_int(Index n, const char* what) {
  if (n > Index(2147483647)) throw ResourceError(fmt::format("distributed factorisation: {} {} over 2^31", what, n));
  return static_cast<int>(n);
}

class BlacsGrid {
 public:
  // `system`: the BLACS handle of the communicator (Csys2blacs_handle), which the grids of one communicator share.
  BlacsGrid(int system, int rows, int cols) : context_(system) {
    Cblacs_gridinit(&context_, "Row", rows, cols);
    Cblacs_gridinfo(context_, &rows_, &cols_, &my_row_, &my_col_);
  }
  ~BlacsGrid() { Cblacs_gridexit(context_); }
  BlacsGrid(const BlacsGrid&) = delete;
  BlacsGrid& operator=(const BlacsGrid&) = delete;
  int context() const { return context_; }
  // An m x n matrix in blocks of mb x nb, its local part zero.
  DistributedMatrix matrix(Index m, Index n, Index mb, Index nb) const {
    DistributedMatrix a;
    a.layout = {n, nb, rows_, cols_, my_row_, my_col_, block_cyclic_count(m, mb, my_row_, rows_),
                block_cyclic_count(n, nb, my_col_, cols_)};
    a.local = Matrix::Zero(a.layout.local_rows, a.layout.local_cols);
    const int im = as_int(m, "order"), in = as_int(n, "order"), imb = as_int(mb, "block"), inb = as_int(nb, "block");
    const int zero = 0, lld = std::max(1, static_cast<int>(a.layout.local_rows));
    int info = 0;
    descinit_(a.descriptor, &im, &in, &imb, &inb, &zero, &zero, &context_, &lld, &info);
    if (info != 0) throw std::logic_error(fmt::format("descinit: argument {} is wrong", -info));
    return a;
  }

 private:
  int context_;
  int rows_ = 1, cols_ = 1, my_row_ = 0, my_col_ = 0;
};

#ifdef DFMP2_HAVE_ELPA
// One ELPA object for an n x n problem on the square grid; ELPA splits the grid's row and column communicators.
class ElpaProblem {
 public:
  ElpaProblem(MPI_Comm comm, const DistributedMatrix& a) {
    static std::once_flag once;
    std::call_once(once, [] {
      if (elpa_init(ELPA_API_VERSION) != ELPA_OK) throw UnsupportedError("ELPA: this library's API is too old");
    });
    int error = 0;
    handle_ = elpa_allocate(&error);
    check(error, "allocate");
    const BlockCyclicLayout& l = a.layout;
    set("na", int(l.n));
    set("nev", int(l.n));
    set("local_nrows", int(l.local_rows));
    set("local_ncols", int(l.local_cols));
    set("nblk", int(l.block));
    set("mpi_comm_parent", int(MPI_Comm_c2f(comm)));
    set("process_row", l.my_row);
    set("process_col", l.my_col);
    set("blacs_context", a.descriptor[1]);
    check(elpa_setup(handle_), "setup");
    // One stage: Debian's ELPA runs its two-stage solver's back-transformation with generic kernels, 2.5x slower
    // than pdsyevd at order 4,000 here, while the one-stage solver beat pdsyevd (bench/README.md).
    set("solver", ELPA_SOLVER_1STAGE);
  }
  ~ElpaProblem() {
    int error = 0;
    elpa_deallocate(handle_, &error);
  }
  ElpaProblem(const ElpaProblem&) = delete;
  ElpaProblem& operator=(const ElpaProblem&) = delete;
  elpa_t handle() const { return handle_; }
  static void check(int error, const char* what) {
    // (elpa.h declares elpa_strerr without C linkage, so the code is printed instead.)
    if (error != ELPA_OK) throw NumericalError(fmt::format("ELPA {}: error code {}", what, error));
  }

 private:
  void set(const char* name, int value) {
    int error = 0;
    elpa_set_integer(handle_, name, value, &error);
    check(error, name);
  }
  elpa_t handle_ = nullptr;
};
#endif

class ScalapackGrid final : public DenseGrid {
 public:
  ScalapackGrid(Comm& comm, const DenseOptions& options)
      : comm_(comm), mpi_(*static_cast<const MPI_Comm*>(comm.mpi_handle())), options_(options),
        system_(Csys2blacs_handle(mpi_)),
        square_(system_, grid_shape(comm.size()).first, grid_shape(comm.size()).second),
        rows_grid_(system_, comm.size(), 1) {
#ifndef DFMP2_HAVE_ELPA
    if (options.cholesky == DenseLibrary::elpa || options.eigh == DenseLibrary::elpa)
      throw UnsupportedError("distributed factorisations: ELPA was asked for, and this build has none "
                             "(DFMP2_ELPA=OFF)");
#endif
  }

  // The block: options.block, or less, so that every rank of the grid holds part of a small matrix (pdsyevd's
  // back-transformation and ELPA's solver both refuse a process with none): at most n over the grid's longer side,
  // rounded down, so that there are at least as many blocks as ranks along it. Below that side's length some rank
  // holds nothing whatever the block, and ELPA is not used (dense_library_for).
  Index block_for(Index n) const {
    const auto [rows, cols] = grid_shape(comm_.size());
    return std::clamp<Index>(n / std::max(rows, cols), 1, options_.block);
  }

  int grid_rows() const override { return grid_shape(comm_.size()).first; }
  int grid_cols() const override { return grid_shape(comm_.size()).second; }
  const DenseOptions& options() const override { return options_; }
  DistributedMatrix matrix(Index n) const override {
    const Index nb = block_for(n);
    return square_.matrix(n, n, nb, nb);
  }

  void cholesky(DistributedMatrix& j, const std::string& what) override {
    const int n = as_int(j.layout.n, "order"), one = 1;
    int info = 0;
    const DenseLibrary library = cholesky_library(j.layout.n);
    if (library == DenseLibrary::elpa) {
#ifdef DFMP2_HAVE_ELPA
      ElpaProblem problem(mpi_, j);
      elpa_cholesky(problem.handle(), j.local.data(), &info);
      // ELPA leaves U = L^T in the upper triangle.
      j.upper = true;
      if (info != ELPA_OK) info = 1;
#endif
    } else {
      pdpotrf_("U", &n, j.local.data(), &one, &one, j.descriptor, &info, 1);
      j.upper = true;  // J = U^T U: the solves X U = B run 1.3x faster than X L^T = B (bench_dense_grid)
    }
    comm_.checked([&] {
      if (info > 0)
        throw NumericalError(fmt::format("{} is not positive definite ({} Cholesky, leading minor {})", what,
                                         dense_library_name(library), info));
      if (info < 0) throw std::logic_error(fmt::format("pdpotrf: argument {} is wrong", -info));
    });
  }

  DistributedMatrix for_row_solves(const DistributedMatrix& factor) override {
    const Index n = factor.layout.n;
    DistributedMatrix on_rows = rows_grid_.matrix(n, n, factor.layout.block, factor.layout.block);
    on_rows.upper = factor.upper;
    const int nn = as_int(n, "order");
    Cpdgemr2d(nn, nn, const_cast<double*>(factor.local.data()), 1, 1, const_cast<int*>(factor.descriptor),
              on_rows.local.data(), 1, 1, on_rows.descriptor, square_.context());
    return on_rows;
  }

  void solve_rows(const DistributedMatrix& factor, MatrixView b, bool transposed) override {
    if (factor.descriptor[1] != rows_grid_.context())
      throw std::logic_error("DenseGrid::solve_rows: the factor is not laid out for row solves (for_row_solves)");
    const Index n = factor.layout.n;
    const Index widest = static_cast<Index>(comm_.max(double(b.rows)));
    if (widest == 0) return;
    // Every rank's rows padded to the widest (a rank with fewer solves zero rows: at most one block per round).
    DistributedMatrix rows = rows_grid_.matrix(widest * comm_.size(), n, widest, factor.layout.block);
    for (Index c = 0; c < b.cols; ++c)
      for (Index r = 0; r < b.rows; ++r) rows.local(r, c) = b(r, c);
    const int m = as_int(widest * comm_.size(), "rows"), nn = as_int(n, "order"), one = 1;
    const double alpha = 1.0;
    // X L^T = B is X U = B with the upper factor U = L^T; X L = B is X U^T = B.
    const bool no_transpose = factor.upper != transposed;
    pdtrsm_("R", factor.upper ? "U" : "L", no_transpose ? "N" : "T", "N", &m, &nn, &alpha,
            factor.local.data(), &one, &one, factor.descriptor, rows.local.data(), &one, &one,
            rows.descriptor, 1, 1, 1, 1);
    for (Index c = 0; c < b.cols; ++c)
      for (Index r = 0; r < b.rows; ++r) b(r, c) = rows.local(r, c);
  }

  void eigh(DistributedMatrix& a, Vector& eigenvalues, DistributedMatrix& vectors) override {
    const int n = as_int(a.layout.n, "order"), one = 1;
    eigenvalues.resize(n);
    int info = 0;
    const DenseLibrary library = eigh_library(a.layout.n);
    if (library == DenseLibrary::elpa) {
#ifdef DFMP2_HAVE_ELPA
      ElpaProblem problem(mpi_, a);
      elpa_eigenvectors(problem.handle(), a.local.data(), eigenvalues.data(), vectors.local.data(), &info);
      if (info != ELPA_OK) info = 1;
#endif
    } else {
      int lwork = -1, liwork = -1, iwork_query = 0;
      double work_query = 0;
      pdsyevd_("V", "L", &n, a.local.data(), &one, &one, a.descriptor, eigenvalues.data(), vectors.local.data(),
               &one, &one, vectors.descriptor, &work_query, &lwork, &iwork_query, &liwork, &info, 1, 1);
      // ScaLAPACK 2.2.1's query leaves out part of what PDORMTR needs on 2-D grids ("parameter 16 had an illegal
      // value" at 4 ranks): PDORMTR's own bound, NB (NP + NQ + NB) plus its panel, is added.
      const Index nb = a.layout.block;
      lwork = static_cast<int>(work_query) + 1 +
              as_int(nb * (a.layout.local_rows + a.layout.local_cols + nb) + 2 * nb * a.layout.n, "workspace");
      liwork = std::max(iwork_query, 1);
      std::vector<double> work(static_cast<std::size_t>(lwork));
      std::vector<int> iwork(static_cast<std::size_t>(liwork));
      pdsyevd_("V", "L", &n, a.local.data(), &one, &one, a.descriptor, eigenvalues.data(), vectors.local.data(),
               &one, &one, vectors.descriptor, work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
    }
    comm_.checked([&] {
      if (info != 0)
        throw NumericalError(fmt::format("distributed eigensolver ({}) failed: info {}", dense_library_name(library),
                                         info));
    });
  }

  void multiply(bool transpose_a, bool transpose_b, double alpha, const DistributedMatrix& a,
                const DistributedMatrix& b, double beta, DistributedMatrix& c) override {
    const int m = as_int(c.layout.n, "order"), n = m, k = as_int(transpose_a ? a.layout.n : a.layout.n, "order");
    const int one = 1;
    pdgemm_(transpose_a ? "T" : "N", transpose_b ? "T" : "N", &m, &n, &k, &alpha, a.local.data(), &one, &one,
            a.descriptor, b.local.data(), &one, &one, b.descriptor, &beta, c.local.data(), &one, &one, c.descriptor,
            1, 1);
  }

  void add_transpose(double alpha, const DistributedMatrix& a, double beta, DistributedMatrix& c) override {
    const int n = as_int(c.layout.n, "order"), one = 1;
    pdtran_(&n, &n, &alpha, a.local.data(), &one, &one, a.descriptor, &beta, c.local.data(), &one, &one, c.descriptor);
  }

  void gather(const DistributedMatrix& a, MatrixView whole) override {
    for (Index c = 0; c < whole.cols; ++c) std::fill_n(&whole(0, c), whole.rows, 0.0);
    const_cast<DistributedMatrix&>(a).for_each_tile([&](Index r0, Index c0, MatrixView tile) {
      for (Index c = 0; c < tile.cols; ++c)
        for (Index r = 0; r < tile.rows; ++r) whole(r0 + r, c0 + c) = tile(r, c);
    });
    if (whole.ld != whole.rows) throw std::logic_error("DenseGrid::gather: a strided matrix");
    comm_.sum(whole.data, static_cast<std::size_t>(whole.rows * whole.cols));
  }

 private:
  Comm& comm_;
  MPI_Comm mpi_;
  DenseOptions options_;
  // The system handle outlives the grids (declared first, freed last).
  struct SystemHandle {
    int handle;
    SystemHandle(int h) : handle(h) {}  // NOLINT
    ~SystemHandle() { Cfree_blacs_system_handle(handle); }
    operator int() const { return handle; }  // NOLINT
  } system_;
  BlacsGrid square_, rows_grid_;
};

}  // namespace

std::unique_ptr<DenseGrid> make_dense_grid(Comm& comm, const DenseOptions& options) {
  if (comm.mpi_handle() == nullptr)
    throw UnsupportedError("distributed factorisations need MPI ranks: this process runs as one rank");
  return std::make_unique<ScalapackGrid>(comm, options);
}

std::string dense_libraries() {
#ifdef DFMP2_HAVE_ELPA
  return "ScaLAPACK " DFMP2_SCALAPACK_VERSION ", ELPA " DFMP2_ELPA_VERSION;
#else
  return "ScaLAPACK " DFMP2_SCALAPACK_VERSION " (no ELPA)";
#endif
}

bool have_elpa() {
#ifdef DFMP2_HAVE_ELPA
  return true;
#else
  return false;
#endif
}

}  // namespace dfmp2::linalg
