#pragma once
// linalg::Kernels is how the method calls the linear-algebra layer: it refuses an op the backend does not support
// for that element type (never reroutes it unless a fallback was allowed), has the backend check the shapes (so
// every backend can trust its arguments), takes the op's cost from its descriptor, times the call and records it
// under the caller's step. Every op exists for T = double (fp64) and T = float (fp32).
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <algorithm>

#include "linalg/backend.hpp"
#include "linalg/kernel_log.hpp"
#include "linalg/sparse.hpp"

namespace dfmp2::linalg {

// Operand types are not deduced (T comes from alpha, or from the view for cholesky and eigh), so a MatrixView
// passes where a ConstMatrixView is expected and mixing fp32 and fp64 operands is a compile error.
template <class T>
using Same = std::type_identity_t<T>;

class Kernels {
 public:
  Kernels(Backend& backend, KernelLog& log) : backend_(backend), log_(log) {}

  Backend& backend() const { return backend_; }

  // Explicit host fallback (input key device.host_fallback): an op or element type the backend does not support
  // runs on `host` instead of failing, and is logged as "<host> (fallback from <backend>)". nullptr (the
  // default) means no fallback: such an op is an UnsupportedError.
  void set_fallback(Backend* host) { fallback_ = host; }
  // The Tensor Engine operand format of fp32 ops on a device backend (MatmulMode): `mode` for every step but
  // those given their own with set_step_matmul_mode. Ops run in bf16 or bf16x3 are logged with that dtype. Throws
  // UnsupportedError when the backend cannot run the mode. The mode travels with each call (Backend::run), so a
  // backend shared by several Kernels never runs in another's mode.
  void set_matmul_mode(MatmulMode mode);
  void set_step_matmul_mode(const std::string& step, MatmulMode mode);
  MatmulMode matmul_mode(const std::string& step) const;
  KernelLog& log() const { return log_; }

  // Any op, as its descriptor (linalg/ops/): refused when the backend does not support it (or runs on the
  // fallback), checked, timed and logged under `step` with the descriptor's kernel name and cost.
  template <class Args>
  void run(const std::string& step, const Args& args) {
    using T = typename Args::value_type;
    Backend& on = require(step, Args::op, dtype_of<T>());
    // A fallback runs at the host backend's own precision: bf16 and bf16x3 apply to the device only.
    const MatmulMode mode = &on == &backend_ && dtype_of<T>() == DType::fp32 ? matmul_mode(step) : MatmulMode::fp32;
    Stopwatch sw;
    const CallFacet facet = on.run(args, mode);
    record(step, on, std::string(Args::kernel), dtype_of<T>(), sw.seconds(), args.cost(), facet);
  }

