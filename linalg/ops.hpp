#pragma once
// The operations of the linear-algebra layer and their options, named as BLAS and LAPACK name them.
#include <array>
#include <string_view>

namespace dfmp2::linalg {

// spmm: C = alpha op(S) B + beta C with S sparse (CSR or BSR, linalg/sparse.hpp); SpMV is SpMM with one column.
enum class Op { gemm, gemm_batched, syrk, trsm, cholesky, eigh, spmm };
inline constexpr std::array kAllOps = {Op::gemm,     Op::gemm_batched, Op::syrk, Op::trsm,
                                       Op::cholesky, Op::eigh,         Op::spmm};

// Element type of a kernel's operands.
enum class DType { fp64, fp32 };
inline constexpr std::array kAllDTypes = {DType::fp64, DType::fp32};
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() { return DType::fp64; }
template <>
constexpr DType dtype_of<float>() { return DType::fp32; }

enum class Trans { no, yes };
enum class Uplo { lower, upper };
enum class Side { left, right };
enum class Diag { non_unit, unit };

constexpr std::string_view op_name(Op op) {
  switch (op) {
    case Op::gemm: return "gemm";
    case Op::gemm_batched: return "gemm_batched";
    case Op::syrk: return "syrk";
    case Op::trsm: return "trsm";
    case Op::cholesky: return "cholesky";
    case Op::eigh: return "eigh";
    case Op::spmm: return "spmm";
  }
  return "?";
}

constexpr std::string_view dtype_name(DType t) { return t == DType::fp64 ? "fp64" : "fp32"; }

}  // namespace dfmp2::linalg
