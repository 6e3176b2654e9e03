#pragma once
// gemm: C = alpha op(A) op(B) + beta C, as BLAS xGEMM. With alpha == 0 A and B are not read; with beta == 0 C is
// not read.
#include "linalg/ops/check.hpp"

namespace dfmp2::linalg {

// C(m x n) = op(A)(m x k) op(B)(k x n): 2mnk flops; A, B and C written (and read when beta != 0), 8-byte elements.
constexpr Cost gemm_cost(double m, double n, double k, bool beta_nonzero = false) {
  return {2.0 * m * n * k, 8.0 * (m * k + k * n + (beta_nonzero ? 2.0 : 1.0) * m * n)};
}

namespace op_check {
// C = op(A) op(B): the views are well formed, the inner dimensions agree and C is m x n (gemm, gemm_batched).
template <class T>
void gemm_shapes(std::string_view op, Trans ta, Trans tb, const ConstMatrixViewT<T>& a, const ConstMatrixViewT<T>& b,
                 const ConstMatrixViewT<T>& c) {
  view(a, op, "A");
  view(b, op, "B");
  view(c, op, "C");
  const Index m = rows_of(a, ta), k = cols_of(a, ta), n = cols_of(b, tb);
  require(rows_of(b, tb) == k, op, fmt::format("inner dimensions {} and {} differ", k, rows_of(b, tb)));
  require(c.rows == m && c.cols == n, op, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, n));
}
}  // namespace op_check

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
  void check() const { op_check::gemm_shapes<T>(kernel, ta, tb, a, b, c); }
  Cost cost() const { return scaled_bytes(gemm_cost(m(), n(), k(), beta != T(0)), sizeof(T)); }
};

}  // namespace dfmp2::linalg
