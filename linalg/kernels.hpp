#pragma once
// linalg::Kernels is how the method calls the linear-algebra layer: it checks that the shapes agree (so every
// backend can trust its arguments), refuses an op the backend does not support (never reroutes it), computes
// the op's cost from its shape, times the call and records it under the caller's step name.
#include <string>

#include "linalg/backend.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::linalg {

class Kernels {
 public:
  Kernels(Backend& backend, KernelLog& log) : backend_(backend), log_(log) {}

  Backend& backend() const { return backend_; }
  KernelLog& log() const { return log_; }

  void gemm(const std::string& step, Trans ta, Trans tb, double alpha, ConstMatrixView a, ConstMatrixView b,
            double beta, MatrixView c);
  void gemm_batched(const std::string& step, Trans ta, Trans tb, Index count, const BatchStrides& strides,
                    double alpha, ConstMatrixView a, ConstMatrixView b, double beta, MatrixView c);
  void syrk(const std::string& step, Uplo uplo, Trans trans, double alpha, ConstMatrixView a, double beta,
            MatrixView c);
  void trsm(const std::string& step, Side side, Uplo uplo, Trans trans, Diag diag, double alpha,
            ConstMatrixView a, MatrixView b);
  void cholesky(const std::string& step, Uplo uplo, MatrixView a);

  // Records work done outside the backend (file reads, the energy reduction) under backend "host".
  void record_host(const std::string& step, const std::string& kernel, double seconds, const Cost& cost);

 private:
  void require(Op op) const;
  Backend& backend_;
  KernelLog& log_;
};

}  // namespace dfmp2::linalg
