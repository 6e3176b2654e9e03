#pragma once
// Sparse matrices for the SpMM op (linalg::Backend::spmm): compressed sparse rows (CSR) and block sparse rows (BSR),
// of double (fp64) or float (fp32), with conversions from and to dense column-major views.
//
// CSR: the entries of row i are values[p], in column col_idx[p], for p in [row_ptr[i], row_ptr[i + 1]); row_ptr has
// rows + 1 entries starting at 0, and the column indices of a row are strictly increasing (sorted, no duplicates).
//
// BSR: the matrix is cut into blocks of block_rows x block_cols. The stored blocks of block row I are
// blocks[b * block_rows * block_cols ...] for b in [block_row_ptr[I], block_row_ptr[I + 1]), in block column
// block_col_idx[b] (strictly increasing within a block row). Each block is column-major block_rows x block_cols.
// Edge blocks: when rows (cols) is not a multiple of block_rows (block_cols), the last block row (column) is
// partial. Such blocks are still stored full-size, padded with zeros beyond the matrix, so every block has the
// same size and stride (what a device wants); kernels only touch the part inside the matrix, and the padding must
// be zero (validate() checks it). Blocks with no entry above the threshold are not stored at all.
//
// Index is std::ptrdiff_t throughout, so the CSR arrays can be handed to Eigen (SparseMatrix<T, RowMajor, Index>)
// as they are. validate() throws std::logic_error for a malformed structure; linalg::Kernels calls it before a
// backend sees the matrix, so backends may trust it.
#include <vector>

#include "linalg/matrix_view.hpp"

namespace dfmp2::linalg {

inline constexpr Index kDefaultBlockRows = 128;
inline constexpr Index kDefaultBlockCols = 128;

template <class T>
struct CsrMatrix {
  Index rows = 0;
  Index cols = 0;
  std::vector<Index> row_ptr{0};  // rows + 1 entries
  std::vector<Index> col_idx;     // nnz entries
  std::vector<T> values;          // nnz entries

  // Stored entries (explicit zeros included when a negative threshold kept them).
  Index nnz() const { return static_cast<Index>(values.size()); }
  // Stored entries over rows * cols; 0 for an empty matrix.
  double density() const;
};

template <class T>
struct BsrMatrix {
  Index rows = 0;
  Index cols = 0;
  Index block_rows = kDefaultBlockRows;
  Index block_cols = kDefaultBlockCols;
  std::vector<Index> block_row_ptr{0};  // block_row_count() + 1 entries
  std::vector<Index> block_col_idx;     // one per stored block
  std::vector<T> blocks;                // nblocks() * block_rows * block_cols, each block column-major

  // Number of block rows / columns, the last one possibly partial.
  Index block_row_count() const { return block_rows > 0 ? (rows + block_rows - 1) / block_rows : 0; }
  Index block_col_count() const { return block_cols > 0 ? (cols + block_cols - 1) / block_cols : 0; }
  Index nblocks() const { return static_cast<Index>(block_col_idx.size()); }
  Index block_size() const { return block_rows * block_cols; }
  // Stored block b: column-major, leading dimension block_rows.
  const T* block(Index b) const { return blocks.data() + b * block_size(); }
  T* block(Index b) { return blocks.data() + b * block_size(); }
  // Matrix entries covered by stored blocks (padding of edge blocks excluded, zeros inside blocks included).
  Index nnz() const;
  // nnz() over rows * cols; 0 for an empty matrix.
  double density() const;
};

// Keeps the entries with |x| > threshold (threshold 0 keeps the nonzeros; a negative threshold keeps every entry,
// zeros included). NaN entries are kept, so they are never silently dropped. A NaN threshold is a logic error.
template <class T>
CsrMatrix<T> csr_from_dense(ConstMatrixViewT<T> a, double threshold = 0.0);
// Stores a block when any of its entries has |x| > threshold (or is NaN). block_rows, block_cols >= 1.
template <class T>
BsrMatrix<T> bsr_from_dense(ConstMatrixViewT<T> a, Index block_rows = kDefaultBlockRows,
                            Index block_cols = kDefaultBlockCols, double threshold = 0.0);

// Mutable views and Eigen matrices convert too (template deduction would not see the conversion).
template <class T>
CsrMatrix<T> csr_from_dense(MatrixViewT<T> a, double threshold = 0.0) {
  return csr_from_dense(ConstMatrixViewT<T>(a), threshold);
}
template <class T>
CsrMatrix<T> csr_from_dense(const MatrixT<T>& a, double threshold = 0.0) {
  return csr_from_dense(view(a), threshold);
}
template <class T>
BsrMatrix<T> bsr_from_dense(MatrixViewT<T> a, Index block_rows = kDefaultBlockRows,
                            Index block_cols = kDefaultBlockCols, double threshold = 0.0) {
  return bsr_from_dense(ConstMatrixViewT<T>(a), block_rows, block_cols, threshold);
}
template <class T>
BsrMatrix<T> bsr_from_dense(const MatrixT<T>& a, Index block_rows = kDefaultBlockRows,
                            Index block_cols = kDefaultBlockCols, double threshold = 0.0) {
  return bsr_from_dense(view(a), block_rows, block_cols, threshold);
}

template <class T>
MatrixT<T> to_dense(const CsrMatrix<T>& s);
template <class T>
MatrixT<T> to_dense(const BsrMatrix<T>& s);

// Throw std::logic_error naming what is wrong: negative or inconsistent sizes, a row (block row) pointer that does
// not start at 0, decreases or does not end at the number of entries, column indices out of range or not strictly
// increasing within a row; for BSR also block sizes < 1 and nonzero padding in edge blocks.
template <class T>
void validate(const CsrMatrix<T>& s);
template <class T>
void validate(const BsrMatrix<T>& s);

}  // namespace dfmp2::linalg
