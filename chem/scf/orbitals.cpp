// The SCF's linear algebra: eigenproblems, the orthogonaliser, products and the orbital gradient on the backend or
// on the ranks' grid.
#include <fmt/format.h>

#include <Eigen/Dense>
#include <cmath>
#include <string>

#include "chem/scf/scf_detail.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem::scf_detail {


// The eigenvalues and eigenvectors (in place) of the symmetric `a`: the backend's eigh on every rank, or on the ranks'
// grid when `options` gives one and the order reaches its limit (the vectors gathered, so every rank has the same
// bits either way).
void symmetric_eigen(Matrix& a, Vector& eps, linalg::Kernels& kernels, const ScfOptions* options,
                     const std::string& step) {
  eps.resize(a.rows());
  if (options == nullptr || options->dense == nullptr || a.rows() < options->distributed_min_order) {
    kernels.eigh(step, linalg::view(a), eps.data());
    return;
  }
  linalg::DenseGrid& grid = *options->dense;
  Stopwatch clock;
  linalg::DistributedMatrix m = grid.matrix(a.rows()), vectors = grid.matrix(a.rows());
  m.copy_from(linalg::view(a));
  grid.eigh(m, eps, vectors);
  grid.gather(vectors, linalg::view(a));
  const double n = double(a.rows());
  kernels.record_host(step, fmt::format("{} eigh", dense_library_name(grid.eigh_library(a.rows()))), clock.seconds(),
                      {9.0 * n * n * n, 16.0 * n * n}, "fp64");
}

// Symmetric orthogonaliser X = S^-1/2 (its eigenproblem on the ranks' grid when `options` gives one and the order
// reaches its limit).
Matrix orthogonaliser(const Matrix& s, linalg::Kernels* kernels, const ScfOptions* options) {
  Vector w;
  Matrix vectors;
  if (kernels != nullptr && options != nullptr && options->dense != nullptr &&
      s.rows() >= options->distributed_min_order) {
    vectors = s;
    symmetric_eigen(vectors, w, *kernels, options, step_name(ScfStep::integrals));
  } else {
    Eigen::SelfAdjointEigenSolver<Matrix> eig(s);
    if (eig.info() != Eigen::Success) throw NumericalError("overlap matrix: eigensolver failed");
    w = eig.eigenvalues();
    vectors = eig.eigenvectors();
  }
  if (w.minCoeff() < 1e-10 * w.maxCoeff()) {
    throw NumericalError(fmt::format("overlap matrix: smallest eigenvalue {:.3e} (largest {:.3e}); the basis is "
                                     "linearly dependent",
                                     w.minCoeff(), w.maxCoeff()));
  }
  return vectors * w.cwiseInverse().cwiseSqrt().asDiagonal() * vectors.transpose();
}

// The orbital gradient DIIS extrapolates with: X^T (F D S - S D F) X, in the orthonormal basis. On the ranks'
// grid when the order reaches its limit (pdgemm and pdtran; S D F = (F D S)^T for symmetric F, D and S), each rank
// holding its tiles, the result gathered.
Matrix orbital_gradient(const Matrix& fock, const Matrix& d, const Matrix& s, const Matrix& x, linalg::Kernels& kernels,
                        const ScfOptions& options) {
  const std::string step = step_name(ScfStep::iterations);
  const Index n = fock.rows();
  if (options.dense == nullptr || n < options.distributed_min_order) {
    const Matrix fds = product(kernels, step, fock, Trans::no, product(kernels, step, d, Trans::no, s, Trans::no), Trans::no);
    const Matrix commutator = fds - fds.transpose();
    return product(kernels, step, x, Trans::yes, product(kernels, step, commutator, Trans::no, x, Trans::no), Trans::no);
  }
  linalg::DenseGrid& grid = *options.dense;
  Stopwatch clock;
  linalg::DistributedMatrix a = grid.matrix(n), b = grid.matrix(n), c = grid.matrix(n);
  a.copy_from(linalg::view(d));
  b.copy_from(linalg::view(s));
  grid.multiply(false, false, 1.0, a, b, 0.0, c);  // D S
  a.copy_from(linalg::view(fock));
  grid.multiply(false, false, 1.0, a, c, 0.0, b);  // F D S
  c.local = b.local;
  grid.add_transpose(-1.0, b, 1.0, c);             // F D S - (F D S)^T
  a.copy_from(linalg::view(x));
  grid.multiply(false, false, 1.0, c, a, 0.0, b);  // (...) X
  grid.multiply(true, false, 1.0, a, b, 0.0, c);   // X^T (...) X
  Matrix out(n, n);
  grid.gather(c, linalg::view(out));
  const double nn = double(n);
  kernels.record_host(step, "pdgemm", clock.seconds(), {8.0 * nn * nn * nn, 8.0 * nn * nn}, "fp64");
  return out;
}

// The same on the ranks' grid: F' = X^T F X, its eigenvectors C' and C = X C' with ScaLAPACK's pdgemm and the
// grid's eigensolver, each rank holding its tiles; only C is gathered (the same bits on every rank).
namespace {
Orbitals diagonalise_on_grid(const Matrix& fock, const Matrix& x, linalg::DenseGrid& grid, linalg::Kernels& kernels) {
  const Index n = fock.rows();
  Stopwatch clock;
  linalg::DistributedMatrix f = grid.matrix(n), xd = grid.matrix(n), t = grid.matrix(n), v = grid.matrix(n);
  f.copy_from(linalg::view(fock));
  xd.copy_from(linalg::view(x));
  grid.multiply(false, false, 1.0, f, xd, 0.0, t);  // F X
  grid.multiply(true, false, 1.0, xd, t, 0.0, f);   // X^T (F X)
  Orbitals out;
  grid.eigh(f, out.eps, v);
  grid.multiply(false, false, 1.0, xd, v, 0.0, t);  // X C'
  out.c.resize(n, n);
  grid.gather(t, linalg::view(out.c));
  const double nn = double(n);
  kernels.record_host(step_name(ScfStep::iterations),
                      fmt::format("pdgemm + {} eigh", dense_library_name(grid.eigh_library(n))), clock.seconds(),
                      {6.0 * nn * nn * nn + 9.0 * nn * nn * nn, 8.0 * nn * nn}, "fp64");
  return out;
}

}  // namespace

Orbitals diagonalise(const Matrix& fock, const Matrix& x, linalg::Kernels& kernels, const ScfOptions* options) {
  if (options != nullptr && options->dense != nullptr && fock.rows() >= options->distributed_min_order)
    return diagonalise_on_grid(fock, x, *options->dense, kernels);
  const std::string step = step_name(ScfStep::iterations);
  Matrix f_orth = product(kernels, step, x, Trans::yes, product(kernels, step, fock, Trans::no, x, Trans::no), Trans::no);
  Vector eps;
  symmetric_eigen(f_orth, eps, kernels, options, step);
  return {product(kernels, step, x, Trans::no, f_orth, Trans::no), eps};
}

}  // namespace dfmp2::chem::scf_detail
