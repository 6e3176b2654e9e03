#pragma once
// Non-owning views of column-major matrices, as BLAS sees them: a pointer, a shape and a leading dimension.
// The backend interface speaks only in views so that a backend (CPU library or device model) never needs to
// know which container owns the memory, and a sub-block is as cheap to pass as a whole matrix.
// Views exist for double (fp64) and float (fp32) elements.
#include <Eigen/Core>
#include <algorithm>
#include <cstddef>

namespace dfmp2::linalg {

using Index = std::ptrdiff_t;
template <class T>
using MatrixT = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;  // column-major, the layout of every view
template <class T>
using VectorT = Eigen::Matrix<T, Eigen::Dynamic, 1>;
using Matrix = MatrixT<double>;
using Vector = VectorT<double>;
using MatrixF = MatrixT<float>;
using VectorF = VectorT<float>;

template <class T>
struct MatrixViewT {
  T* data = nullptr;
  Index rows = 0;
  Index cols = 0;
  Index ld = 1;  // distance between the starts of two columns, >= max(1, rows)

  T& operator()(Index i, Index j) const { return data[i + j * ld]; }
  MatrixViewT block(Index r0, Index c0, Index nr, Index nc) const { return {data + r0 + c0 * ld, nr, nc, ld}; }
};

template <class T>
struct ConstMatrixViewT {
  const T* data = nullptr;
  Index rows = 0;
  Index cols = 0;
  Index ld = 1;

  ConstMatrixViewT() = default;
  ConstMatrixViewT(const T* d, Index r, Index c, Index l) : data(d), rows(r), cols(c), ld(l) {}
  ConstMatrixViewT(const MatrixViewT<T>& v) : data(v.data), rows(v.rows), cols(v.cols), ld(v.ld) {}  // NOLINT

  const T& operator()(Index i, Index j) const { return data[i + j * ld]; }
  ConstMatrixViewT block(Index r0, Index c0, Index nr, Index nc) const { return {data + r0 + c0 * ld, nr, nc, ld}; }
};

using MatrixView = MatrixViewT<double>;
using ConstMatrixView = ConstMatrixViewT<double>;
using MatrixViewF = MatrixViewT<float>;
using ConstMatrixViewF = ConstMatrixViewT<float>;

template <class T>
MatrixViewT<T> view(MatrixT<T>& m) {
  return {m.data(), m.rows(), m.cols(), std::max<Index>(1, m.rows())};
}
template <class T>
ConstMatrixViewT<T> view(const MatrixT<T>& m) {
  return {m.data(), m.rows(), m.cols(), std::max<Index>(1, m.rows())};
}

// Eigen maps of views, for backends and tests that compute with Eigen.
template <class T>
using StridedMapT = Eigen::Map<MatrixT<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstStridedMapT = Eigen::Map<const MatrixT<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
using StridedMap = StridedMapT<double>;
using ConstStridedMap = ConstStridedMapT<double>;

template <class T>
StridedMapT<T> eigen_map(const MatrixViewT<T>& v) {
  return {v.data, v.rows, v.cols, Eigen::OuterStride<>(std::max<Index>(1, v.ld))};
}
template <class T>
ConstStridedMapT<T> eigen_map(const ConstMatrixViewT<T>& v) {
  return {v.data, v.rows, v.cols, Eigen::OuterStride<>(std::max<Index>(1, v.ld))};
}

}  // namespace dfmp2::linalg
