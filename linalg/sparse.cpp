#include "linalg/sparse.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace dfmp2::linalg {
namespace {

[[noreturn]] void fail(const char* kind, const std::string& what) {
  throw std::logic_error(fmt::format("{}: {}", kind, what));
}

// For checks done once per call; the per-entry checks below test first, so no message is formatted on success.
void check(bool ok, const char* kind, const std::string& what) {
  if (!ok) fail(kind, what);
}

void check_threshold(double threshold, const char* kind) {
  check(!std::isnan(threshold), kind, "threshold is NaN");
}

void check_dense(Index rows, Index cols, Index ld, const char* kind) {
  check(rows >= 0 && cols >= 0, kind, fmt::format("dense matrix has a negative dimension ({}x{})", rows, cols));
  check(ld >= std::max<Index>(1, rows), kind, fmt::format("leading dimension {} < rows {}", ld, rows));
}

// Kept: |x| > threshold, or NaN (never silently dropped).
template <class T>
bool keep(T x, double threshold) {
  return !(std::abs(static_cast<double>(x)) <= threshold);
}

// A compressed pointer array: `ptr` has `outer + 1` entries, starts at 0, never decreases and ends at `count`;
// the inner indices of each outer slot are in [0, inner) and strictly increasing.
void check_compressed(const char* kind, const char* ptr_name, const std::vector<Index>& ptr, Index outer,
                      const std::vector<Index>& idx, Index inner, const char* outer_name) {
  check(ptr.size() == static_cast<size_t>(outer) + 1, kind,
        fmt::format("{} has {} entries, expected {}", ptr_name, ptr.size(), outer + 1));
  check(ptr[0] == 0, kind, fmt::format("{}[0] is {}, expected 0", ptr_name, ptr[0]));
  check(ptr[static_cast<size_t>(outer)] == static_cast<Index>(idx.size()), kind,
        fmt::format("{}[{}] is {}, but there are {} column indices", ptr_name, outer, ptr[static_cast<size_t>(outer)],
                    idx.size()));
  for (Index i = 0; i < outer; ++i) {
    const Index begin = ptr[static_cast<size_t>(i)], end = ptr[static_cast<size_t>(i) + 1];
    if (begin > end) fail(kind, fmt::format("{} decreases at {} {} ({} > {})", ptr_name, outer_name, i, begin, end));
    for (Index p = begin; p < end; ++p) {
      const Index j = idx[static_cast<size_t>(p)];
      if (j < 0 || j >= inner)
        fail(kind, fmt::format("column index {} out of range [0, {}) in {} {}", j, inner, outer_name, i));
      if (p > begin && idx[static_cast<size_t>(p) - 1] >= j)
        fail(kind, fmt::format("column indices of {} {} are not strictly increasing ({} then {})", outer_name, i,
                               idx[static_cast<size_t>(p) - 1], j));
    }
  }
}

}  // namespace

template <class T>
double CsrMatrix<T>::density() const {
  return rows > 0 && cols > 0 ? static_cast<double>(nnz()) / (static_cast<double>(rows) * static_cast<double>(cols))
                              : 0.0;
}

template <class T>
Index BsrMatrix<T>::nnz() const {
  Index n = 0;
  const Index nbr = block_row_count();
  for (Index bi = 0; bi < nbr; ++bi) {
    const Index mr = std::min(block_rows, rows - bi * block_rows);
    for (Index b = block_row_ptr[static_cast<size_t>(bi)]; b < block_row_ptr[static_cast<size_t>(bi) + 1]; ++b) {
      const Index bj = block_col_idx[static_cast<size_t>(b)];
      n += mr * std::min(block_cols, cols - bj * block_cols);
    }
  }
  return n;
}

template <class T>
double BsrMatrix<T>::density() const {
  return rows > 0 && cols > 0 ? static_cast<double>(nnz()) / (static_cast<double>(rows) * static_cast<double>(cols))
                              : 0.0;
}

