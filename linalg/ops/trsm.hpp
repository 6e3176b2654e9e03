#pragma once
// trsm: solves op(A) X = alpha B (Side::left) or X op(A) = alpha B (Side::right), A triangular (`uplo`, unit
// diagonal with Diag::unit); X overwrites B. With alpha == 0, X = 0 and neither A nor B is read.
#include "linalg/ops/check.hpp"

namespace dfmp2::linalg {

// Solve op(A) X = B (left, A m x m) or X op(A) = B (right, A n x n) for B(m x n).
constexpr Cost trsm_cost(Side side, double m, double n) {
  const double order = side == Side::left ? m : n;
  return {order * order * (side == Side::left ? n : m), 8.0 * (order * (order + 1.0) / 2.0 + 2.0 * m * n)};
}

template <class T>
struct Trsm {
  static constexpr Op op = Op::trsm;
  static constexpr std::string_view kernel = "trsm";
  using value_type = T;

  Side side;
  Uplo uplo;
  Trans trans;
  Diag diag;
  T alpha;
  ConstMatrixViewT<T> a;
  MatrixViewT<T> b;

  void check() const {
    op_check::view(a, kernel, "A");
    op_check::view(ConstMatrixViewT<T>(b), kernel, "B");
    const Index order = side == Side::left ? b.rows : b.cols;
    op_check::require(a.rows == order && a.cols == order, kernel,
                      fmt::format("A is {}x{}, expected {}x{}", a.rows, a.cols, order, order));
  }
  Cost cost() const { return scaled_bytes(trsm_cost(side, b.rows, b.cols), sizeof(T)); }
};

}  // namespace dfmp2::linalg
