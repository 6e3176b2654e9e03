#pragma once
// dfmp2's own GEMM for CPUs with AVX-512F (namespace avx512) and for CPUs with AVX2 and FMA (namespace avx2): packed
// operands and a register-blocked micro-kernel, in the layered design of Goto and van de Geijn ("Anatomy of
// high-performance matrix multiplication", ACM TOMS 34, 2008) as BLIS and OpenBLAS use it, one source for both
// (packed_gemm_impl.hpp). Written for this project because, on the AVX-512 machines it runs on, Eigen 3.4's GEMM
// reached 42-53 % of the FMA peak (108-137 of 257 GFLOP/s on 2 cores) and Debian's OpenBLAS is held to its AVX2
// kernels there by OPENBLAS_CORETYPE (bench/README.md, "The avx512 backend").
//
// Layers: C is cut into column panels of kNc, the shared dimension into slices of kKc; each slice of B is packed
// into slivers of kNr columns (kKc x kNr, contiguous), each block of kMc rows of A into slivers of mr() rows; the
// micro-kernel multiplies one A sliver by one B sliver into an mr() x kNr tile of C held in 3 x kNr vector
// registers (AVX-512: a tile of 24 x 8 doubles or 48 x 8 floats; AVX2: 12 x 4 doubles or 24 x 4 floats). Partial tiles go through a small buffer; the packing
// pads the slivers with zeros.
//
// All functions follow BLAS semantics: C = alpha op(A) op(B) + beta C with op = transpose or not; when beta is 0
// C is not read (it may hold NaN), when alpha is 0 or k is 0 A and B are not read.
#include "linalg/matrix_view.hpp"

// In each namespace (avx512, avx2), for its instruction set:
//
// build_stamp(): when the kernels were compiled (a change of them is a reason to measure the backends again,
// devices/calibration.hpp).
//
// gemm(): one GEMM on `threads` OpenMP threads (1 inside a caller's parallel region): B's slices are packed once and
// shared, and the blocks of A's rows are the tasks the threads take in turn.
//
// syrk(): the `lower` (or upper) triangle of C(n x n) = alpha op(A) op(A)^T + beta C, op(A) = A (n x k) or A^T
// (A k x n), as GEMMs over blocks of the triangle: off-diagonal blocks directly, diagonal blocks into a buffer whose
// triangle is copied (the other triangle of C is neither read nor written).
//
// trsm(): triangular solve, BLAS semantics: op(A) X = alpha B (left) or X op(A) = alpha B (right), X overwriting B;
// A's `lower` (or upper) triangle is read, its diagonal taken as ones when `unit`. Blocked: a 192 x 192 diagonal
// block is solved with Eigen (threads over B's columns or rows), and the rest of B is updated with the packed GEMM,
// which does all but 192/order of the flops.
//
// Callers check the CPU first (devices::avx512_available(), avx2_available()): these use its instructions.
#define DFMP2_PACKED_KERNELS                                                                                         \
  const char* build_stamp();                                                                                         \
  template <class T>                                                                                                 \
  void gemm(bool trans_a, bool trans_b, T alpha, linalg::ConstMatrixViewT<T> a, linalg::ConstMatrixViewT<T> b,       \
            T beta, linalg::MatrixViewT<T> c, int threads);                                                          \
  template <class T>                                                                                                 \
  void syrk(bool lower, bool trans, T alpha, linalg::ConstMatrixViewT<T> a, T beta, linalg::MatrixViewT<T> c,        \
            int threads);                                                                                            \
  template <class T>                                                                                                 \
  void trsm(bool left, bool lower, bool trans, bool unit, T alpha, linalg::ConstMatrixViewT<T> a,                    \
            linalg::MatrixViewT<T> b, int threads);

namespace dfmp2::devices::avx512 {
DFMP2_PACKED_KERNELS
}  // namespace dfmp2::devices::avx512
namespace dfmp2::devices::avx2 {
DFMP2_PACKED_KERNELS
}  // namespace dfmp2::devices::avx2
#undef DFMP2_PACKED_KERNELS