template <class T>
CsrMatrix<T> csr_from_dense(ConstMatrixViewT<T> a, double threshold) {
  check_threshold(threshold, "csr_from_dense");
  check_dense(a.rows, a.cols, a.ld, "csr_from_dense");
  CsrMatrix<T> s;
  s.rows = a.rows;
  s.cols = a.cols;
  s.row_ptr.assign(static_cast<size_t>(a.rows) + 1, 0);
  // Count per row first (column-major input: walk columns outside), then fill in column order, which leaves the
  // column indices of every row sorted.
  for (Index j = 0; j < a.cols; ++j)
    for (Index i = 0; i < a.rows; ++i)
      if (keep(a(i, j), threshold)) ++s.row_ptr[static_cast<size_t>(i) + 1];
  for (Index i = 0; i < a.rows; ++i) s.row_ptr[static_cast<size_t>(i) + 1] += s.row_ptr[static_cast<size_t>(i)];
  const Index nnz = s.row_ptr.back();
  s.col_idx.resize(static_cast<size_t>(nnz));
  s.values.resize(static_cast<size_t>(nnz));
  std::vector<Index> next(s.row_ptr.begin(), s.row_ptr.end() - 1);
  for (Index j = 0; j < a.cols; ++j)
    for (Index i = 0; i < a.rows; ++i) {
      const T x = a(i, j);
      if (!keep(x, threshold)) continue;
      const Index p = next[static_cast<size_t>(i)]++;
      s.col_idx[static_cast<size_t>(p)] = j;
      s.values[static_cast<size_t>(p)] = x;
    }
  return s;
}

template <class T>
BsrMatrix<T> bsr_from_dense(ConstMatrixViewT<T> a, Index block_rows, Index block_cols, double threshold) {
  check_threshold(threshold, "bsr_from_dense");
  check_dense(a.rows, a.cols, a.ld, "bsr_from_dense");
  check(block_rows >= 1 && block_cols >= 1, "bsr_from_dense",
        fmt::format("block size {}x{} must be at least 1x1", block_rows, block_cols));
  BsrMatrix<T> s;
  s.rows = a.rows;
  s.cols = a.cols;
  s.block_rows = block_rows;
  s.block_cols = block_cols;
  const Index nbr = s.block_row_count(), nbc = s.block_col_count();
  s.block_row_ptr.assign(static_cast<size_t>(nbr) + 1, 0);
  for (Index bi = 0; bi < nbr; ++bi) {
    const Index r0 = bi * block_rows, mr = std::min(block_rows, a.rows - r0);
    for (Index bj = 0; bj < nbc; ++bj) {
      const Index c0 = bj * block_cols, kc = std::min(block_cols, a.cols - c0);
      bool any = false;
      for (Index j = 0; j < kc && !any; ++j)
        for (Index i = 0; i < mr; ++i)
          if (keep(a(r0 + i, c0 + j), threshold)) {
            any = true;
            break;
          }
      if (!any) continue;
      s.block_col_idx.push_back(bj);
      const size_t at = s.blocks.size();
      s.blocks.resize(at + static_cast<size_t>(s.block_size()), T(0));  // padding stays zero
      T* blk = s.blocks.data() + at;
      for (Index j = 0; j < kc; ++j)
        for (Index i = 0; i < mr; ++i) blk[i + j * block_rows] = a(r0 + i, c0 + j);
    }
    s.block_row_ptr[static_cast<size_t>(bi) + 1] = static_cast<Index>(s.block_col_idx.size());
  }
  return s;
}

template <class T>
MatrixT<T> to_dense(const CsrMatrix<T>& s) {
  validate(s);
  MatrixT<T> d = MatrixT<T>::Zero(s.rows, s.cols);
  for (Index i = 0; i < s.rows; ++i)
    for (Index p = s.row_ptr[static_cast<size_t>(i)]; p < s.row_ptr[static_cast<size_t>(i) + 1]; ++p)
      d(i, s.col_idx[static_cast<size_t>(p)]) = s.values[static_cast<size_t>(p)];
  return d;
}

