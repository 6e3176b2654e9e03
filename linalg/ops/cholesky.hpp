#pragma once
// cholesky: A = L L^T (Uplo::lower, L overwrites the lower triangle) or U^T U (upper). Throws NumericalError naming
// the failing leading minor when A is not positive definite.
#include "linalg/ops/check.hpp"

namespace dfmp2::linalg {

// A = L L^T of an n x n matrix.
constexpr Cost cholesky_cost(double n) { return {n * n * n / 3.0, 8.0 * n * n}; }

template <class T>
struct Cholesky {
  static constexpr Op op = Op::cholesky;
  static constexpr std::string_view kernel = "cholesky";
  using value_type = T;

  Uplo uplo;
  MatrixViewT<T> a;

  void check() const {
    op_check::view(ConstMatrixViewT<T>(a), kernel, "A");
    op_check::require(a.rows == a.cols, kernel, fmt::format("A is {}x{}, not square", a.rows, a.cols));
    op_check::finite_triangle(a, uplo, kernel);
  }
  Cost cost() const { return scaled_bytes(cholesky_cost(a.rows), sizeof(T)); }
};

}  // namespace dfmp2::linalg
