#pragma once
// linalg::Kernels is how the method calls the linear-algebra layer: it checks that the shapes agree (so every
// backend can trust its arguments), refuses an op the backend does not support for that element type (never
// reroutes it), computes the op's cost from its shape, times the call and records it under the caller's step.
// Every op exists for T = double (fp64) and T = float (fp32).
#include <map>
#include <string>
#include <type_traits>

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
  // UnsupportedError when the backend cannot run the mode. The mode is handed to the backend before each fp32
  // call, so a backend shared by several Kernels never runs in another's mode.
  void set_matmul_mode(MatmulMode mode);
  void set_step_matmul_mode(const std::string& step, MatmulMode mode);
  MatmulMode matmul_mode(const std::string& step) const;
  KernelLog& log() const { return log_; }

  template <class T>
  void gemm(const std::string& step, Trans ta, Trans tb, T alpha, Same<ConstMatrixViewT<T>> a, Same<ConstMatrixViewT<T>> b,
            T beta, Same<MatrixViewT<T>> c);
  template <class T>
  void gemm_batched(const std::string& step, Trans ta, Trans tb, Index count, const BatchStrides& strides, T alpha,
                    Same<ConstMatrixViewT<T>> a, Same<ConstMatrixViewT<T>> b, T beta, Same<MatrixViewT<T>> c);
  template <class T>
  void syrk(const std::string& step, Uplo uplo, Trans trans, T alpha, Same<ConstMatrixViewT<T>> a, T beta,
            Same<MatrixViewT<T>> c);
  template <class T>
  void trsm(const std::string& step, Side side, Uplo uplo, Trans trans, Diag diag, T alpha, Same<ConstMatrixViewT<T>> a,
            Same<MatrixViewT<T>> b);
  template <class T>
  void cholesky(const std::string& step, Uplo uplo, MatrixViewT<T> a);
  // Eigenvalues ascending in w (a.rows() of them); eigenvectors overwrite a.
  template <class T>
  void eigh(const std::string& step, MatrixViewT<T> a, T* w);
  // C = alpha op(S) B + beta C, S sparse (CSR or BSR), B and C dense. Checks S's structure (validate()) and the
  // shapes; logs "spmm_csr" / "spmm_bsr" with spmm_csr_cost / spmm_bsr_cost.
  template <class T>
  void spmm(const std::string& step, Trans ts, T alpha, const Same<CsrMatrix<T>>& s, Same<ConstMatrixViewT<T>> b,
            T beta, Same<MatrixViewT<T>> c);
  template <class T>
  void spmm(const std::string& step, Trans ts, T alpha, const Same<BsrMatrix<T>>& s, Same<ConstMatrixViewT<T>> b,
            T beta, Same<MatrixViewT<T>> c);
  // y = alpha op(S) x + beta y: spmm with one column (x and y contiguous, of length cols / rows of op(S)), checked
  // and logged as that spmm ("spmm_csr" / "spmm_bsr").
  template <class T>
  void spmv(const std::string& step, Trans ts, T alpha, const Same<CsrMatrix<T>>& s, const Same<T>* x, T beta,
            Same<T>* y);
  template <class T>
  void spmv(const std::string& step, Trans ts, T alpha, const Same<BsrMatrix<T>>& s, const Same<T>* x, T beta,
            Same<T>* y);

  // Records work done outside the backend (file reads, the energy reduction) under backend "host".
  void record_host(const std::string& step, const std::string& kernel, double seconds, const Cost& cost,
                   const std::string& dtype = "");

 private:
  // The backend the op runs on: the configured one, or the fallback when allowed; throws UnsupportedError.
  Backend& require(const std::string& step, Op op, DType dtype);
  std::string dtype_label(const std::string& step, DType dtype) const;
  template <class T>
  void record(const std::string& step, Op op, double seconds, const Cost& cost);
  // Logs under a kernel name that is not the op's (spmm_csr, spmm_bsr); bytes as given (not scaled).
  template <class T>
  void record(const std::string& step, const std::string& kernel, double seconds, const Cost& cost);
  Backend& backend_;
  KernelLog& log_;
  Backend* fallback_ = nullptr;
  Backend* ran_on_ = nullptr;  // who ran the current call, set by require()
  MatmulMode mode_ = MatmulMode::fp32;
  std::map<std::string, MatmulMode> step_modes_;
};

}  // namespace dfmp2::linalg
