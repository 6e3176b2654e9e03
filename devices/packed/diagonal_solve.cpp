#include "devices/packed/diagonal_solve.hpp"

#include <omp.h>

#include <algorithm>

#include <Eigen/Core>

namespace dfmp2::devices::packed {
namespace {

using linalg::Index;
using linalg::MatrixViewT;

// B block = op(T)^-1 B block (left) or B block op(T)^-1 (right) for a diagonal block T of A, by Eigen, threaded
// over B's columns (left) or rows (right).
template <class T, int Mode>
void solve_diagonal(bool left, bool trans, const T* t, Index order, Index ldt, MatrixViewT<T> blk, int threads) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using Stride = Eigen::OuterStride<>;
  const Eigen::Map<const M, 0, Stride> tm(t, order, order, Stride(ldt));
  const Index chunks = std::max<Index>(1, std::min<Index>(threads, (left ? blk.cols : blk.rows) / 64));
#pragma omp parallel for num_threads(int(chunks)) if (chunks > 1)
  for (Index part = 0; part < chunks; ++part) {
    const Index total = left ? blk.cols : blk.rows;
    const Index begin = total * part / chunks, end = total * (part + 1) / chunks;
    if (left) {
      Eigen::Map<M, 0, Stride> x(blk.data + begin * blk.ld, blk.rows, end - begin, Stride(blk.ld));
      if (trans) tm.template triangularView<Mode>().transpose().solveInPlace(x);
      else tm.template triangularView<Mode>().solveInPlace(x);
    } else {
      Eigen::Map<M, 0, Stride> x(blk.data + begin, end - begin, blk.cols, Stride(blk.ld));
      if (trans) tm.template triangularView<Mode>().transpose().template solveInPlace<Eigen::OnTheRight>(x);
      else tm.template triangularView<Mode>().template solveInPlace<Eigen::OnTheRight>(x);
    }
  }
}

}  // namespace

template <class T>
void solve_diagonal_block(bool left, bool lower, bool trans, bool unit, const T* t, Index order, Index ldt,
                          MatrixViewT<T> blk, int threads) {
  // The Eigen mode of op(A)'s diagonal block as stored: A's own triangle (the transpose is taken by the solver).
  if (lower && unit) solve_diagonal<T, Eigen::UnitLower>(left, trans, t, order, ldt, blk, threads);
  if (lower && !unit) solve_diagonal<T, Eigen::Lower>(left, trans, t, order, ldt, blk, threads);
  if (!lower && unit) solve_diagonal<T, Eigen::UnitUpper>(left, trans, t, order, ldt, blk, threads);
  if (!lower && !unit) solve_diagonal<T, Eigen::Upper>(left, trans, t, order, ldt, blk, threads);
}

template void solve_diagonal_block<double>(bool, bool, bool, bool, const double*, Index, Index, MatrixViewT<double>,
                                           int);
template void solve_diagonal_block<float>(bool, bool, bool, bool, const float*, Index, Index, MatrixViewT<float>, int);

}  // namespace dfmp2::devices::packed
