#pragma once
// gemm_batched: `count` gemm problems whose operands start `strides` elements apart (a stride of 0 shares one
// operand among all problems). A, B and C describe the first problem.
#include "linalg/ops/gemm.hpp"

namespace dfmp2::linalg {

struct BatchStrides {
  Index a = 0;  // 0 means every problem shares the same operand
  Index b = 0;
  Index c = 0;
};

constexpr Cost gemm_batched_cost(double count, double m, double n, double k, bool beta_nonzero = false) {
  const Cost one = gemm_cost(m, n, k, beta_nonzero);
  return {count * one.flops, count * one.bytes};
}

template <class T>
struct GemmBatched {
  static constexpr Op op = Op::gemm_batched;
  static constexpr std::string_view kernel = "gemm_batched";
  using value_type = T;

  Trans ta, tb;
  Index count;
  BatchStrides strides;
  T alpha;
  ConstMatrixViewT<T> a, b;
  T beta;
  MatrixViewT<T> c;

  Index m() const { return op_check::rows_of(a, ta); }
  Index k() const { return op_check::cols_of(a, ta); }
  Index n() const { return op_check::cols_of(b, tb); }
  // Problem i's operands.
  Gemm<T> problem(Index i) const {
    return {ta, tb, alpha, {a.data + i * strides.a, a.rows, a.cols, a.ld},
            {b.data + i * strides.b, b.rows, b.cols, b.ld}, beta, {c.data + i * strides.c, c.rows, c.cols, c.ld}};
  }
  void check() const {
    op_check::require(count >= 0, kernel, "negative batch count");
    op_check::gemm_shapes<T>(kernel, ta, tb, a, b, c);
    op_check::require(strides.a >= 0 && strides.b >= 0 && strides.c >= 0, kernel, "negative stride");
    // Outputs of different problems must not overlap, or the result would depend on the order of the batch.
    op_check::require(count <= 1 || m() == 0 || n() == 0 || strides.c >= c.ld * (n() - 1) + m(), kernel,
                      "C stride makes outputs overlap");
  }
  Cost cost() const { return scaled_bytes(gemm_batched_cost(count, m(), n(), k(), beta != T(0)), sizeof(T)); }
};

}  // namespace dfmp2::linalg
