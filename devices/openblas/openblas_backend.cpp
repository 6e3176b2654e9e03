#include "devices/openblas/openblas_backend.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <lapacke.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "linalg/errors.hpp"

// Declared by OpenBLAS's cblas.h in most builds; repeated so the file does not depend on which cblas.h the
// include path finds first.
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_config(void);
extern "C" char* openblas_get_corename(void);
// Stops OpenBLAS's worker threads; OpenBLAS starts them again on the next threaded call. Not in cblas.h.
extern "C" int blas_thread_shutdown_(void);
// Reads OpenBLAS's environment settings again (it read them when it was loaded). Not in cblas.h.
extern "C" void openblas_read_env(void);

namespace dfmp2::devices {
namespace {

using linalg::ConstMatrixViewT;
using linalg::Index;
using linalg::MatrixViewT;

CBLAS_TRANSPOSE cblas(linalg::Trans t) { return t == linalg::Trans::no ? CblasNoTrans : CblasTrans; }
CBLAS_UPLO cblas(linalg::Uplo u) { return u == linalg::Uplo::lower ? CblasLower : CblasUpper; }
CBLAS_SIDE cblas(linalg::Side s) { return s == linalg::Side::left ? CblasLeft : CblasRight; }
CBLAS_DIAG cblas(linalg::Diag d) { return d == linalg::Diag::unit ? CblasUnit : CblasNonUnit; }

// One name per BLAS/LAPACK routine for both precisions, so the ops below are written once.
void xgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, Index m, Index n, Index k, double alpha, const double* a, Index lda,
           const double* b, Index ldb, double beta, double* c, Index ldc) {
  cblas_dgemm(CblasColMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void xgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, Index m, Index n, Index k, float alpha, const float* a, Index lda,
           const float* b, Index ldb, float beta, float* c, Index ldc) {
  cblas_sgemm(CblasColMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void xsyrk(CBLAS_UPLO u, CBLAS_TRANSPOSE t, Index n, Index k, double alpha, const double* a, Index lda, double beta,
           double* c, Index ldc) {
  cblas_dsyrk(CblasColMajor, u, t, n, k, alpha, a, lda, beta, c, ldc);
}
void xsyrk(CBLAS_UPLO u, CBLAS_TRANSPOSE t, Index n, Index k, float alpha, const float* a, Index lda, float beta,
           float* c, Index ldc) {
  cblas_ssyrk(CblasColMajor, u, t, n, k, alpha, a, lda, beta, c, ldc);
}
void xtrsm(CBLAS_SIDE s, CBLAS_UPLO u, CBLAS_TRANSPOSE t, CBLAS_DIAG d, Index m, Index n, double alpha,
           const double* a, Index lda, double* b, Index ldb) {
  cblas_dtrsm(CblasColMajor, s, u, t, d, m, n, alpha, a, lda, b, ldb);
}
void xtrsm(CBLAS_SIDE s, CBLAS_UPLO u, CBLAS_TRANSPOSE t, CBLAS_DIAG d, Index m, Index n, float alpha, const float* a,
           Index lda, float* b, Index ldb) {
  cblas_strsm(CblasColMajor, s, u, t, d, m, n, alpha, a, lda, b, ldb);
}
lapack_int xpotrf(char uplo, lapack_int n, double* a, lapack_int lda) {
  return LAPACKE_dpotrf(LAPACK_COL_MAJOR, uplo, n, a, lda);
}
lapack_int xpotrf(char uplo, lapack_int n, float* a, lapack_int lda) {
  return LAPACKE_spotrf(LAPACK_COL_MAJOR, uplo, n, a, lda);
}
lapack_int xsyevd(lapack_int n, double* a, lapack_int lda, double* w) {
  return LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', n, a, lda, w);
}
lapack_int xsyevd(lapack_int n, float* a, lapack_int lda, float* w) {
  return LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'V', 'L', n, a, lda, w);
}

template <class T>
Index inner(const ConstMatrixViewT<T>& a, linalg::Trans t) { return t == linalg::Trans::no ? a.cols : a.rows; }

// ---- BLAS semantics that not every OpenBLAS kernel set keeps. The reference BLAS reads neither A nor B when alpha
// is 0 (or the shared dimension is 0), and does not read C when beta is 0, so NaN or Inf there must not reach the
// result. OpenBLAS 0.3.21 picks its kernels at run time from the CPU, and its SkylakeX and Cooperlake small-matrix
// GEMM kernels (AVX-512 CPUs: Intel Skylake-SP and later, AMD Zen 4 and 5) multiply by alpha = 0 after reading A and
// B, so NaN propagates. Which kernel set a user gets is not ours to choose, so alpha = 0 and k = 0 are handled here,
// before OpenBLAS is called, whatever the kernel set. beta = 0 is left to OpenBLAS: every kernel set clears C then
// (its beta kernels store zeros), as the conformance table checks with NaN in C under each kernel set the CPU runs
// (label coretypes) and as the Zen 4 user's run of it under Cooperlake showed; clearing C here as well cost up to
// 2.2x on a memory-bound product (bench/README.md "OpenBLAS's zero rules").

// The columns of C in `uplo` (all of C when `full`), scaled by beta; with beta = 0 set to 0 without being read.
template <class T>
void scale_columns(MatrixViewT<T> c, T beta, bool full, linalg::Uplo uplo = linalg::Uplo::lower) {
  if (beta == T(1)) return;
  for (Index j = 0; j < c.cols; ++j) {
    T* cj = c.data + j * c.ld;
    const Index begin = full || uplo == linalg::Uplo::upper ? 0 : j;
    const Index end = full || uplo == linalg::Uplo::lower ? c.rows : std::min(c.rows, j + 1);
    for (Index i = begin; i < end; ++i) cj[i] = beta == T(0) ? T(0) : beta * cj[i];
  }
}

template <class T>
void gemm_impl(linalg::Trans ta, linalg::Trans tb, T alpha, ConstMatrixViewT<T> a, ConstMatrixViewT<T> b, T beta,
               MatrixViewT<T> c) {
  if (c.rows == 0 || c.cols == 0) return;
  const Index k = inner(a, ta);
  if (alpha == T(0) || k == 0) return scale_columns(c, beta, true);  // A and B are not read
  xgemm(cblas(ta), cblas(tb), c.rows, c.cols, k, alpha, a.data, a.ld, b.data, b.ld, beta, c.data, c.ld);
}

// OpenBLAS 0.3.21 has no batched GEMM; the problems here are large enough that threading each one works.
template <class T>
void gemm_batched_impl(const linalg::GemmBatched<T>& g) {
  for (Index i = 0; i < g.count; ++i) {
    const linalg::Gemm<T> p = g.problem(i);
    gemm_impl(p.ta, p.tb, p.alpha, p.a, p.b, p.beta, p.c);
  }
}

template <class T>
void syrk_impl(linalg::Uplo uplo, linalg::Trans trans, T alpha, ConstMatrixViewT<T> a, T beta, MatrixViewT<T> c) {
  if (c.rows == 0) return;
  const Index k = trans == linalg::Trans::no ? a.cols : a.rows;
  if (alpha == T(0) || k == 0) return scale_columns(c, beta, false, uplo);  // A is not read
  xsyrk(cblas(uplo), cblas(trans), c.rows, k, alpha, a.data, a.ld, beta, c.data, c.ld);
}

template <class T>
void trsm_impl(linalg::Side side, linalg::Uplo uplo, linalg::Trans trans, linalg::Diag diag, T alpha,
               ConstMatrixViewT<T> a, MatrixViewT<T> b) {
  if (b.rows == 0 || b.cols == 0) return;
  if (alpha == T(0)) return scale_columns(b, T(0), true);  // B = 0; neither A nor B is read
  xtrsm(cblas(side), cblas(uplo), cblas(trans), cblas(diag), b.rows, b.cols, alpha, a.data, a.ld, b.data, b.ld);
}

template <class T>
void cholesky_impl(linalg::Uplo uplo, MatrixViewT<T> a) {
  if (a.rows == 0) return;
  const lapack_int info = xpotrf(uplo == linalg::Uplo::lower ? 'L' : 'U', static_cast<lapack_int>(a.rows), a.data,
                                 static_cast<lapack_int>(a.ld));
  if (info > 0) {
    throw NumericalError(fmt::format("matrix is not positive definite (leading minor {} of {})", info, a.rows));
  }
  if (info < 0) throw std::logic_error(fmt::format("LAPACKE potrf: argument {} is invalid", -info));
}

template <class T>
void eigh_impl(MatrixViewT<T> a, T* w) {
  if (a.rows == 0) return;
  const lapack_int info = xsyevd(static_cast<lapack_int>(a.rows), a.data, static_cast<lapack_int>(a.ld), w);
  if (info > 0) throw NumericalError(fmt::format("symmetric eigensolver (syevd) did not converge (info {})", info));
  if (info < 0) throw std::logic_error(fmt::format("LAPACKE syevd: argument {} is invalid", -info));
}

// ---- SpMM. OpenBLAS has no sparse routines: CSR is plain loops threaded with OpenMP (as many threads as OpenBLAS
// is set to use), BSR is one GEMM per stored block.

// Below this much work (stored entries and rows, times columns of B) a CSR product runs on one thread.
constexpr Index kSpmmParallelWork = 1 << 15;

template <class T>
void spmm_csr_impl(linalg::Trans ts, T alpha, const linalg::CsrMatrix<T>& s, ConstMatrixViewT<T> b, T beta,
                   MatrixViewT<T> c) {
  const Index m = c.rows, n = c.cols;
  if (m == 0 || n == 0) return;
  if (alpha == T(0)) {  // BLAS: S and B are not read
    scale_columns(c, beta, true);
    return;
  }
  const int threads = std::max(1, openblas_get_num_threads());
  const bool parallel = threads > 1 && (s.nnz() + s.rows) * n >= kSpmmParallelWork;
  const Index* rp = s.row_ptr.data();
  const Index* ci = s.col_idx.data();
  const T* v = s.values.data();
  if (ts == linalg::Trans::no) {
    // Row i of C from row i of S: threads own disjoint rows of C.
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads) if (parallel)
    for (Index i = 0; i < m; ++i) {
      const Index begin = rp[i], end = rp[i + 1];
      for (Index j = 0; j < n; ++j) {
        const T* bj = b.data + j * b.ld;
        T sum = 0;
        for (Index p = begin; p < end; ++p) sum += v[p] * bj[ci[p]];
        T& cij = c.data[i + j * c.ld];
        cij = beta == T(0) ? alpha * sum : alpha * sum + beta * cij;
      }
    }
  } else {
    // C = alpha S^T B + beta C scatters row i of S into C: threads own disjoint columns of C, so no two threads
    // write the same element (one column, as in SpMV, runs on one thread).
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel && n > 1)
    for (Index j = 0; j < n; ++j) {
      T* cj = c.data + j * c.ld;
      const T* bj = b.data + j * b.ld;
      if (beta == T(0)) std::fill(cj, cj + m, T(0));
      else if (beta != T(1))
        for (Index i = 0; i < m; ++i) cj[i] *= beta;
      for (Index i = 0; i < s.rows; ++i) {
        const Index begin = rp[i], end = rp[i + 1];
        if (begin == end) continue;
        const T x = alpha * bj[i];
        for (Index p = begin; p < end; ++p) cj[ci[p]] += v[p] * x;
      }
    }
  }
}

// BSR: one GEMM per stored block, on the part of the block inside the matrix, accumulated into the C rows of its
// block row (Trans::no) or block column (Trans::yes); blocks that were all zero are not stored, so never computed.
template <class T>
void spmm_bsr_impl(linalg::Trans ts, T alpha, const linalg::BsrMatrix<T>& s, ConstMatrixViewT<T> b, T beta,
                   MatrixViewT<T> c) {
  const Index n = c.cols;
  if (c.rows == 0 || n == 0) return;
  scale_columns(c, beta, true);
  if (alpha == T(0)) return;  // BLAS: S and B are not read
  for (Index bi = 0; bi < s.block_row_count(); ++bi) {
    const Index r0 = bi * s.block_rows, mr = std::min(s.block_rows, s.rows - r0);
    for (Index p = s.block_row_ptr[static_cast<size_t>(bi)]; p < s.block_row_ptr[static_cast<size_t>(bi) + 1]; ++p) {
      const Index c0 = s.block_col_idx[static_cast<size_t>(p)] * s.block_cols;
      const Index kc = std::min(s.block_cols, s.cols - c0);
      if (ts == linalg::Trans::no) {
        xgemm(CblasNoTrans, CblasNoTrans, mr, n, kc, alpha, s.block(p), s.block_rows, b.data + c0, b.ld, T(1),
              c.data + r0, c.ld);
      } else {
        xgemm(CblasTrans, CblasNoTrans, kc, n, mr, alpha, s.block(p), s.block_rows, b.data + r0, b.ld, T(1),
              c.data + c0, c.ld);
      }
    }
  }
}

class OpenBlasBackend final : public linalg::BackendOf<OpenBlasBackend> {
 public:
  std::string name() const override { return "openblas"; }
  // The kernel set matters: OpenBLAS picks it at run time from the CPU (or OPENBLAS_CORETYPE), and a CPU it does
  // not recognise gets generic kernels several times slower. Saying which one ran makes timings interpretable.
  std::string details() const override {
    return fmt::format("{}; kernels {}; {} threads", openblas_get_config(), openblas_get_corename(),
                       openblas_get_num_threads());
  }
  void set_threads(int threads) override {
    if (threads > 0) openblas_set_num_threads(threads);
  }
  // Idle OpenBLAS workers spin for a long while after each call; on a small machine they starve the OpenMP
  // threads of the next backend (measured: Eigen's GEMMs 20x slower right after an OpenBLAS run).
  void release() override { blas_thread_shutdown_(); }

