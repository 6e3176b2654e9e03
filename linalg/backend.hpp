#pragma once
// The linear-algebra backend interface. Every backend (devices/<name>/) implements it; chemistry code never
// sees a backend's own headers, only this interface through linalg::Kernels, which checks shapes, counts
// flops and times each call before handing it to the backend.
//
// All matrices are column-major views, of double (fp64) or float (fp32). Semantics follow BLAS/LAPACK exactly:
//   gemm          C = alpha op(A) op(B) + beta C
//   gemm_batched  the same for `count` problems whose operands start `stride_*` elements apart
//   syrk          C = alpha A A^T + beta C (Trans::no) or alpha A^T A + beta C (Trans::yes); only the `uplo`
//                 triangle of C is referenced and written
//   trsm          solves op(A) X = alpha B (Side::left) or X op(A) = alpha B (Side::right); X overwrites B
//   cholesky      A = L L^T (Uplo::lower, L overwrites the lower triangle) or U^T U (upper); throws
//                 NumericalError naming the failing leading minor when A is not positive definite
//   eigh          symmetric eigendecomposition from the lower triangle of A: eigenvalues ascending in `w`,
//                 orthonormal eigenvectors overwrite A (column k belongs to w[k])
//   spmm          C = alpha op(S) B + beta C with S sparse (CsrMatrix or BsrMatrix of linalg/sparse.hpp, already
//                 validated), B and C dense; op(S) = S (Trans::no) or S^T (Trans::yes)
// With alpha == 0 the operands are not read; with beta == 0, C is not read.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linalg/errors.hpp"
#include "linalg/name_table.hpp"
#include "linalg/matrix_view.hpp"
#include "linalg/ops.hpp"
#include "linalg/sparse.hpp"

namespace dfmp2::linalg {

// How a device multiplies fp32 matrices on its Tensor Engine (linalg::Kernels chooses it per step):
//   fp32    fp32 operands, at the engine's fp32 rate;
//   bf16    operands rounded to bfloat16 (nearest even), products accumulated in fp32;
//   bf16x3  each operand split into a bf16 high part and a bf16 low part (x = hi + lo + O(2^-17 |x|)), three bf16
//           products hi*hi + hi*lo + lo*hi accumulated in fp32 (lo*lo, below fp32's rounding, is left out).
// CPU backends have fp32 only.
enum class MatmulMode { fp32, bf16, bf16x3 };
constexpr const char* matmul_mode_name(MatmulMode mode) {
  return mode == MatmulMode::fp32 ? "fp32" : mode == MatmulMode::bf16 ? "bf16" : "bf16x3";
}
// The name table (for parsers): every mode with its name.
inline const NameTable<MatmulMode>& matmul_mode_names() {
  static const NameTable<MatmulMode> t = {
      {MatmulMode::fp32, "fp32"}, {MatmulMode::bf16, "bf16"}, {MatmulMode::bf16x3, "bf16x3"}};
  return t;
}

struct BatchStrides {
  Index a = 0;  // 0 means every problem shares the same operand
  Index b = 0;
  Index c = 0;
};

// What one call would have cost on a modelled device, in seconds, by component. Device models (devices/neuron/)
// fill it in for every call; CPU backends have none. `total` is what the caller waits after the overlaps the
// model allows (DMA behind compute, host work behind queued device work), so it is not the sum of the parts.
struct ModelledTime {
  double dispatch = 0;  // host-side launch: framework dispatch and per-tensor argument handling
  double transfer = 0;  // host <-> device copies of the call's inputs and outputs
  double dma = 0;       // HBM <-> SBUF traffic not hidden behind compute
  double compute = 0;   // Tensor, Vector, Scalar and GpSimd engine time on the critical path
  double host = 0;      // host-side parts: diagonal blocks of TRSM and Cholesky, SYRK mirror, SpMM densify
  double compile = 0;   // first sight of a shape signature: compile, or load from the persistent cache
  double total = 0;     // the caller's wait, after overlaps
  double device_flops = 0;  // flops the Tensor Engine executed (its padding to tiles included)
  long launches = 0;        // device kernel launches the call made
  long compiles = 0;        // of which compiled (cold, not in the cache)
  long cache_loads = 0;     // of which loaded from the persistent compile cache

