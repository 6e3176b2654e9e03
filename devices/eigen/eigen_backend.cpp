#include "devices/eigen/eigen_backend.hpp"

#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>

#include "linalg/errors.hpp"

namespace dfmp2::devices {
namespace {

using linalg::BatchStrides;
using linalg::ConstMatrixViewT;
using linalg::Diag;
using linalg::eigen_map;
using linalg::Index;
using linalg::MatrixViewT;
using linalg::Side;
using linalg::Trans;
using linalg::Uplo;

// C = alpha * P + beta * C with BLAS semantics: when beta is 0, C is not read (it may hold NaN); when alpha is
// 0, the operands of P are not read.
template <class T, class Product>
void update(MatrixViewT<T> c, T alpha, const Product& product, T beta) {
  auto cm = eigen_map(c);
  if (alpha == T(0)) {
    if (beta == T(0)) cm.setZero();
    else if (beta != T(1)) cm *= beta;
    return;
  }
  if (beta == T(0)) {
    cm.noalias() = alpha * product;
  } else {
    if (beta != T(1)) cm *= beta;
    cm.noalias() += alpha * product;
  }
}

template <class T>
void gemm_one(Trans ta, Trans tb, T alpha, ConstMatrixViewT<T> a, ConstMatrixViewT<T> b, T beta, MatrixViewT<T> c) {
  const auto am = eigen_map(a);
  const auto bm = eigen_map(b);
  if (ta == Trans::no && tb == Trans::no) update(c, alpha, am * bm, beta);
  if (ta == Trans::yes && tb == Trans::no) update(c, alpha, am.transpose() * bm, beta);
  if (ta == Trans::no && tb == Trans::yes) update(c, alpha, am * bm.transpose(), beta);
  if (ta == Trans::yes && tb == Trans::yes) update(c, alpha, am.transpose() * bm.transpose(), beta);
}

template <class T>
void gemm_batched_impl(Trans ta, Trans tb, Index count, const BatchStrides& s, T alpha, ConstMatrixViewT<T> a,
                       ConstMatrixViewT<T> b, T beta, MatrixViewT<T> c) {
  for (Index i = 0; i < count; ++i) {
    ConstMatrixViewT<T> ai{a.data + i * s.a, a.rows, a.cols, a.ld};
    ConstMatrixViewT<T> bi{b.data + i * s.b, b.rows, b.cols, b.ld};
    MatrixViewT<T> ci{c.data + i * s.c, c.rows, c.cols, c.ld};
    gemm_one(ta, tb, alpha, ai, bi, beta, ci);
  }
}

template <int Mode, class T>
void scale_triangle(MatrixViewT<T> c, T beta) {
  auto tri = eigen_map(c).template triangularView<Mode>();
  if (beta == T(0)) {
    tri.setZero();
  } else if (beta != T(1)) {
    tri *= beta;
  }
}

template <class T>
void syrk_impl(Uplo uplo, Trans trans, T alpha, ConstMatrixViewT<T> a, T beta, MatrixViewT<T> c) {
  if (uplo == Uplo::lower) scale_triangle<Eigen::Lower>(c, beta);
  else scale_triangle<Eigen::Upper>(c, beta);
  if (alpha == T(0)) return;  // BLAS: A is not read
  const auto am = eigen_map(a);
  auto cm = eigen_map(c);
  if (uplo == Uplo::lower) {
    if (trans == Trans::no) cm.template selfadjointView<Eigen::Lower>().rankUpdate(am, alpha);
    else cm.template selfadjointView<Eigen::Lower>().rankUpdate(am.transpose(), alpha);
  } else {
    if (trans == Trans::no) cm.template selfadjointView<Eigen::Upper>().rankUpdate(am, alpha);
    else cm.template selfadjointView<Eigen::Upper>().rankUpdate(am.transpose(), alpha);
  }
}

template <class Tri, class B>
void solve(const Tri& tri, Side side, B& b) {
  if (side == Side::left) tri.solveInPlace(b);
  else tri.template solveInPlace<Eigen::OnTheRight>(b);
}

template <class T>
void trsm_impl(Side side, Uplo uplo, Trans trans, Diag diag, T alpha, ConstMatrixViewT<T> a, MatrixViewT<T> b) {
  auto bm = eigen_map(b);
  if (alpha == T(0)) {  // BLAS: X = 0, and neither A nor B is read
    bm.setZero();
    return;
  }
  if (alpha != T(1)) bm *= alpha;
  const auto am = eigen_map(a);
  // op(A) is lower when A is lower and not transposed, or upper and transposed.
  const bool op_lower = (uplo == Uplo::lower) == (trans == Trans::no);
  const bool unit = diag == Diag::unit;
  auto run = [&](const auto& opa) {
    if (op_lower && !unit) solve(opa.template triangularView<Eigen::Lower>(), side, bm);
    if (op_lower && unit) solve(opa.template triangularView<Eigen::UnitLower>(), side, bm);
    if (!op_lower && !unit) solve(opa.template triangularView<Eigen::Upper>(), side, bm);
    if (!op_lower && unit) solve(opa.template triangularView<Eigen::UnitUpper>(), side, bm);
  };
  if (trans == Trans::no) run(am);
  else run(am.transpose());
}

template <class T>
void cholesky_impl(Uplo uplo, MatrixViewT<T> a) {
  using Ref = Eigen::Ref<linalg::MatrixT<T>, 0, Eigen::OuterStride<>>;
  auto am = eigen_map(a);
  Ref ref(am);
  bool ok = true;
  if (uplo == Uplo::lower) {
    Eigen::LLT<Ref, Eigen::Lower> llt(ref);  // factorises in place
    ok = llt.info() == Eigen::Success;
  } else {
    Eigen::LLT<Ref, Eigen::Upper> llt(ref);
    ok = llt.info() == Eigen::Success;
  }
  if (!ok) throw NumericalError("matrix is not positive definite (Eigen LLT failed)");
}

template <class T>
void eigh_impl(MatrixViewT<T> a, T* w) {
  if (a.rows == 0) return;
  auto am = eigen_map(a);
  // Only the lower triangle is read, as LAPACK's dsyevd with uplo 'L'.
  const linalg::MatrixT<T> lower = am.template selfadjointView<Eigen::Lower>();
  Eigen::SelfAdjointEigenSolver<linalg::MatrixT<T>> solver(lower);
  if (solver.info() != Eigen::Success) throw NumericalError("symmetric eigensolver did not converge");
  am = solver.eigenvectors();
  Eigen::Map<linalg::VectorT<T>>(w, a.rows) = solver.eigenvalues();
}

// C = beta C with BLAS semantics: when beta is 0, C is not read.
template <class T>
void scale(MatrixViewT<T> c, T beta) {
  auto cm = eigen_map(c);
  if (beta == T(0)) cm.setZero();
  else if (beta != T(1)) cm *= beta;
}

// CSR through Eigen's own sparse-dense product: the CSR arrays are a row-major Eigen::SparseMatrix with Index
// (std::ptrdiff_t) indices, mapped without a copy.
template <class T>
void spmm_csr_impl(Trans ts, T alpha, const linalg::CsrMatrix<T>& s, ConstMatrixViewT<T> b, T beta,
                   MatrixViewT<T> c) {
  if (c.rows == 0 || c.cols == 0) return;
  using Sparse = Eigen::SparseMatrix<T, Eigen::RowMajor, Index>;
  const Eigen::Map<const Sparse> sm(s.rows, s.cols, s.nnz(), s.row_ptr.data(), s.col_idx.data(), s.values.data());
  const auto bm = eigen_map(b);
  if (ts == Trans::no) update(c, alpha, sm * bm, beta);
  else update(c, alpha, sm.transpose() * bm, beta);
}

// BSR: one dense Eigen product per stored block, on the part of the block inside the matrix.
template <class T>
void spmm_bsr_impl(Trans ts, T alpha, const linalg::BsrMatrix<T>& s, ConstMatrixViewT<T> b, T beta,
                   MatrixViewT<T> c) {
  if (c.rows == 0 || c.cols == 0) return;
  scale(c, beta);
  if (alpha == T(0)) return;  // BLAS: S and B are not read
  auto cm = eigen_map(c);
  const auto bm = eigen_map(b);
  for (Index bi = 0; bi < s.block_row_count(); ++bi) {
    const Index r0 = bi * s.block_rows, mr = std::min(s.block_rows, s.rows - r0);
    for (Index p = s.block_row_ptr[static_cast<size_t>(bi)]; p < s.block_row_ptr[static_cast<size_t>(bi) + 1]; ++p) {
      const Index c0 = s.block_col_idx[static_cast<size_t>(p)] * s.block_cols;
      const Index kc = std::min(s.block_cols, s.cols - c0);
      const linalg::ConstStridedMapT<T> blk(s.block(p), mr, kc, Eigen::OuterStride<>(s.block_rows));
      if (ts == Trans::no) cm.middleRows(r0, mr).noalias() += alpha * blk * bm.middleRows(c0, kc);
      else cm.middleRows(c0, kc).noalias() += alpha * blk.transpose() * bm.middleRows(r0, mr);
    }
  }
}

class EigenBackend final : public linalg::Backend {
 public:
  std::string name() const override { return "eigen"; }
  std::string details() const override {
    return fmt::format("Eigen {}.{}.{}; {}; {} threads", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
                       Eigen::SimdInstructionSetsInUse(), Eigen::nbThreads());
  }
  bool supports(linalg::Op, linalg::DType) const override { return true; }
  void set_threads(int threads) override {
    if (threads > 0) Eigen::setNbThreads(threads);
  }

