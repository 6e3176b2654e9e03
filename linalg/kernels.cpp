#include "linalg/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "linalg/errors.hpp"

namespace dfmp2::linalg {
namespace {

// A shape mismatch is a bug in the caller, not bad user input: it is reported as a logic error.
void check(bool ok, Op op, const std::string& what) {
  if (!ok) throw std::logic_error(fmt::format("{}: {}", op_name(op), what));
}

template <class T>
void check_view(const ConstMatrixViewT<T>& v, Op op, const char* name) {
  check(v.rows >= 0 && v.cols >= 0, op, fmt::format("{} has a negative dimension", name));
  check(v.ld >= std::max<Index>(1, v.rows), op, fmt::format("{} leading dimension {} < rows {}", name, v.ld, v.rows));
}

template <class T>
Index rows_of(const ConstMatrixViewT<T>& v, Trans t) { return t == Trans::no ? v.rows : v.cols; }
template <class T>
Index cols_of(const ConstMatrixViewT<T>& v, Trans t) { return t == Trans::no ? v.cols : v.rows; }

}  // namespace

Backend& Kernels::require(const std::string& step, Op op, DType dtype) {
  ran_on_ = &backend_;
  if (backend_.supports(op, dtype)) {
    if (dtype == DType::fp32) backend_.set_matmul_mode(matmul_mode(step));
    return backend_;
  }
  if (fallback_ != nullptr && fallback_->supports(op, dtype)) {
    ran_on_ = fallback_;  // allowed by the input; recorded as a fallback so the report counts it
    return *fallback_;
  }
  throw UnsupportedError(fmt::format("backend '{}' does not support {} in {}{}", backend_.name(), op_name(op),
                                     dtype_label(step, dtype),
                                     fallback_ == nullptr ? "" : " (nor does the host fallback)"));
}

std::string Kernels::dtype_label(const std::string& step, DType dtype) const {
  if (dtype == DType::fp32) return matmul_mode_name(matmul_mode(step));
  return std::string(dtype_name(dtype));
}

namespace {
void require_mode(const Backend& backend, MatmulMode mode) {
  if (!backend.supports_matmul_mode(mode)) {
    throw UnsupportedError(fmt::format("backend '{}' has no {} arithmetic (bf16 and bf16x3 are for the device "
                                       "models trn1 and trn2; use precision fp32 or fp64)",
                                       backend.name(), matmul_mode_name(mode)));
  }
}
}  // namespace

void Kernels::set_matmul_mode(MatmulMode mode) {
  require_mode(backend_, mode);
  mode_ = mode;
}

void Kernels::set_step_matmul_mode(const std::string& step, MatmulMode mode) {
  require_mode(backend_, mode);
  step_modes_[step] = mode;
}

MatmulMode Kernels::matmul_mode(const std::string& step) const {
  const auto it = step_modes_.find(step);
  return it == step_modes_.end() ? mode_ : it->second;
}

template <class T>
void Kernels::record(const std::string& step, Op op, double seconds, const Cost& cost) {
  record<T>(step, std::string(op_name(op)), seconds, scaled_bytes(cost, sizeof(T)));
}

template <class T>
void Kernels::record(const std::string& step, const std::string& kernel, double seconds, const Cost& cost) {
  const bool fallback = ran_on_ != &backend_;
  // A fallback ran at the host backend's own precision: bf16 and bf16x3 apply to the device only.
  const std::string dtype = fallback ? std::string(dtype_name(dtype_of<T>())) : dtype_label(step, dtype_of<T>());
  const std::string who = fallback ? fmt::format("{} (fallback from {})", ran_on_->name(), backend_.name())
                                   : backend_.name();
  log_.add(step, kernel, who, seconds, cost, dtype, fallback ? nullptr : backend_.last_modelled(), fallback);
}

template <class T>
void Kernels::gemm(const std::string& step, Trans ta, Trans tb, T alpha, Same<ConstMatrixViewT<T>> a, Same<ConstMatrixViewT<T>> b,
                   T beta, Same<MatrixViewT<T>> c) {
  Backend& run_on = require(step, Op::gemm, dtype_of<T>());
  check_view(a, Op::gemm, "A");
  check_view(b, Op::gemm, "B");
  check_view(ConstMatrixViewT<T>(c), Op::gemm, "C");
  const Index m = rows_of(a, ta), k = cols_of(a, ta), n = cols_of(b, tb);
  check(rows_of(b, tb) == k, Op::gemm, fmt::format("inner dimensions {} and {} differ", k, rows_of(b, tb)));
  check(c.rows == m && c.cols == n, Op::gemm, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, n));
  Stopwatch sw;
  run_on.gemm(ta, tb, alpha, a, b, beta, c);
  record<T>(step, Op::gemm, sw.seconds(), gemm_cost(m, n, k, beta != T(0)));
}

