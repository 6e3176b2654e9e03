#pragma once
// gemm: C = alpha op(A) op(B) + beta C, as BLAS xGEMM. With alpha == 0 A and B are not read; with beta == 0 C is
// not read.
#include "linalg/ops/check.hpp"

namespace dfmp2::linalg {

// C(m x n) = op(A)(m x k) op(B)(k x n): 2mnk flops; A, B and C written (and read when beta != 0), 8-byte elements.
constexpr Cost gemm_cost(double m, double n, double k, bool beta_nonzero = false) {
  return {2.0 * m * n * k, 8.0 * (m * k + k * n + (beta_nonzero ? 2.0 : 1.0) * m * n)};
}

template <class T>
struct Gemm {
  static constexpr Op op = Op::gemm;
  static constexpr std::string_view kernel = "gemm";
  using value_type = T;

  Trans ta, tb;
  T alpha;
  ConstMatrixViewT<T> a, b;
  T beta;
  MatrixViewT<T> c;

  Index m() const { return op_check::rows_of(a, ta); }
  Index k() const { return op_check::cols_of(a, ta); }
  Index n() const { return op_check::cols_of(b, tb); }
  void check() const {
    op_check::view(a, kernel, "A");
    op_check::view(b, kernel, "B");
    op_check::view(ConstMatrixViewT<T>(c), kernel, "C");
    op_check::require(op_check::rows_of(b, tb) == k(), kernel,
                      fmt::format("inner dimensions {} and {} differ", k(), op_check::rows_of(b, tb)));
    op_check::require(c.rows == m() && c.cols == n(), kernel,
                      fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m(), n()));
  }
  Cost cost() const { return scaled_bytes(gemm_cost(m(), n(), k(), beta != T(0)), sizeof(T)); }
};

}  // namespace dfmp2::linalg
