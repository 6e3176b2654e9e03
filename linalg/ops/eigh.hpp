#pragma once
// eigh: symmetric eigendecomposition from the lower triangle of A: eigenvalues ascending in `w` (a.rows of them),
// orthonormal eigenvectors overwrite A (column k belongs to w[k]).
#include "linalg/ops/check.hpp"

namespace dfmp2::linalg {

// Symmetric eigendecomposition with eigenvectors: about 9 n^3 (Golub & Van Loan, tridiagonal QR with
// accumulation; divide and conquer is usually cheaper, but the count is a convention, as LAPACK's own is).
constexpr Cost eigh_cost(double n) { return {9.0 * n * n * n, 16.0 * n * n}; }

template <class T>
struct Eigh {
  static constexpr Op op = Op::eigh;
  static constexpr std::string_view kernel = "eigh";
  using value_type = T;

  MatrixViewT<T> a;
  T* w;

  void check() const {
    op_check::view(ConstMatrixViewT<T>(a), kernel, "A");
    op_check::require(a.rows == a.cols, kernel, fmt::format("A is {}x{}, not square", a.rows, a.cols));
    op_check::require(a.rows == 0 || w != nullptr, kernel, "no eigenvalue output");
    op_check::finite_triangle(a, Uplo::lower, kernel);
  }
  Cost cost() const { return scaled_bytes(eigh_cost(a.rows), sizeof(T)); }
};

}  // namespace dfmp2::linalg
