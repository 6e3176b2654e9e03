#pragma once
// Non-owning views of column-major matrices, as BLAS sees them: a pointer, a shape and a leading dimension.
// The backend interface speaks only in views so that a backend (CPU library or device model) never needs to
// know which container owns the memory, and a sub-block is as cheap to pass as a whole matrix.
#include <Eigen/Core>
#include <cstddef>

namespace dfmp2::linalg {

using Index = std::ptrdiff_t;
using Matrix = Eigen::MatrixXd;  // column-major, the layout of every view
using Vector = Eigen::VectorXd;

struct MatrixView {
  double* data = nullptr;
  Index rows = 0;
  Index cols = 0;
  Index ld = 1;  // distance between the starts of two columns, >= max(1, rows)

  double& operator()(Index i, Index j) const { return data[i + j * ld]; }
  MatrixView block(Index r0, Index c0, Index nr, Index nc) const { return {data + r0 + c0 * ld, nr, nc, ld}; }
};

struct ConstMatrixView {
  const double* data = nullptr;
  Index rows = 0;
  Index cols = 0;
  Index ld = 1;

  ConstMatrixView() = default;
  ConstMatrixView(const double* d, Index r, Index c, Index l) : data(d), rows(r), cols(c), ld(l) {}
  ConstMatrixView(const MatrixView& v) : data(v.data), rows(v.rows), cols(v.cols), ld(v.ld) {}  // NOLINT

  const double& operator()(Index i, Index j) const { return data[i + j * ld]; }
  ConstMatrixView block(Index r0, Index c0, Index nr, Index nc) const {
    return {data + r0 + c0 * ld, nr, nc, ld};
  }
};

inline MatrixView view(Matrix& m) { return {m.data(), m.rows(), m.cols(), std::max<Index>(1, m.rows())}; }
inline ConstMatrixView view(const Matrix& m) { return {m.data(), m.rows(), m.cols(), std::max<Index>(1, m.rows())}; }

// Eigen maps of views, for backends and tests that compute with Eigen.
using StridedMap = Eigen::Map<Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using ConstStridedMap = Eigen::Map<const Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
inline StridedMap eigen_map(const MatrixView& v) { return {v.data, v.rows, v.cols, Eigen::OuterStride<>(v.ld)}; }
inline ConstStridedMap eigen_map(const ConstMatrixView& v) {
  return {v.data, v.rows, v.cols, Eigen::OuterStride<>(v.ld)};
}

}  // namespace dfmp2::linalg