template <class T>
void Kernels::gemm_batched(const std::string& step, Trans ta, Trans tb, Index count, const BatchStrides& s, T alpha,
                           Same<ConstMatrixViewT<T>> a, Same<ConstMatrixViewT<T>> b, T beta, Same<MatrixViewT<T>> c) {
  Backend& run_on = require(step, Op::gemm_batched, dtype_of<T>());
  check(count >= 0, Op::gemm_batched, "negative batch count");
  check_view(a, Op::gemm_batched, "A");
  check_view(b, Op::gemm_batched, "B");
  check_view(ConstMatrixViewT<T>(c), Op::gemm_batched, "C");
  const Index m = rows_of(a, ta), k = cols_of(a, ta), n = cols_of(b, tb);
  check(rows_of(b, tb) == k, Op::gemm_batched, "inner dimensions differ");
  check(c.rows == m && c.cols == n, Op::gemm_batched, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, n));
  check(s.a >= 0 && s.b >= 0 && s.c >= 0, Op::gemm_batched, "negative stride");
  // Outputs of different problems must not overlap, or the result would depend on the order of the batch.
  check(count <= 1 || m == 0 || n == 0 || s.c >= c.ld * (n - 1) + m, Op::gemm_batched, "C stride makes outputs overlap");
  Stopwatch sw;
  run_on.gemm_batched(ta, tb, count, s, alpha, a, b, beta, c);
  record<T>(step, Op::gemm_batched, sw.seconds(), gemm_batched_cost(count, m, n, k, beta != T(0)));
}

template <class T>
void Kernels::syrk(const std::string& step, Uplo uplo, Trans trans, T alpha, Same<ConstMatrixViewT<T>> a, T beta,
                   Same<MatrixViewT<T>> c) {
  Backend& run_on = require(step, Op::syrk, dtype_of<T>());
  check_view(a, Op::syrk, "A");
  check_view(ConstMatrixViewT<T>(c), Op::syrk, "C");
  const Index n = rows_of(a, trans), k = cols_of(a, trans);
  check(c.rows == n && c.cols == n, Op::syrk, fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, n, n));
  Stopwatch sw;
  run_on.syrk(uplo, trans, alpha, a, beta, c);
  record<T>(step, Op::syrk, sw.seconds(), syrk_cost(n, k));
}

template <class T>
void Kernels::trsm(const std::string& step, Side side, Uplo uplo, Trans trans, Diag diag, T alpha,
                   Same<ConstMatrixViewT<T>> a, Same<MatrixViewT<T>> b) {
  Backend& run_on = require(step, Op::trsm, dtype_of<T>());
  check_view(a, Op::trsm, "A");
  check_view(ConstMatrixViewT<T>(b), Op::trsm, "B");
  const Index order = side == Side::left ? b.rows : b.cols;
  check(a.rows == order && a.cols == order, Op::trsm,
        fmt::format("A is {}x{}, expected {}x{}", a.rows, a.cols, order, order));
  Stopwatch sw;
  run_on.trsm(side, uplo, trans, diag, alpha, a, b);
  record<T>(step, Op::trsm, sw.seconds(), trsm_cost(side, b.rows, b.cols));
}

template <class T>
void Kernels::cholesky(const std::string& step, Uplo uplo, MatrixViewT<T> a) {
  Backend& run_on = require(step, Op::cholesky, dtype_of<T>());
  check_view(ConstMatrixViewT<T>(a), Op::cholesky, "A");
  check(a.rows == a.cols, Op::cholesky, fmt::format("A is {}x{}, not square", a.rows, a.cols));
  Stopwatch sw;
  run_on.cholesky(uplo, a);
  record<T>(step, Op::cholesky, sw.seconds(), cholesky_cost(a.rows));
}

template <class T>
void Kernels::eigh(const std::string& step, MatrixViewT<T> a, T* w) {
  Backend& run_on = require(step, Op::eigh, dtype_of<T>());
  check_view(ConstMatrixViewT<T>(a), Op::eigh, "A");
  check(a.rows == a.cols, Op::eigh, fmt::format("A is {}x{}, not square", a.rows, a.cols));
  check(a.rows == 0 || w != nullptr, Op::eigh, "no eigenvalue output");
  Stopwatch sw;
  run_on.eigh(a, w);
  record<T>(step, Op::eigh, sw.seconds(), eigh_cost(a.rows));
}

namespace {

// Shapes of C = alpha op(S) B + beta C: op(S) is m x k, B k x n, C m x n. Returns n.
template <class T>
Index check_spmm_shapes(Trans ts, Index s_rows, Index s_cols, const ConstMatrixViewT<T>& b,
                        const ConstMatrixViewT<T>& c) {
  check_view(b, Op::spmm, "B");
  check_view(c, Op::spmm, "C");
  const Index m = ts == Trans::no ? s_rows : s_cols, k = ts == Trans::no ? s_cols : s_rows;
  check(b.rows == k, Op::spmm, fmt::format("op(S) is {}x{} but B has {} rows", m, k, b.rows));
  check(c.rows == m && c.cols == b.cols, Op::spmm,
        fmt::format("C is {}x{}, expected {}x{}", c.rows, c.cols, m, b.cols));
  return b.cols;
}

}  // namespace

