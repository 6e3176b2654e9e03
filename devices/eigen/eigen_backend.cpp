#include "devices/eigen/eigen_backend.hpp"

#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>

#include <omp.h>

#include <algorithm>
#include <vector>

#include "linalg/errors.hpp"

namespace dfmp2::devices {
namespace {

using linalg::MatmulMode;
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

// Many small products (the SCF's K build: one 384 x 384 x 80 product per fitting function) lose much of their
// time to Eigen's per-call thread start-up, so when there are several per thread each thread takes whole
// problems and runs them single-threaded.
template <class T>
void gemm_batched_impl(const linalg::GemmBatched<T>& g) {
  auto one = [&](Index i) {
    const linalg::Gemm<T> p = g.problem(i);
    gemm_one(p.ta, p.tb, p.alpha, p.a, p.b, p.beta, p.c);
  };
  const int threads = Eigen::nbThreads();
  if (threads > 1 && g.count >= 2 * threads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (Index i = 0; i < g.count; ++i) one(i);
  } else {
    for (Index i = 0; i < g.count; ++i) one(i);
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

// Eigen 3.4 threads only its general matrix product; its rank update and triangular solve run on one core. The
// two ops below cut their work into independent pieces and hand those to OpenMP threads. Inside a parallel
// region Eigen's own products stay single-threaded (it does not nest), so each piece runs on its thread.
constexpr Index kMinParallelOrder = 256;  // below this the pieces are too small to pay for the threads

// Lower (or upper) triangle of C += alpha op(A) op(A)^T in column panels: panel [j0, j1) is its diagonal block
// (a rank update of op(A) rows j0..j1) plus the rectangle below (or above) it (a GEMM). The lower panels hold
// less work than the upper ones, hence the dynamic schedule over several panels per thread.
template <int Mode, class T, class OpA>
void syrk_panels(T alpha, const OpA& opa, MatrixViewT<T> c, int threads) {
  const Index n = c.rows;
  const Index panel = std::max<Index>(64, (n + 4 * threads - 1) / (4 * threads));
  const Index panels = (n + panel - 1) / panel;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (Index p = 0; p < panels; ++p) {
    const Index j0 = p * panel, nb = std::min(panel, n - j0);
    auto cm = eigen_map(c);
    auto diag = cm.block(j0, j0, nb, nb);
    diag.template selfadjointView<Mode>().rankUpdate(opa.middleRows(j0, nb), alpha);
    if (Mode == Eigen::Lower) {
      const Index below = n - j0 - nb;
      if (below > 0)
        cm.block(j0 + nb, j0, below, nb).noalias() += alpha * opa.middleRows(j0 + nb, below) * opa.middleRows(j0, nb).transpose();
    } else if (j0 > 0) {
      cm.block(0, j0, j0, nb).noalias() += alpha * opa.middleRows(0, j0) * opa.middleRows(j0, nb).transpose();
    }
  }
}

// C += alpha op(A) op(A)^T with k much larger than n (the SCF's K = sum over 148480 columns of a 384 x 384
// product): column panels of C would give the threads a handful of unequal pieces, so instead each thread
// takes a slice of the k columns into a private triangle, and the triangles are summed into C.
template <int Mode, class T, class OpA>
void syrk_split_k(T alpha, const OpA& opa, MatrixViewT<T> c, int threads) {
  const Index n = c.rows, k = opa.cols();
  std::vector<linalg::MatrixT<T>> parts(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const Index k0 = k * t / threads, k1 = k * (t + 1) / threads;
    auto& part = parts[static_cast<size_t>(t)];
    part.setZero(n, n);
    part.template selfadjointView<Mode>().rankUpdate(opa.middleCols(k0, k1 - k0), alpha);
  }
  auto cm = eigen_map(c);
  for (const auto& part : parts) cm.template triangularView<Mode>() += part;
}

template <int Mode, class T, class OpA>
void syrk_update(T alpha, const OpA& opa, MatrixViewT<T> c) {
  const int threads = Eigen::nbThreads();
  const Index n = c.rows, k = opa.cols();
  // The private triangles cost threads * n^2 elements: allowed up to 64 MiB in all.
  const bool private_fits = double(threads) * double(n) * double(n) * sizeof(T) <= 64.0 * 1024 * 1024;
  if (threads > 1 && k >= 8 * n && k >= kMinParallelOrder && private_fits) {
    syrk_split_k<Mode>(alpha, opa, c, threads);
  } else if (threads > 1 && n >= kMinParallelOrder) {
    syrk_panels<Mode>(alpha, opa, c, threads);
  } else {
    eigen_map(c).template selfadjointView<Mode>().rankUpdate(opa, alpha);
  }
}

template <class T>
void syrk_impl(Uplo uplo, Trans trans, T alpha, ConstMatrixViewT<T> a, T beta, MatrixViewT<T> c) {
  // Empty operands may have null data: Eigen binds references to their first element, so they are not mapped.
  if (c.rows == 0) return;
  if (uplo == Uplo::lower) scale_triangle<Eigen::Lower>(c, beta);
  else scale_triangle<Eigen::Upper>(c, beta);
  const Index k = trans == Trans::no ? a.cols : a.rows;
  if (alpha == T(0) || k == 0) return;  // BLAS: A is not read
  const auto am = eigen_map(a);
  if (uplo == Uplo::lower) {
    if (trans == Trans::no) syrk_update<Eigen::Lower>(alpha, am, c);
    else syrk_update<Eigen::Lower>(alpha, am.transpose(), c);
  } else {
    if (trans == Trans::no) syrk_update<Eigen::Upper>(alpha, am, c);
    else syrk_update<Eigen::Upper>(alpha, am.transpose(), c);
  }
}

// op(A) X = B (left) or X op(A) = B (right), in place. The columns of B (left) or its rows (right) are
// independent right-hand sides, so large B is cut into slabs solved on separate threads.
template <class Tri, class B>
void solve(const Tri& tri, Side side, B& b) {
  const int threads = Eigen::nbThreads();
  const Index rhs = side == Side::left ? b.cols() : b.rows();
  const Index order = side == Side::left ? b.rows() : b.cols();
  if (threads <= 1 || order < kMinParallelOrder / 4 || rhs < 2 * kMinParallelOrder) {
    if (side == Side::left) tri.solveInPlace(b);
    else tri.template solveInPlace<Eigen::OnTheRight>(b);
    return;
  }
  const Index slab = std::max<Index>(kMinParallelOrder, (rhs + 4 * threads - 1) / (4 * threads));
  const Index slabs = (rhs + slab - 1) / slab;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (Index p = 0; p < slabs; ++p) {
    const Index r0 = p * slab, nr = std::min(slab, rhs - r0);
    if (side == Side::left) {
      auto part = b.middleCols(r0, nr);
      tri.solveInPlace(part);
    } else {
      auto part = b.middleRows(r0, nr);
      tri.template solveInPlace<Eigen::OnTheRight>(part);
    }
  }
}

template <class T>
void trsm_impl(Side side, Uplo uplo, Trans trans, Diag diag, T alpha, ConstMatrixViewT<T> a, MatrixViewT<T> b) {
  if (b.rows == 0 || b.cols == 0) return;  // nothing to solve; empty views may have null data (see syrk_impl)
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

class EigenBackend final : public linalg::BackendOf<EigenBackend> {
 public:
  std::string name() const override { return "eigen"; }
  std::string details() const override {
    return fmt::format("Eigen {}.{}.{}; {}; {} threads", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
                       Eigen::SimdInstructionSetsInUse(), Eigen::nbThreads());
  }
  bool openmp_threads() const override { return true; }
  void set_threads(int threads) override {
    if (threads > 0) Eigen::setNbThreads(threads);
  }

  // Every op in both element types (MatmulMode: fp32 only, which BackendOf ensures).
  template <class T>
  void exec(const linalg::Gemm<T>& g, MatmulMode) { gemm_one(g.ta, g.tb, g.alpha, g.a, g.b, g.beta, g.c); }
  template <class T>
  void exec(const linalg::GemmBatched<T>& g, MatmulMode) { gemm_batched_impl(g); }
  template <class T>
  void exec(const linalg::Syrk<T>& s, MatmulMode) { syrk_impl(s.uplo, s.trans, s.alpha, s.a, s.beta, s.c); }
  template <class T>
  void exec(const linalg::Trsm<T>& t, MatmulMode) { trsm_impl(t.side, t.uplo, t.trans, t.diag, t.alpha, t.a, t.b); }
  template <class T>
  void exec(const linalg::Cholesky<T>& c, MatmulMode) { cholesky_impl(c.uplo, c.a); }
  template <class T>
  void exec(const linalg::Eigh<T>& e, MatmulMode) { eigh_impl(e.a, e.w); }
  template <class T>
  void exec(const linalg::SpmmCsr<T>& p, MatmulMode) { spmm_csr_impl(p.ts, p.alpha, p.s, p.b, p.beta, p.c); }
  template <class T>
  void exec(const linalg::SpmmBsr<T>& p, MatmulMode) { spmm_bsr_impl(p.ts, p.alpha, p.s, p.b, p.beta, p.c); }
};

}  // namespace

std::unique_ptr<linalg::Backend> make_eigen_backend() { return std::make_unique<EigenBackend>(); }

}  // namespace dfmp2::devices
