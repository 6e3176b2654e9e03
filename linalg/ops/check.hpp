#pragma once
// What every op descriptor (linalg/ops/*.hpp) shares: the Cost of a call and the shape-check helpers. A shape
// mismatch is a bug in the caller, not bad user input, so it is a std::logic_error naming the op.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

#include <cmath>

#include "linalg/errors.hpp"
#include "linalg/matrix_view.hpp"
#include "linalg/ops.hpp"

namespace dfmp2::linalg {

// Floating-point operations of a call and the bytes it must at least read and write. The accounting (KernelLog),
// the benchmarks and the device models' nominal flops all take them from the op's descriptor, so a GFLOP/s figure
// means the same thing everywhere.
struct Cost {
  double flops = 0;
  double bytes = 0;
};

// The dense cost functions count 8-byte elements; fp32 calls move half.
constexpr Cost scaled_bytes(Cost c, double element_bytes) { return {c.flops, c.bytes * element_bytes / 8.0}; }

namespace op_check {

inline void require(bool ok, std::string_view op, const std::string& what) {
  if (!ok) throw std::logic_error(fmt::format("{}: {}", op, what));
}

template <class T>
void view(const ConstMatrixViewT<T>& v, std::string_view op, const char* name) {
  require(v.rows >= 0 && v.cols >= 0, op, fmt::format("{} has a negative dimension", name));
  require(v.ld >= std::max<Index>(1, v.rows), op, fmt::format("{} leading dimension {} < rows {}", name, v.ld, v.rows));
}

// The factorisations (cholesky, eigh) read one triangle of A, and NaN or Inf there would come out as NaN results on
// one backend and as an argument error from LAPACKE on another. Not a shape error but numbers that cannot be
// factored: a NumericalError naming the op and the first such element, the same on every backend. O(n^2) against
// the factorisation's O(n^3).
template <class T>
void finite_triangle(const MatrixViewT<T>& a, Uplo uplo, std::string_view op) {
  for (Index j = 0; j < a.cols; ++j) {
    const Index begin = uplo == Uplo::lower ? j : 0, end = uplo == Uplo::lower ? a.rows : std::min(j + 1, a.rows);
    for (Index i = begin; i < end; ++i) {
      if (!std::isfinite(a(i, j))) {
        throw NumericalError(fmt::format("{}: the matrix holds {} at row {}, column {}; it cannot be factored", op,
                                         std::isnan(a(i, j)) ? "NaN" : "Inf", i, j));
      }
    }
  }
}

template <class T>
Index rows_of(const ConstMatrixViewT<T>& v, Trans t) { return t == Trans::no ? v.rows : v.cols; }
template <class T>
Index cols_of(const ConstMatrixViewT<T>& v, Trans t) { return t == Trans::no ? v.cols : v.rows; }

}  // namespace op_check
}  // namespace dfmp2::linalg
