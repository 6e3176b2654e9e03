// The distributed factorisations (linalg/dense_grid.hpp) against each other and against one rank's LAPACK:
// Cholesky (ScaLAPACK pdpotrf, ELPA), the fitting's row solves (pdtrsm on a ranks x 1 grid against each rank's
// local DTRSM with the whole factor) and the symmetric eigensolver (ScaLAPACK pdsyevd, ELPA two-stage), on a
// metric-like matrix (R R^T / n + I) of each order. Prints seconds and each result's largest difference from the
// replicated LAPACK result; with --check exits 1 when a difference exceeds 1e-9 (relative), so the mpi tier runs it.
//
//   mpirun -np 2 build/bench/bench_dense_grid [--check] [--rows R] n1 n2 ...
#include <lapacke.h>
#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/random.hpp"

namespace {

using dfmp2::linalg::Index;
using dfmp2::linalg::Matrix;
using dfmp2::linalg::Vector;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// R R^T / n + I with R uniform in [-1, 1): symmetric positive definite, condition about 2-5.
Matrix metric_like(Index n) {
  Matrix r(n, n);
  std::srand(11);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) r(i, j) = 2.0 * std::rand() / RAND_MAX - 1.0;
  Matrix m = r * r.transpose() / double(n);
  m.diagonal().array() += 1.0;
  return m;
}

double largest(const Matrix& a) { return a.cwiseAbs().maxCoeff(); }

}  // namespace

int main(int argc, char** argv) {
  dfmp2::linalg::init_world(&argc, &argv);
  auto& comm = dfmp2::linalg::world();
  bool check = false;
  Index rows_per_rank = 2000;
  std::vector<Index> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--check") == 0) check = true;
    else if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) rows_per_rank = std::atol(argv[++i]);
    else sizes.push_back(std::atol(argv[i]));
  }
  if (sizes.empty()) sizes = {1000, 2000};
  const bool root = comm.rank() == 0;
  if (root)
    std::printf("ranks %d, %s\n%6s %-10s %10s %10s %10s\n", comm.size(), dfmp2::linalg::dense_libraries().c_str(),
                "order", "op", "ScaLAPACK", "ELPA", "1 rank");
  bool ok = true;
  for (const Index n : sizes) {
    const Matrix j = metric_like(n);
    // The replicated references: LAPACK on the whole matrix (what every rank does without the grid).
    Matrix l = j;
    double t = now();
    LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', int(n), l.data(), int(n));
    const double t_potrf = now() - t;
    l.triangularView<Eigen::StrictlyUpper>().setZero();
    Matrix z = j;
    Vector w(n);
    t = now();
    LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', int(n), z.data(), int(n), w.data());
    const double t_syevd = now() - t;
    // This rank's rows of B (different counts on different ranks: rank r has rows - r).
    const Index my_rows = std::max<Index>(0, rows_per_rank - comm.rank());
    Matrix b(my_rows, n);
    for (Index c = 0; c < n; ++c)
      for (Index r = 0; r < my_rows; ++r) b(r, c) = std::sin(0.1 * double(r + 7 * comm.rank()) + 0.01 * double(c));
    Matrix x_ref = b;
    t = now();
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, int(my_rows), int(n), 1.0, l.data(),
                int(n), x_ref.data(), int(std::max<Index>(my_rows, 1)));
    const double t_trsm = now() - t;

    double chol[2] = {0, 0}, solve[2] = {0, 0}, eig[2] = {0, 0};
    double err_chol = 0, err_solve = 0, err_w = 0, err_vec = 0;
    for (int lib = 0; lib < 2; ++lib) {
      if (lib == 1 && !dfmp2::linalg::have_elpa()) continue;
      const auto library = lib == 0 ? dfmp2::linalg::DenseLibrary::scalapack : dfmp2::linalg::DenseLibrary::elpa;
      auto grid = dfmp2::linalg::make_dense_grid(comm, {library, library, 64});
      auto a = grid->matrix(n);
      a.copy_from(dfmp2::linalg::view(j));
      comm.min(0);
      t = now();
      grid->cholesky(a, "the test metric");
      chol[lib] = comm.max(now() - t);
      // The factor against LAPACK's, on this rank's tiles of the lower triangle.
      a.for_each_tile([&](Index r0, Index c0, dfmp2::linalg::MatrixView tile) {
        for (Index c = 0; c < tile.cols; ++c)
          for (Index r = 0; r < tile.rows; ++r) {
            const Index gr = r0 + r, gc = c0 + c;
            if (a.upper ? gr > gc : gr < gc) continue;
            const double ref = a.upper ? l(gc, gr) : l(gr, gc);
            err_chol = std::max(err_chol, std::abs(tile(r, c) - ref));
          }
      });
      const auto on_rows = grid->for_row_solves(a);
      Matrix x = b;
      comm.min(0);
      t = now();
      grid->solve_rows(on_rows, dfmp2::linalg::view(x));
      solve[lib] = comm.max(now() - t);
      if (my_rows > 0) err_solve = std::max(err_solve, largest(x - x_ref) / std::max(1.0, largest(x_ref)));
      auto m = grid->matrix(n), v = grid->matrix(n);
      m.copy_from(dfmp2::linalg::view(j));
      Vector ev;
      comm.min(0);
      t = now();
      grid->eigh(m, ev, v);
      eig[lib] = comm.max(now() - t);
      err_w = std::max(err_w, (ev - w).cwiseAbs().maxCoeff());
      // Eigenvectors up to sign: |V^T Z| is the identity.
      Matrix whole(n, n);
      grid->gather(v, dfmp2::linalg::view(whole));
      const Matrix overlap = (whole.transpose() * z).cwiseAbs();
      err_vec = std::max(err_vec, largest(overlap - Matrix::Identity(n, n)));
    }
    err_chol = comm.max(err_chol);
    err_solve = comm.max(err_solve);
    const double tolerance = 1e-9;
    const bool good = err_chol < tolerance && err_solve < tolerance && err_w < tolerance && err_vec < 1e-7;
    ok = ok && good;
    if (root) {
      std::printf("%6ld %-10s %10.3f %10.3f %10.3f   |diff| %.1e\n", long(n), "cholesky", chol[0], chol[1], t_potrf,
                  err_chol);
      std::printf("%6ld %-10s %10.3f %10.3f %10.3f   |diff| %.1e (%ld rows per rank)\n", long(n), "row solve",
                  solve[0], solve[1], t_trsm, err_solve, long(rows_per_rank));
      std::printf("%6ld %-10s %10.3f %10.3f %10.3f   |diff| %.1e values, %.1e vectors\n", long(n), "eigh", eig[0],
                  eig[1], t_syevd, err_w, err_vec);
    }
  }
  dfmp2::linalg::finalize_world();
  return check && !ok ? 1 : 0;
}