  // The ops with BLAS-like signatures, for readable call sites: each builds its descriptor and calls run(). An op
  // works through run() without one.
  template <class T>
  void gemm(const std::string& step, Trans ta, Trans tb, T alpha, Same<ConstMatrixViewT<T>> a,
            Same<ConstMatrixViewT<T>> b, T beta, Same<MatrixViewT<T>> c) {
    run(step, Gemm<T>{ta, tb, alpha, a, b, beta, c});
  }
  template <class T>
  void gemm_batched(const std::string& step, Trans ta, Trans tb, Index count, const BatchStrides& strides, T alpha,
                    Same<ConstMatrixViewT<T>> a, Same<ConstMatrixViewT<T>> b, T beta, Same<MatrixViewT<T>> c) {
    run(step, GemmBatched<T>{ta, tb, count, strides, alpha, a, b, beta, c});
  }
  template <class T>
  void syrk(const std::string& step, Uplo uplo, Trans trans, T alpha, Same<ConstMatrixViewT<T>> a, T beta,
            Same<MatrixViewT<T>> c) {
    run(step, Syrk<T>{uplo, trans, alpha, a, beta, c});
  }
  template <class T>
  void trsm(const std::string& step, Side side, Uplo uplo, Trans trans, Diag diag, T alpha,
            Same<ConstMatrixViewT<T>> a, Same<MatrixViewT<T>> b) {
    run(step, Trsm<T>{side, uplo, trans, diag, alpha, a, b});
  }
  template <class T>
  void cholesky(const std::string& step, Uplo uplo, MatrixViewT<T> a) {
    run(step, Cholesky<T>{uplo, a});
  }
  template <class T>
  void eigh(const std::string& step, MatrixViewT<T> a, T* w) {
    run(step, Eigh<T>{a, w});
  }
  template <class T>
  void spmm(const std::string& step, Trans ts, T alpha, const Same<CsrMatrix<T>>& s, Same<ConstMatrixViewT<T>> b,
            T beta, Same<MatrixViewT<T>> c) {
    run(step, SpmmCsr<T>{ts, alpha, s, b, beta, c});
  }
  template <class T>
  void spmm(const std::string& step, Trans ts, T alpha, const Same<BsrMatrix<T>>& s, Same<ConstMatrixViewT<T>> b,
            T beta, Same<MatrixViewT<T>> c) {
    run(step, SpmmBsr<T>{ts, alpha, s, b, beta, c});
  }
  // y = alpha op(S) x + beta y: spmm with one column (x and y contiguous, of length cols / rows of op(S)), checked
  // and logged as that spmm ("spmm_csr" / "spmm_bsr").
  template <class T>
  void spmv(const std::string& step, Trans ts, T alpha, const Same<CsrMatrix<T>>& s, const Same<T>* x, T beta,
            Same<T>* y) {
    const auto [xv, yv] = vector_views(ts, s.rows, s.cols, x, y);
    spmm<T>(step, ts, alpha, s, xv, beta, yv);
  }
  template <class T>
  void spmv(const std::string& step, Trans ts, T alpha, const Same<BsrMatrix<T>>& s, const Same<T>* x, T beta,
            Same<T>* y) {
    const auto [xv, yv] = vector_views(ts, s.rows, s.cols, x, y);
    spmm<T>(step, ts, alpha, s, xv, beta, yv);
  }

  // Records work done outside the backend (file reads, the energy reduction) under backend "host".
  void record_host(const std::string& step, const std::string& kernel, double seconds, const Cost& cost,
                   const std::string& dtype = "");

 private:
  // The backend the op runs on: the configured one, or the fallback when allowed; throws UnsupportedError.
  Backend& require(const std::string& step, Op op, DType dtype);
  std::string dtype_label(const std::string& step, DType dtype) const;
  void record(const std::string& step, const Backend& ran_on, const std::string& kernel, DType dtype, double seconds,
              const Cost& cost, const CallFacet& facet);
  // x (length cols of op(S)) and y (length rows of op(S)) as one-column views.
  template <class T>
  static std::pair<ConstMatrixViewT<T>, MatrixViewT<T>> vector_views(Trans ts, Index rows, Index cols, const T* x,
                                                                     T* y) {
    const Index m = ts == Trans::no ? rows : cols, k = ts == Trans::no ? cols : rows;
    op_check::require((k == 0 || x != nullptr) && (m == 0 || y != nullptr), "spmm", "spmv: null vector");
    return {ConstMatrixViewT<T>(x, k, 1, std::max<Index>(1, k)), MatrixViewT<T>{y, m, 1, std::max<Index>(1, m)}};
  }
  Backend& backend_;
  KernelLog& log_;
  Backend* fallback_ = nullptr;
  MatmulMode mode_ = MatmulMode::fp32;
  std::map<std::string, MatmulMode> step_modes_;
};

// alpha op(A) op(B) as a new matrix, through the backend, timed under `step`: the method's dense products (the SCF's,
// the gradient's) belong in the kernel table with the rest.
inline Matrix product(Kernels& kernels, const std::string& step, const Matrix& a, Trans ta, const Matrix& b, Trans tb,
                      double alpha = 1.0) {
  Matrix out(ta == Trans::no ? a.rows() : a.cols(), tb == Trans::no ? b.cols() : b.rows());
  kernels.gemm<double>(step, ta, tb, alpha, view(a), view(b), 0.0, view(out));
  return out;
}

}  // namespace dfmp2::linalg
