#include "devices/openblas/openblas_backend.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <lapacke.h>

#include "linalg/errors.hpp"

// Declared by OpenBLAS's cblas.h in most builds; repeated so the file does not depend on which cblas.h the
// include path finds first.
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_config(void);
extern "C" char* openblas_get_corename(void);

namespace dfmp2::devices {
namespace {

using linalg::ConstMatrixView;
using linalg::Index;
using linalg::MatrixView;

CBLAS_TRANSPOSE cblas(linalg::Trans t) { return t == linalg::Trans::no ? CblasNoTrans : CblasTrans; }
CBLAS_UPLO cblas(linalg::Uplo u) { return u == linalg::Uplo::lower ? CblasLower : CblasUpper; }
CBLAS_SIDE cblas(linalg::Side s) { return s == linalg::Side::left ? CblasLeft : CblasRight; }
CBLAS_DIAG cblas(linalg::Diag d) { return d == linalg::Diag::unit ? CblasUnit : CblasNonUnit; }

Index inner(const ConstMatrixView& a, linalg::Trans t) { return t == linalg::Trans::no ? a.cols : a.rows; }

class OpenBlasBackend final : public linalg::Backend {
 public:
  std::string name() const override { return "openblas"; }
  // The kernel set matters: OpenBLAS picks it at run time from the CPU (or OPENBLAS_CORETYPE), and a CPU it does
  // not recognise gets generic kernels several times slower. Saying which one ran makes timings interpretable.
  std::string details() const override {
    return fmt::format("{}; kernels {}; {} threads", openblas_get_config(), openblas_get_corename(),
                       openblas_get_num_threads());
  }
  bool supports(linalg::Op) const override { return true; }
  void set_threads(int threads) override {
    if (threads > 0) openblas_set_num_threads(threads);
  }

  void gemm(linalg::Trans ta, linalg::Trans tb, double alpha, ConstMatrixView a, ConstMatrixView b, double beta,
            MatrixView c) override {
    if (c.rows == 0 || c.cols == 0) return;
    cblas_dgemm(CblasColMajor, cblas(ta), cblas(tb), c.rows, c.cols, inner(a, ta), alpha, a.data, a.ld, b.data,
                b.ld, beta, c.data, c.ld);
  }

  // OpenBLAS 0.3.21 has no batched GEMM; the problems here are large enough that threading each one works.
  void gemm_batched(linalg::Trans ta, linalg::Trans tb, Index count, const linalg::BatchStrides& s, double alpha,
                    ConstMatrixView a, ConstMatrixView b, double beta, MatrixView c) override {
    if (c.rows == 0 || c.cols == 0) return;
    for (Index i = 0; i < count; ++i) {
      cblas_dgemm(CblasColMajor, cblas(ta), cblas(tb), c.rows, c.cols, inner(a, ta), alpha, a.data + i * s.a, a.ld,
                  b.data + i * s.b, b.ld, beta, c.data + i * s.c, c.ld);
    }
  }

  void syrk(linalg::Uplo uplo, linalg::Trans trans, double alpha, ConstMatrixView a, double beta,
            MatrixView c) override {
    if (c.rows == 0) return;
    const Index k = trans == linalg::Trans::no ? a.cols : a.rows;
    cblas_dsyrk(CblasColMajor, cblas(uplo), cblas(trans), c.rows, k, alpha, a.data, a.ld, beta, c.data, c.ld);
  }

  void trsm(linalg::Side side, linalg::Uplo uplo, linalg::Trans trans, linalg::Diag diag, double alpha,
            ConstMatrixView a, MatrixView b) override {
    if (b.rows == 0 || b.cols == 0) return;
    cblas_dtrsm(CblasColMajor, cblas(side), cblas(uplo), cblas(trans), cblas(diag), b.rows, b.cols, alpha, a.data,
                a.ld, b.data, b.ld);
  }

  void cholesky(linalg::Uplo uplo, MatrixView a) override {
    if (a.rows == 0) return;
    const lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, uplo == linalg::Uplo::lower ? 'L' : 'U',
                                           static_cast<lapack_int>(a.rows), a.data, static_cast<lapack_int>(a.ld));
    if (info > 0) {
      throw NumericalError(fmt::format("matrix is not positive definite (leading minor {} of {})", info, a.rows));
    }
    if (info < 0) throw std::logic_error(fmt::format("LAPACKE_dpotrf: argument {} is invalid", -info));
  }
};

}  // namespace

std::unique_ptr<linalg::Backend> make_openblas_backend() { return std::make_unique<OpenBlasBackend>(); }

}  // namespace dfmp2::devices