  ModelledTime& operator+=(const ModelledTime& o) {
    dispatch += o.dispatch;
    transfer += o.transfer;
    dma += o.dma;
    compute += o.compute;
    host += o.host;
    compile += o.compile;
    total += o.total;
    device_flops += o.device_flops;
    launches += o.launches;
    compiles += o.compiles;
    cache_loads += o.cache_loads;
    return *this;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // (optional) What the backend runs on, for the report: library version, kernel set, threads.
  virtual std::string details() const { return {}; }
  // What the backend can do, asked before a call rather than discovered by a failure deep inside it.
  virtual bool supports(Op op, DType dtype) const = 0;
  // Threads the backend may use for one call; 0 leaves the library's own default.
  virtual void set_threads(int threads) = 0;
  // (optional) Lets go of idle resources such as spinning worker threads, so that whatever runs next (another
  // backend) has the cores to itself. The backend takes them up again on its next call.
  virtual void release() {}
  // (optional) Device models: the modelled cost of the most recent call, or nullptr for a CPU backend.
  virtual const ModelledTime* last_modelled() const { return nullptr; }
  // (optional) Peak Tensor Engine rate in flop/s for the current operand precision, for "achieved vs peak".
  virtual double peak_flops() const { return 0; }
  // (optional) Host memory a call allocates beyond its operands and result, in copies of the arrays it touches: the
  // device models emulate the device on the host with a copy of each operand part (bf16: one, bf16x3: two) and an
  // fp32 accumulator or working copy (TRSM and Cholesky copy their matrices). The DF-MP2 memory plan counts it.
  // 0: the backend works in place (BLAS).
  virtual double working_copies(MatmulMode mode) const {
    (void)mode;
    return 0;
  }
  // (optional) The operand format of the float ops that follow (MatmulMode). A backend without a mode refuses it
  // (UnsupportedError), never ignores it.
  virtual bool supports_matmul_mode(MatmulMode mode) const { return mode == MatmulMode::fp32; }
  virtual void set_matmul_mode(MatmulMode mode) {
    if (mode != MatmulMode::fp32) {
      throw UnsupportedError("backend '" + name() + "' has no " + matmul_mode_name(mode) +
                             " arithmetic (bf16 and bf16x3 are for the device models trn1 and trn2; use precision "
                             "fp32 or fp64)");
    }
  }

  virtual void gemm(Trans ta, Trans tb, double alpha, ConstMatrixView a, ConstMatrixView b, double beta,
                    MatrixView c) = 0;
  virtual void gemm(Trans ta, Trans tb, float alpha, ConstMatrixViewF a, ConstMatrixViewF b, float beta,
                    MatrixViewF c) = 0;
  virtual void gemm_batched(Trans ta, Trans tb, Index count, const BatchStrides& strides, double alpha,
                            ConstMatrixView a, ConstMatrixView b, double beta, MatrixView c) = 0;
  virtual void gemm_batched(Trans ta, Trans tb, Index count, const BatchStrides& strides, float alpha,
                            ConstMatrixViewF a, ConstMatrixViewF b, float beta, MatrixViewF c) = 0;
  virtual void syrk(Uplo uplo, Trans trans, double alpha, ConstMatrixView a, double beta, MatrixView c) = 0;
  virtual void syrk(Uplo uplo, Trans trans, float alpha, ConstMatrixViewF a, float beta, MatrixViewF c) = 0;
  virtual void trsm(Side side, Uplo uplo, Trans trans, Diag diag, double alpha, ConstMatrixView a,
                    MatrixView b) = 0;
  virtual void trsm(Side side, Uplo uplo, Trans trans, Diag diag, float alpha, ConstMatrixViewF a,
                    MatrixViewF b) = 0;
  virtual void cholesky(Uplo uplo, MatrixView a) = 0;
  virtual void cholesky(Uplo uplo, MatrixViewF a) = 0;
  virtual void eigh(MatrixView a, double* w) = 0;
  virtual void eigh(MatrixViewF a, float* w) = 0;
  virtual void spmm(Trans ts, double alpha, const CsrMatrix<double>& s, ConstMatrixView b, double beta,
                    MatrixView c) = 0;
  virtual void spmm(Trans ts, float alpha, const CsrMatrix<float>& s, ConstMatrixViewF b, float beta,
                    MatrixViewF c) = 0;
  virtual void spmm(Trans ts, double alpha, const BsrMatrix<double>& s, ConstMatrixView b, double beta,
                    MatrixView c) = 0;
  virtual void spmm(Trans ts, float alpha, const BsrMatrix<float>& s, ConstMatrixViewF b, float beta,
                    MatrixViewF c) = 0;
};

}  // namespace dfmp2::linalg
