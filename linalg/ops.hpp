#pragma once
// The operations of the linear-algebra layer and their options, named as BLAS and LAPACK name them.
#include <array>
#include <string_view>

namespace dfmp2::linalg {

enum class Op { gemm, gemm_batched, syrk, trsm, cholesky };
inline constexpr std::array kAllOps = {Op::gemm, Op::gemm_batched, Op::syrk, Op::trsm, Op::cholesky};

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
  }
  return "?";
}

}  // namespace dfmp2::linalg