template <class T>
MatrixT<T> to_dense(const BsrMatrix<T>& s) {
  validate(s);
  MatrixT<T> d = MatrixT<T>::Zero(s.rows, s.cols);
  for (Index bi = 0; bi < s.block_row_count(); ++bi) {
    const Index r0 = bi * s.block_rows, mr = std::min(s.block_rows, s.rows - r0);
    for (Index b = s.block_row_ptr[static_cast<size_t>(bi)]; b < s.block_row_ptr[static_cast<size_t>(bi) + 1]; ++b) {
      const Index c0 = s.block_col_idx[static_cast<size_t>(b)] * s.block_cols;
      const Index kc = std::min(s.block_cols, s.cols - c0);
      const T* blk = s.block(b);
      for (Index j = 0; j < kc; ++j)
        for (Index i = 0; i < mr; ++i) d(r0 + i, c0 + j) = blk[i + j * s.block_rows];
    }
  }
  return d;
}

template <class T>
void validate(const CsrMatrix<T>& s) {
  const char* kind = "CSR matrix";
  check(s.rows >= 0 && s.cols >= 0, kind, fmt::format("negative dimension ({}x{})", s.rows, s.cols));
  check(s.values.size() == s.col_idx.size(), kind,
        fmt::format("{} values but {} column indices", s.values.size(), s.col_idx.size()));
  check_compressed(kind, "row_ptr", s.row_ptr, s.rows, s.col_idx, s.cols, "row");
}

template <class T>
void validate(const BsrMatrix<T>& s) {
  const char* kind = "BSR matrix";
  check(s.rows >= 0 && s.cols >= 0, kind, fmt::format("negative dimension ({}x{})", s.rows, s.cols));
  check(s.block_rows >= 1 && s.block_cols >= 1, kind,
        fmt::format("block size {}x{} must be at least 1x1", s.block_rows, s.block_cols));
  const Index nbr = s.block_row_count(), nbc = s.block_col_count();
  check_compressed(kind, "block_row_ptr", s.block_row_ptr, nbr, s.block_col_idx, nbc, "block row");
  check(s.blocks.size() == static_cast<size_t>(s.nblocks()) * static_cast<size_t>(s.block_size()), kind,
        fmt::format("{} block values, expected {} blocks of {}x{} = {}", s.blocks.size(), s.nblocks(), s.block_rows,
                    s.block_cols, s.nblocks() * s.block_size()));
  // Padding of edge blocks (beyond the last row or column) must be zero.
  for (Index bi = 0; bi < nbr; ++bi) {
    const Index mr = std::min(s.block_rows, s.rows - bi * s.block_rows);
    for (Index b = s.block_row_ptr[static_cast<size_t>(bi)]; b < s.block_row_ptr[static_cast<size_t>(bi) + 1]; ++b) {
      const Index kc = std::min(s.block_cols, s.cols - s.block_col_idx[static_cast<size_t>(b)] * s.block_cols);
      if (mr == s.block_rows && kc == s.block_cols) continue;
      const T* blk = s.block(b);
      for (Index j = 0; j < s.block_cols; ++j)
        for (Index i = (j < kc ? mr : 0); i < s.block_rows; ++i)
          if (blk[i + j * s.block_rows] != T(0))
            fail(kind, fmt::format("padding of edge block {} (block row {}) is not zero at ({}, {})", b, bi, i, j));
    }
  }
}

#define DFMP2_SPARSE_INSTANTIATE(T)                                                                  \
  template struct CsrMatrix<T>;                                                                      \
  template struct BsrMatrix<T>;                                                                      \
  template CsrMatrix<T> csr_from_dense<T>(ConstMatrixViewT<T>, double);                              \
  template BsrMatrix<T> bsr_from_dense<T>(ConstMatrixViewT<T>, Index, Index, double);                \
  template MatrixT<T> to_dense<T>(const CsrMatrix<T>&);                                              \
  template MatrixT<T> to_dense<T>(const BsrMatrix<T>&);                                              \
  template void validate<T>(const CsrMatrix<T>&);                                                    \
  template void validate<T>(const BsrMatrix<T>&);

DFMP2_SPARSE_INSTANTIATE(double)
DFMP2_SPARSE_INSTANTIATE(float)
#undef DFMP2_SPARSE_INSTANTIATE

}  // namespace dfmp2::linalg
