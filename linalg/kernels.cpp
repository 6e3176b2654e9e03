#include "linalg/kernels.hpp"

#include <fmt/format.h>

#include "linalg/errors.hpp"

namespace dfmp2::linalg {
namespace {

// A shape mismatch is a bug in the caller, not bad user input: it is reported as a logic error.
void check(bool ok, Op op, const std::string& what) {
  if (!ok) throw std::logic_error(fmt::format("{}: {}", op_name(op), what));
}

void check_view(const ConstMatrixView& v, Op op, const char* name) {
  check(v.rows >= 0 && v.cols >= 0, op, fmt::format("{} has a negative dimension", name));
  check(v.ld >= std::max<Index>(1, v.rows), op, fmt::format("{} leading dimension {} < rows {}", name, v.ld, v.rows));
}

Index rows_of(const ConstMatrixView& v, Trans t) { return t == Trans::no ? v.rows : v.cols; }
Index cols_of(const ConstMatrixView& v, Trans t) { return t == Trans::no ? v.cols : v.rows; }

}  // namespace

void Kernels::require(Op op) const {
  if (!backend_.supports(op)) {
    throw UnsupportedError(fmt::format("backend '{}' does not support {}", backend_.name(), op_name(op)));
  }
}

void Kernels::gemm(const std::string& step, Trans ta, Trans tb, double alpha, ConstMatrixView a,
                   ConstMatrixView b, double beta, MatrixView c) {
  require(Op::gemm);
  check_view(a, Op::gemm, "A");
  check_view(b, Op::gemm, "B");
  check_view(c, Op::gemm, "C");
  const Index m = rows_of(a, ta), k = cols_of(a, ta), n = cols_of(b, tb);
  check(rows_of(b, tb) == k, Op::gemm, fmt::format("inner dimensions {} and {} differ", k, rows_of(b, tb)));
  check(c.rows == m && c.cols == n, Op::gemm, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, n));
  Stopwatch sw;
  backend_.gemm(ta, tb, alpha, a, b, beta, c);
  log_.add(step, "gemm", backend_.name(), sw.seconds(), gemm_cost(m, n, k, beta != 0.0));
}

void Kernels::gemm_batched(const std::string& step, Trans ta, Trans tb, Index count, const BatchStrides& s,
                           double alpha, ConstMatrixView a, ConstMatrixView b, double beta, MatrixView c) {
  require(Op::gemm_batched);
  check(count >= 0, Op::gemm_batched, "negative batch count");
  check_view(a, Op::gemm_batched, "A");
  check_view(b, Op::gemm_batched, "B");
  check_view(c, Op::gemm_batched, "C");
  const Index m = rows_of(a, ta), k = cols_of(a, ta), n = cols_of(b, tb);
  check(rows_of(b, tb) == k, Op::gemm_batched, "inner dimensions differ");
  check(c.rows == m && c.cols == n, Op::gemm_batched, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, n));
  check(s.a >= 0 && s.b >= 0 && s.c >= 0, Op::gemm_batched, "negative stride");
  // Outputs of different problems must not overlap, or the result would depend on the order of the batch.
  check(count <= 1 || s.c >= c.ld * (n - 1) + m, Op::gemm_batched, "C stride makes outputs overlap");
  Stopwatch sw;
  backend_.gemm_batched(ta, tb, count, s, alpha, a, b, beta, c);
  log_.add(step, "gemm_batched", backend_.name(), sw.seconds(), gemm_batched_cost(count, m, n, k, beta != 0.0));
}

void Kernels::syrk(const std::string& step, Uplo uplo, Trans trans, double alpha, ConstMatrixView a, double beta,
                   MatrixView c) {
  require(Op::syrk);
  check_view(a, Op::syrk, "A");
  check_view(c, Op::syrk, "C");
  const Index n = rows_of(a, trans), k = cols_of(a, trans);
  check(c.rows == n && c.cols == n, Op::syrk, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, n, n));
  Stopwatch sw;
  backend_.syrk(uplo, trans, alpha, a, beta, c);
  log_.add(step, "syrk", backend_.name(), sw.seconds(), syrk_cost(n, k));
}

void Kernels::trsm(const std::string& step, Side side, Uplo uplo, Trans trans, Diag diag, double alpha,
                   ConstMatrixView a, MatrixView b) {
  require(Op::trsm);
  check_view(a, Op::trsm, "A");
  check_view(b, Op::trsm, "B");
  const Index order = side == Side::left ? b.rows : b.cols;
  check(a.rows == order && a.cols == order, Op::trsm,
        fmt::format("A is {}x{}, expected {}x{}", a.rows, a.cols, order, order));
  Stopwatch sw;
  backend_.trsm(side, uplo, trans, diag, alpha, a, b);
  log_.add(step, "trsm", backend_.name(), sw.seconds(), trsm_cost(side, b.rows, b.cols));
}

void Kernels::cholesky(const std::string& step, Uplo uplo, MatrixView a) {
  require(Op::cholesky);
  check_view(a, Op::cholesky, "A");
  check(a.rows == a.cols, Op::cholesky, fmt::format("A is {}x{}, not square", a.rows, a.cols));
  Stopwatch sw;
  backend_.cholesky(uplo, a);
  log_.add(step, "cholesky", backend_.name(), sw.seconds(), cholesky_cost(a.rows));
}

void Kernels::record_host(const std::string& step, const std::string& kernel, double seconds, const Cost& cost) {
  log_.add(step, kernel, "host", seconds, cost);
}

}  // namespace dfmp2::linalg
