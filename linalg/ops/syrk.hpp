#pragma once
// syrk: C = alpha A A^T + beta C (Trans::no, A n x k) or alpha A^T A + beta C (Trans::yes, A k x n); only the
// `uplo` triangle of C is referenced and written.
#include "linalg/ops/check.hpp"

namespace dfmp2::linalg {

// C(n x n) triangle = A(n x k) A^T; only one triangle is computed.
constexpr Cost syrk_cost(double n, double k) { return {n * (n + 1.0) * k, 8.0 * (n * k + n * (n + 1.0) / 2.0)}; }

template <class T>
struct Syrk {
  static constexpr Op op = Op::syrk;
  static constexpr std::string_view kernel = "syrk";
  using value_type = T;

  Uplo uplo;
  Trans trans;
  T alpha;
  ConstMatrixViewT<T> a;
  T beta;
  MatrixViewT<T> c;

  Index n() const { return op_check::rows_of(a, trans); }
  Index k() const { return op_check::cols_of(a, trans); }
  void check() const {
    op_check::view(a, kernel, "A");
    op_check::view(ConstMatrixViewT<T>(c), kernel, "C");
    op_check::require(c.rows == n() && c.cols == n(), kernel,
                      fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, n(), n()));
  }
  Cost cost() const { return scaled_bytes(syrk_cost(n(), k()), sizeof(T)); }
};

}  // namespace dfmp2::linalg