  // Every op in both element types (MatmulMode: fp32 only, which BackendOf ensures).
  template <class T>
  void exec(const linalg::Gemm<T>& g, linalg::MatmulMode) { gemm_impl(g.ta, g.tb, g.alpha, g.a, g.b, g.beta, g.c); }
  template <class T>
  void exec(const linalg::GemmBatched<T>& g, linalg::MatmulMode) { gemm_batched_impl(g); }
  template <class T>
  void exec(const linalg::Syrk<T>& s, linalg::MatmulMode) { syrk_impl(s.uplo, s.trans, s.alpha, s.a, s.beta, s.c); }
  template <class T>
  void exec(const linalg::Trsm<T>& t, linalg::MatmulMode) {
    trsm_impl(t.side, t.uplo, t.trans, t.diag, t.alpha, t.a, t.b);
  }
  template <class T>
  void exec(const linalg::Cholesky<T>& c, linalg::MatmulMode) { cholesky_impl(c.uplo, c.a); }
  template <class T>
  void exec(const linalg::Eigh<T>& e, linalg::MatmulMode) { eigh_impl(e.a, e.w); }
  template <class T>
  void exec(const linalg::SpmmCsr<T>& p, linalg::MatmulMode) { spmm_csr_impl(p.ts, p.alpha, p.s, p.b, p.beta, p.c); }
  template <class T>
  void exec(const linalg::SpmmBsr<T>& p, linalg::MatmulMode) { spmm_bsr_impl(p.ts, p.alpha, p.s, p.b, p.beta, p.c); }
};

// OpenBLAS's idle workers spin (yielding) for 2^28 cycles after each call before they sleep. Beside dfmp2's own
// OpenMP threads, which run the elementwise loops and gathers between the products, a spinning worker is one thread
// too many on a core: on 2 cores the SCF's exchange ran at half speed for stretches of a run, at random ((H2O)16
// cc-pVDZ on Zen 4: 1.9 s per iteration against 1.0 s, in about half of the runs). So, unless the user set
// OPENBLAS_THREAD_TIMEOUT, the workers sleep after OpenBLAS's shortest spin (2^4 cycles; waking them costs
// microseconds per call): the setting is read again and the workers restarted with it. The variable is removed
// again, so that nothing the program starts inherits it.
void short_worker_spin() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr) return;
    ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    openblas_read_env();
    ::unsetenv("OPENBLAS_THREAD_TIMEOUT");
    blas_thread_shutdown_();
  });
}

}  // namespace

std::unique_ptr<linalg::Backend> make_openblas_backend() {
  short_worker_spin();
  return std::make_unique<OpenBlasBackend>();
}

std::string openblas_kernel_set() { return openblas_get_corename(); }

}  // namespace dfmp2::devices
