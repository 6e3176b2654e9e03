#pragma once
// What a kernel costs, as a pure function of its shape: floating-point operations and the bytes a kernel must
// at least read and write. Timers, benchmarks and (later) the device model all share these numbers, so a
// GFLOP/s figure means the same thing everywhere.
#include <cstdint>

#include "linalg/ops.hpp"

namespace dfmp2::linalg {

struct Cost {
  double flops = 0;
  double bytes = 0;
};

// C(m x n) = op(A)(m x k) op(B)(k x n)
constexpr Cost gemm_cost(double m, double n, double k, bool beta_nonzero = false) {
  return {2.0 * m * n * k, 8.0 * (m * k + k * n + (beta_nonzero ? 2.0 : 1.0) * m * n)};
}
constexpr Cost gemm_batched_cost(double count, double m, double n, double k, bool beta_nonzero = false) {
  const Cost one = gemm_cost(m, n, k, beta_nonzero);
  return {count * one.flops, count * one.bytes};
}
// C(n x n) triangle = A(n x k) A^T; only one triangle is computed.
constexpr Cost syrk_cost(double n, double k) { return {n * (n + 1.0) * k, 8.0 * (n * k + n * (n + 1.0) / 2.0)}; }
// Solve op(A) X = B (left, A m x m) or X op(A) = B (right, A n x n) for B(m x n).
constexpr Cost trsm_cost(Side side, double m, double n) {
  const double order = side == Side::left ? m : n;
  return {order * order * (side == Side::left ? n : m), 8.0 * (order * (order + 1.0) / 2.0 + 2.0 * m * n)};
}
// A = L L^T of an n x n matrix.
constexpr Cost cholesky_cost(double n) { return {n * n * n / 3.0, 8.0 * n * n}; }
// Symmetric eigendecomposition with eigenvectors: about 9 n^3 (Golub & Van Loan, tridiagonal QR with
// accumulation; divide and conquer is usually cheaper, but the count is a convention, as LAPACK's own is).
constexpr Cost eigh_cost(double n) { return {9.0 * n * n * n, 16.0 * n * n}; }

// SpMM C(m x n) = op(S) B(k x n), S sparse. Unlike the dense costs these take the element and index sizes, since
// the index arrays do not shrink with the element type (Kernels records them as they are, without scaled_bytes).
// CSR: 2 flops per stored entry and column of B; S's values and column indices, B and C (read too when beta != 0).
constexpr Cost spmm_csr_cost(double nnz, double n, double k, double m, bool beta_nonzero = false,
                             double element_bytes = 8.0, double index_bytes = 8.0) {
  return {2.0 * nnz * n,
          nnz * (element_bytes + index_bytes) + element_bytes * (k * n + (beta_nonzero ? 2.0 : 1.0) * m * n)};
}
// BSR computes whole stored blocks (edge padding included): 2 br bc n flops per block; the blocks, one column
// index per block, B and C.
constexpr Cost spmm_bsr_cost(double nblocks, double block_rows, double block_cols, double n, double k, double m,
                             bool beta_nonzero = false, double element_bytes = 8.0, double index_bytes = 8.0) {
  return {2.0 * nblocks * block_rows * block_cols * n,
          nblocks * (block_rows * block_cols * element_bytes + index_bytes) +
              element_bytes * (k * n + (beta_nonzero ? 2.0 : 1.0) * m * n)};
}

// The byte counts above assume 8-byte elements; fp32 kernels move half.
constexpr Cost scaled_bytes(Cost c, double element_bytes) { return {c.flops, c.bytes * element_bytes / 8.0}; }

}  // namespace dfmp2::linalg