template <class T>
void Kernels::spmm(const std::string& step, Trans ts, T alpha, const Same<CsrMatrix<T>>& s,
                   Same<ConstMatrixViewT<T>> b, T beta, Same<MatrixViewT<T>> c) {
  Backend& run_on = require(step, Op::spmm, dtype_of<T>());
  validate(s);
  const Index n = check_spmm_shapes<T>(ts, s.rows, s.cols, b, c);
  Stopwatch sw;
  run_on.spmm(ts, alpha, s, b, beta, c);
  record<T>(step, "spmm_csr", sw.seconds(),
            spmm_csr_cost(s.nnz(), n, b.rows, c.rows, beta != T(0), sizeof(T), sizeof(Index)));
}

template <class T>
void Kernels::spmm(const std::string& step, Trans ts, T alpha, const Same<BsrMatrix<T>>& s,
                   Same<ConstMatrixViewT<T>> b, T beta, Same<MatrixViewT<T>> c) {
  Backend& run_on = require(step, Op::spmm, dtype_of<T>());
  validate(s);
  const Index n = check_spmm_shapes<T>(ts, s.rows, s.cols, b, c);
  Stopwatch sw;
  run_on.spmm(ts, alpha, s, b, beta, c);
  record<T>(step, "spmm_bsr", sw.seconds(),
            spmm_bsr_cost(s.nblocks(), s.block_rows, s.block_cols, n, b.rows, c.rows, beta != T(0), sizeof(T),
                          sizeof(Index)));
}

namespace {

// x (length cols of op(S)) and y (length rows of op(S)) as one-column views.
template <class T, class S>
std::pair<ConstMatrixViewT<T>, MatrixViewT<T>> spmv_views(Trans ts, const S& s, const T* x, T* y) {
  const Index m = ts == Trans::no ? s.rows : s.cols, k = ts == Trans::no ? s.cols : s.rows;
  check((k == 0 || x != nullptr) && (m == 0 || y != nullptr), Op::spmm, "spmv: null vector");
  return {ConstMatrixViewT<T>(x, k, 1, std::max<Index>(1, k)), MatrixViewT<T>{y, m, 1, std::max<Index>(1, m)}};
}

}  // namespace

template <class T>
void Kernels::spmv(const std::string& step, Trans ts, T alpha, const Same<CsrMatrix<T>>& s, const Same<T>* x,
                   T beta, Same<T>* y) {
  const auto [xv, yv] = spmv_views(ts, s, x, y);
  spmm<T>(step, ts, alpha, s, xv, beta, yv);
}

template <class T>
void Kernels::spmv(const std::string& step, Trans ts, T alpha, const Same<BsrMatrix<T>>& s, const Same<T>* x,
                   T beta, Same<T>* y) {
  const auto [xv, yv] = spmv_views(ts, s, x, y);
  spmm<T>(step, ts, alpha, s, xv, beta, yv);
}

void Kernels::record_host(const std::string& step, const std::string& kernel, double seconds, const Cost& cost,
                          const std::string& dtype) {
  log_.add(step, kernel, "host", seconds, cost, dtype);
}

#define DFMP2_KERNELS_INSTANTIATE(T)                                                                               \
  template void Kernels::gemm<T>(const std::string&, Trans, Trans, T, Same<ConstMatrixViewT<T>>,                 \
                                 Same<ConstMatrixViewT<T>>, T, Same<MatrixViewT<T>>);                              \
  template void Kernels::gemm_batched<T>(const std::string&, Trans, Trans, Index, const BatchStrides&, T,          \
                                         Same<ConstMatrixViewT<T>>, Same<ConstMatrixViewT<T>>, T,                  \
                                         Same<MatrixViewT<T>>);                                                    \
  template void Kernels::syrk<T>(const std::string&, Uplo, Trans, T, Same<ConstMatrixViewT<T>>, T,                 \
                                 Same<MatrixViewT<T>>);                                                            \
  template void Kernels::trsm<T>(const std::string&, Side, Uplo, Trans, Diag, T, Same<ConstMatrixViewT<T>>,       \
                                 Same<MatrixViewT<T>>);                                                            \
  template void Kernels::cholesky<T>(const std::string&, Uplo, MatrixViewT<T>);                                    \
  template void Kernels::eigh<T>(const std::string&, MatrixViewT<T>, T*);                                         \
  template void Kernels::spmm<T>(const std::string&, Trans, T, const Same<CsrMatrix<T>>&,                          \
                                 Same<ConstMatrixViewT<T>>, T, Same<MatrixViewT<T>>);                              \
  template void Kernels::spmm<T>(const std::string&, Trans, T, const Same<BsrMatrix<T>>&,                          \
                                 Same<ConstMatrixViewT<T>>, T, Same<MatrixViewT<T>>);                              \
  template void Kernels::spmv<T>(const std::string&, Trans, T, const Same<CsrMatrix<T>>&, const Same<T>*, T,     \
                                 Same<T>*);                                                                        \
  template void Kernels::spmv<T>(const std::string&, Trans, T, const Same<BsrMatrix<T>>&, const Same<T>*, T,     \
                                 Same<T>*);

DFMP2_KERNELS_INSTANTIATE(double)
DFMP2_KERNELS_INSTANTIATE(float)
#undef DFMP2_KERNELS_INSTANTIATE

}  // namespace dfmp2::linalg