  void gemm(Trans ta, Trans tb, double alpha, linalg::ConstMatrixView a, linalg::ConstMatrixView b, double beta,
            linalg::MatrixView c) override {
    gemm_one(ta, tb, alpha, a, b, beta, c);
  }
  void gemm(Trans ta, Trans tb, float alpha, linalg::ConstMatrixViewF a, linalg::ConstMatrixViewF b, float beta,
            linalg::MatrixViewF c) override {
    gemm_one(ta, tb, alpha, a, b, beta, c);
  }
  void gemm_batched(Trans ta, Trans tb, Index count, const BatchStrides& s, double alpha, linalg::ConstMatrixView a,
                    linalg::ConstMatrixView b, double beta, linalg::MatrixView c) override {
    gemm_batched_impl(ta, tb, count, s, alpha, a, b, beta, c);
  }
  void gemm_batched(Trans ta, Trans tb, Index count, const BatchStrides& s, float alpha, linalg::ConstMatrixViewF a,
                    linalg::ConstMatrixViewF b, float beta, linalg::MatrixViewF c) override {
    gemm_batched_impl(ta, tb, count, s, alpha, a, b, beta, c);
  }
  void syrk(Uplo uplo, Trans trans, double alpha, linalg::ConstMatrixView a, double beta,
            linalg::MatrixView c) override {
    syrk_impl(uplo, trans, alpha, a, beta, c);
  }
  void syrk(Uplo uplo, Trans trans, float alpha, linalg::ConstMatrixViewF a, float beta,
            linalg::MatrixViewF c) override {
    syrk_impl(uplo, trans, alpha, a, beta, c);
  }
  void trsm(Side side, Uplo uplo, Trans trans, Diag diag, double alpha, linalg::ConstMatrixView a,
            linalg::MatrixView b) override {
    trsm_impl(side, uplo, trans, diag, alpha, a, b);
  }
  void trsm(Side side, Uplo uplo, Trans trans, Diag diag, float alpha, linalg::ConstMatrixViewF a,
            linalg::MatrixViewF b) override {
    trsm_impl(side, uplo, trans, diag, alpha, a, b);
  }
  void cholesky(Uplo uplo, linalg::MatrixView a) override { cholesky_impl(uplo, a); }
  void cholesky(Uplo uplo, linalg::MatrixViewF a) override { cholesky_impl(uplo, a); }
  void eigh(linalg::MatrixView a, double* w) override { eigh_impl(a, w); }
  void eigh(linalg::MatrixViewF a, float* w) override { eigh_impl(a, w); }
  void spmm(Trans ts, double alpha, const linalg::CsrMatrix<double>& s, linalg::ConstMatrixView b, double beta,
            linalg::MatrixView c) override {
    spmm_csr_impl(ts, alpha, s, b, beta, c);
  }
  void spmm(Trans ts, float alpha, const linalg::CsrMatrix<float>& s, linalg::ConstMatrixViewF b, float beta,
            linalg::MatrixViewF c) override {
    spmm_csr_impl(ts, alpha, s, b, beta, c);
  }
  void spmm(Trans ts, double alpha, const linalg::BsrMatrix<double>& s, linalg::ConstMatrixView b, double beta,
            linalg::MatrixView c) override {
    spmm_bsr_impl(ts, alpha, s, b, beta, c);
  }
  void spmm(Trans ts, float alpha, const linalg::BsrMatrix<float>& s, linalg::ConstMatrixViewF b, float beta,
            linalg::MatrixViewF c) override {
    spmm_bsr_impl(ts, alpha, s, b, beta, c);
  }
};

}  // namespace

std::unique_ptr<linalg::Backend> make_eigen_backend() { return std::make_unique<EigenBackend>(); }

}  // namespace dfmp2::devices
