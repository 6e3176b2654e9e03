#pragma once
// spmm: C = alpha op(S) B + beta C with S sparse (CsrMatrix or BsrMatrix of linalg/sparse.hpp), B and C dense;
// op(S) = S (Trans::no) or S^T (Trans::yes). SpMV is SpMM with one column (linalg::Kernels::spmv). One op, two
// storage formats: two descriptors that share the Op and log under their own kernel names.
#include "linalg/ops/check.hpp"
#include "linalg/sparse.hpp"

#include <type_traits>

namespace dfmp2::linalg {

// Unlike the dense costs these take the element and index sizes, since the index arrays do not shrink with the
// element type. CSR: 2 flops per stored entry and column of B; S's values and column indices, B and C (read too
// when beta != 0).
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

namespace op_check {
// op(S) is m x k, B k x n, C m x n.
template <class T>
void spmm_shapes(std::string_view op, Trans ts, Index s_rows, Index s_cols, const ConstMatrixViewT<T>& b,
                 const ConstMatrixViewT<T>& c) {
  view(b, op, "B");
  view(c, op, "C");
  const Index m = ts == Trans::no ? s_rows : s_cols, k = ts == Trans::no ? s_cols : s_rows;
  require(b.rows == k, op, fmt::format("op(S) is {}x{} but B has {} rows", m, k, b.rows));
  require(c.rows == m && c.cols == b.cols, op, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, b.cols));
}
}  // namespace op_check

// One descriptor for both formats: Sparse is CsrMatrix or BsrMatrix.
template <class T, template <class> class Sparse>
struct Spmm {
  static constexpr bool csr = std::is_same_v<Sparse<T>, CsrMatrix<T>>;
  static constexpr Op op = Op::spmm;
  static constexpr std::string_view kernel = csr ? "spmm_csr" : "spmm_bsr";
  using value_type = T;

  Trans ts;
  T alpha;
  const Sparse<T>& s;
  ConstMatrixViewT<T> b;
  T beta;
  MatrixViewT<T> c;

  // S's structure too (validate()), so a backend can trust its indices.
  void check() const {
    validate(s);
    op_check::spmm_shapes<T>(kernel, ts, s.rows, s.cols, b, c);
  }
  Cost cost() const {
    if constexpr (csr) {
      return spmm_csr_cost(s.nnz(), b.cols, b.rows, c.rows, beta != T(0), sizeof(T), sizeof(Index));
    } else {
      return spmm_bsr_cost(s.nblocks(), s.block_rows, s.block_cols, b.cols, b.rows, c.rows, beta != T(0), sizeof(T),
                           sizeof(Index));
    }
  }
};

template <class T>
using SpmmCsr = Spmm<T, CsrMatrix>;
template <class T>
using SpmmBsr = Spmm<T, BsrMatrix>;

}  // namespace dfmp2::linalg
