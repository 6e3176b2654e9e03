// Sparse matrices (linalg/sparse.hpp) and the spmm op: conversions from and to dense (thresholds, empty and odd
// shapes, edge blocks, skipped zero blocks), structure validation, and SpMM / SpMV on every backend built into this
// binary, called through linalg::Kernels, against naive loops on the dense form of S, in fp64 and fp32. Data come
// from fixed-seed mt19937_64 generators.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "devices/registry.hpp"
#include "../support/test_support.hpp"
#include "linalg/backend.hpp"
#include "linalg/op_call.hpp"
#include "linalg/kernel_log.hpp"
#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"
#include "linalg/ops.hpp"
#include "linalg/sparse.hpp"

namespace {

using dfmp2::linalg::BsrMatrix;
using dfmp2::linalg::ConstMatrixViewT;
using dfmp2::linalg::CsrMatrix;
using dfmp2::linalg::Index;
using dfmp2::linalg::KernelLog;
using dfmp2::linalg::Kernels;
using dfmp2::linalg::MatrixT;
using dfmp2::linalg::MatrixViewT;
using dfmp2::linalg::Trans;
using dfmp2::linalg::bsr_from_dense;
using dfmp2::linalg::csr_from_dense;
using dfmp2::linalg::to_dense;
using dfmp2::linalg::validate;

using Rng = std::mt19937_64;

template <class... Args>
std::string describe(const Args&... args) {
  std::ostringstream os;
  ((os << args << ' '), ...);
  return os.str();
}

const char* str(Trans t) { return t == Trans::no ? "N" : "T"; }

template <class T>
const char* type_name() {
  return std::is_same_v<T, double> ? "fp64" : "fp32";
}

// Relative tolerance of one product: ~1e-12 in fp64, ~1e-5 in fp32 (the brief's), times the size of the sums.
template <class T>
constexpr double kRel = std::is_same_v<T, double> ? 1e-12 : 1e-5;

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// A rows x cols matrix, each entry nonzero (uniform in [-1, 1]) with probability `density`; then the rectangles in
// `zero` (r0, c0, nr, nc) are cleared, so whole blocks can be empty.
struct Rect {
  Index r0, c0, nr, nc;
};
template <class T>
MatrixT<T> random_sparse(Index rows, Index cols, double density, Rng& rng, const std::vector<Rect>& zero = {}) {
  std::uniform_real_distribution<double> val(-1.0, 1.0), u(0.0, 1.0);
  MatrixT<T> m = MatrixT<T>::Zero(rows, cols);
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i)
      if (u(rng) < density) m(i, j) = static_cast<T>(val(rng));
  for (const Rect& r : zero)
    for (Index j = r.c0; j < std::min(cols, r.c0 + r.nc); ++j)
      for (Index i = r.r0; i < std::min(rows, r.r0 + r.nr); ++i) m(i, j) = T(0);
  return m;
}

template <class T>
void expect_bitwise_equal(const MatrixT<T>& got, const MatrixT<T>& expected) {
  ASSERT_EQ(got.rows(), expected.rows());
  ASSERT_EQ(got.cols(), expected.cols());
  long diff = 0;
  for (Index j = 0; j < got.cols(); ++j)
    for (Index i = 0; i < got.rows(); ++i)
      if (!same_bits(got(i, j), expected(i, j))) ++diff;
  EXPECT_EQ(diff, 0) << "elements differ";
}

template <class T>
Index count_nonzero(const MatrixT<T>& m) {
  Index n = 0;
  for (Index j = 0; j < m.cols(); ++j)
    for (Index i = 0; i < m.rows(); ++i) n += m(i, j) != T(0);
  return n;
}

// Blocks of m (block_rows x block_cols, edge blocks partial) with any entry |x| > threshold.
template <class T>
Index count_kept_blocks(const MatrixT<T>& m, Index br, Index bc, double threshold) {
  Index n = 0;
  for (Index r0 = 0; r0 < m.rows(); r0 += br)
    for (Index c0 = 0; c0 < m.cols(); c0 += bc) {
      bool any = false;
      for (Index j = c0; j < std::min(m.cols(), c0 + bc); ++j)
        for (Index i = r0; i < std::min(m.rows(), r0 + br); ++i) any = any || std::abs(double(m(i, j))) > threshold;
      n += any;
    }
  return n;
}

struct Shape {
  Index rows, cols;
};
struct BlockSize {
  Index r, c;
};

// ---------------------------------------------------------------------------------------------------------------
// Conversions

template <class T>
void csr_round_trips() {
  Rng rng(101);
  for (const Shape s : std::vector<Shape>{{0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 13}, {300, 190}})
    for (double density : {0.0, 0.05, 0.5, 1.0}) {
      SCOPED_TRACE(describe(type_name<T>(), "csr", s.rows, "x", s.cols, "density", density));
      const MatrixT<T> d = random_sparse<T>(s.rows, s.cols, density, rng);
      const CsrMatrix<T> c = csr_from_dense(d);
      EXPECT_NO_THROW(validate(c));
      EXPECT_EQ(c.rows, s.rows);
      EXPECT_EQ(c.cols, s.cols);
      EXPECT_EQ(c.row_ptr.size(), static_cast<size_t>(s.rows) + 1);
      EXPECT_EQ(c.nnz(), count_nonzero(d));
      EXPECT_EQ(c.col_idx.size(), static_cast<size_t>(c.nnz()));
      const double cells = double(s.rows) * double(s.cols);
      EXPECT_DOUBLE_EQ(c.density(), cells > 0 ? double(c.nnz()) / cells : 0.0);
      expect_bitwise_equal<T>(to_dense(c), d);
    }
}

TEST(SparseConversion, CsrRoundTripsExactly) {
  csr_round_trips<double>();
  csr_round_trips<float>();
}

TEST(SparseConversion, CsrThreshold) {
  MatrixT<double> d(3, 4);
  d << 0.5, -1e-9, 0.0, 2.0,  //
      -3e-3, 0.0, 1e-3, -1e-3,  //
      0.0, 0.0, 0.0, 0.0;
  // threshold 0 keeps every nonzero
  EXPECT_EQ(csr_from_dense(d, 0.0).nnz(), 6);
  // |x| > 1e-3 keeps 0.5, 2.0, -3e-3 (1e-3 itself is not > 1e-3)
  const CsrMatrix<double> c = csr_from_dense(d, 1e-3);
  EXPECT_EQ(c.nnz(), 3);
  EXPECT_EQ(c.row_ptr, (std::vector<Index>{0, 2, 3, 3}));
  EXPECT_EQ(c.col_idx, (std::vector<Index>{0, 3, 0}));
  MatrixT<double> expected = MatrixT<double>::Zero(3, 4);
  expected(0, 0) = 0.5;
  expected(0, 3) = 2.0;
  expected(1, 0) = -3e-3;
  expect_bitwise_equal<double>(to_dense(c), expected);
  // a threshold above everything keeps nothing; a negative one keeps every entry, zeros included
  EXPECT_EQ(csr_from_dense(d, 10.0).nnz(), 0);
  const CsrMatrix<double> all = csr_from_dense(d, -1.0);
  EXPECT_EQ(all.nnz(), 12);
  EXPECT_DOUBLE_EQ(all.density(), 1.0);
  expect_bitwise_equal<double>(to_dense(all), d);
  // NaN entries are kept whatever the threshold; a NaN threshold is a logic error
  MatrixT<double> n = MatrixT<double>::Zero(2, 2);
  n(1, 0) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(csr_from_dense(n, 1.0).nnz(), 1);
  EXPECT_EQ(bsr_from_dense(n, 1, 1, 1.0).nblocks(), 1);
  EXPECT_THROW(csr_from_dense(d, std::numeric_limits<double>::quiet_NaN()), std::logic_error);
  EXPECT_THROW(bsr_from_dense(d, 2, 2, std::numeric_limits<double>::quiet_NaN()), std::logic_error);
  // fp32: entries compare with the (double) threshold as they are; 0.5 is exact, and not > 0.5
  const MatrixT<float> f = d.cast<float>();
  EXPECT_EQ(csr_from_dense(f, 0.5).nnz(), 1);
  EXPECT_EQ(csr_from_dense(f, 0.0).nnz(), 6);
}

TEST(SparseConversion, StridedViewsConvert) {
  Rng rng(102);
  const MatrixT<double> big = random_sparse<double>(20, 15, 0.4, rng);
  const ConstMatrixViewT<double> sub{big.data() + 3 + 2 * 20, 11, 9, 20};  // rows 3..13, cols 2..10
  const MatrixT<double> expected = big.block(3, 2, 11, 9);
  expect_bitwise_equal<double>(to_dense(csr_from_dense(sub)), expected);
  expect_bitwise_equal<double>(to_dense(bsr_from_dense(sub, 4, 3)), expected);
}

template <class T>
void bsr_round_trips() {
  Rng rng(103);
  const std::vector<BlockSize> blocks = {{128, 128}, {64, 32}, {7, 5}, {1, 1}, {512, 512}};
  for (const Shape s : std::vector<Shape>{{0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 13}, {300, 190}})
    for (double density : {0.0, 0.002, 0.3})
      for (const BlockSize b : blocks) {
        SCOPED_TRACE(describe(type_name<T>(), "bsr", s.rows, "x", s.cols, "density", density, "block", b.r, "x", b.c));
        // Clear a band of rows and one of columns, so that some blocks are empty even at higher density.
        const MatrixT<T> d =
            random_sparse<T>(s.rows, s.cols, density, rng, {{0, s.cols / 3, s.rows, 40}, {s.rows / 2, 0, 70, s.cols}});
        const BsrMatrix<T> m = bsr_from_dense(d, b.r, b.c);
        EXPECT_NO_THROW(validate(m));
        EXPECT_EQ(m.block_rows, b.r);
        EXPECT_EQ(m.block_cols, b.c);
        EXPECT_EQ(m.block_row_count(), (s.rows + b.r - 1) / b.r);
        EXPECT_EQ(m.block_col_count(), (s.cols + b.c - 1) / b.c);
        EXPECT_EQ(m.block_row_ptr.size(), static_cast<size_t>(m.block_row_count()) + 1);
        EXPECT_EQ(m.nblocks(), count_kept_blocks(d, b.r, b.c, 0.0));
        EXPECT_EQ(m.blocks.size(), static_cast<size_t>(m.nblocks() * b.r * b.c));
        EXPECT_LE(count_nonzero(d), m.nnz());
        EXPECT_LE(m.nnz(), s.rows * s.cols);
        expect_bitwise_equal<T>(to_dense(m), d);
      }
}

TEST(SparseConversion, BsrRoundTripsExactlyWithEdgeBlocks) {
  bsr_round_trips<double>();
  bsr_round_trips<float>();
}

TEST(SparseConversion, BsrDefaultBlockIs128AndEdgeBlocksArePaddedWithZeros) {
  Rng rng(104);
  const MatrixT<double> d = random_sparse<double>(300, 190, 1.0, rng);  // dense: every block is stored
  const BsrMatrix<double> m = bsr_from_dense(d);
  EXPECT_EQ(m.block_rows, 128);
  EXPECT_EQ(m.block_cols, 128);
  ASSERT_EQ(m.nblocks(), 3 * 2);
  EXPECT_EQ(m.block_row_ptr, (std::vector<Index>{0, 2, 4, 6}));
  EXPECT_EQ(m.block_col_idx, (std::vector<Index>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(m.blocks.size(), static_cast<size_t>(6 * 128 * 128));
  EXPECT_EQ(m.nnz(), 300 * 190);  // padding is not counted
  EXPECT_DOUBLE_EQ(m.density(), 1.0);
  // The last block (block row 2: rows 256..299, block column 1: cols 128..189) is 44 x 62 inside the matrix.
  const double* last = m.block(5);
  for (Index j = 0; j < 128; ++j)
    for (Index i = 0; i < 128; ++i) {
      if (i < 44 && j < 62) EXPECT_EQ(last[i + j * 128], d(256 + i, 128 + j));
      else EXPECT_EQ(last[i + j * 128], 0.0) << i << "," << j;
    }
}

TEST(SparseConversion, BsrSkipsZeroBlocks) {
  Rng rng(105);
  // 300 x 190 in blocks of 64 x 32: 5 x 6 = 30 blocks. Dense everywhere except block rows 1 and 3 and block column
  // 4, which are cleared: 3 block rows x 5 block columns stay.
  const MatrixT<double> d =
      random_sparse<double>(300, 190, 1.0, rng, {{64, 0, 64, 190}, {192, 0, 64, 190}, {0, 128, 300, 32}});
  const BsrMatrix<double> m = bsr_from_dense(d, 64, 32);
  EXPECT_EQ(m.block_row_count(), 5);
  EXPECT_EQ(m.block_col_count(), 6);
  EXPECT_EQ(m.nblocks(), 15);
  EXPECT_EQ(m.block_row_ptr, (std::vector<Index>{0, 5, 5, 10, 10, 15}));
  for (Index b = 0; b < m.nblocks(); ++b) EXPECT_NE(m.block_col_idx[static_cast<size_t>(b)], 4);
  // stored entries: block rows 0, 2 (64 rows) and 4 (300 - 256 = 44 rows), all columns but 128..159
  EXPECT_EQ(m.nnz(), (64 + 64 + 44) * (190 - 32));
  EXPECT_DOUBLE_EQ(m.density(), double((64 + 64 + 44) * (190 - 32)) / (300.0 * 190.0));
  expect_bitwise_equal<double>(to_dense(m), d);

  // Threshold: a block of small entries is dropped as a whole; a kept block keeps its small entries too.
  MatrixT<double> t = MatrixT<double>::Constant(4, 4, 1e-6);
  t(0, 0) = 1.0;  // block (0, 0) of 2 x 2 blocks
  const BsrMatrix<double> mt = bsr_from_dense(t, 2, 2, 1e-3);
  EXPECT_EQ(mt.nblocks(), 1);
  MatrixT<double> expected = MatrixT<double>::Zero(4, 4);
  expected.block(0, 0, 2, 2) = t.block(0, 0, 2, 2);
  expect_bitwise_equal<double>(to_dense(mt), expected);
  EXPECT_EQ(bsr_from_dense(t, 2, 2, 0.0).nblocks(), 4);
  EXPECT_EQ(bsr_from_dense(t, 2, 2, 2.0).nblocks(), 0);
}

TEST(SparseConversion, EmptyMatrices) {
  const CsrMatrix<double> def;  // a default matrix is a valid 0 x 0 one
  EXPECT_NO_THROW(validate(def));
  EXPECT_EQ(def.nnz(), 0);
  EXPECT_EQ(def.density(), 0.0);
  const BsrMatrix<float> defb;
  EXPECT_NO_THROW(validate(defb));
  EXPECT_EQ(defb.nblocks(), 0);
  EXPECT_EQ(defb.nnz(), 0);

  const MatrixT<double> zero = MatrixT<double>::Zero(6, 9);
  const CsrMatrix<double> c = csr_from_dense(zero);
  EXPECT_EQ(c.nnz(), 0);
  EXPECT_EQ(c.row_ptr, std::vector<Index>(7, 0));
  EXPECT_EQ(c.density(), 0.0);
  const BsrMatrix<double> b = bsr_from_dense(zero, 4, 4);
  EXPECT_EQ(b.nblocks(), 0);
  EXPECT_EQ(b.block_row_ptr, std::vector<Index>(3, 0));
  EXPECT_TRUE(b.blocks.empty());
  expect_bitwise_equal<double>(to_dense(c), zero);
  expect_bitwise_equal<double>(to_dense(b), zero);
  EXPECT_EQ(to_dense(csr_from_dense(MatrixT<double>(0, 3))).cols(), 3);
  EXPECT_EQ(to_dense(bsr_from_dense(MatrixT<double>(4, 0))).rows(), 4);
  EXPECT_THROW(bsr_from_dense(zero, 0, 4), std::logic_error);
  EXPECT_THROW(bsr_from_dense(zero, 4, -1), std::logic_error);

  MatrixT<double> one(1, 1);
  one(0, 0) = -2.5;
  expect_bitwise_equal<double>(to_dense(csr_from_dense(one)), one);
  expect_bitwise_equal<double>(to_dense(bsr_from_dense(one)), one);
  EXPECT_EQ(bsr_from_dense(one).blocks.size(), static_cast<size_t>(128 * 128));
}

// ---------------------------------------------------------------------------------------------------------------
// Validation

CsrMatrix<double> small_csr() {
  MatrixT<double> d(3, 4);
  d << 1, 0, 2, 0,  //
      0, 0, 0, 3,   //
      4, 5, 0, 6;
  return csr_from_dense(d);  // row_ptr 0 2 3 6, col_idx 0 2 3 0 1 3
}

TEST(SparseValidation, MalformedCsrThrows) {
  const CsrMatrix<double> ok = small_csr();
  ASSERT_EQ(ok.row_ptr, (std::vector<Index>{0, 2, 3, 6}));
  EXPECT_NO_THROW(validate(ok));
  auto expect_bad = [](const CsrMatrix<double>& s, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_THROW(validate(s), std::logic_error);
    EXPECT_THROW(to_dense(s), std::logic_error);
  };
  CsrMatrix<double> s = ok;
  s.rows = -1;
  expect_bad(s, "negative rows");
  s = ok;
  s.row_ptr.pop_back();
  expect_bad(s, "row_ptr too short");
  s = ok;
  s.row_ptr[0] = 1;
  expect_bad(s, "row_ptr[0] != 0");
  s = ok;
  s.row_ptr = {0, 3, 2, 6};
  expect_bad(s, "row_ptr decreases");
  s = ok;
  s.row_ptr[3] = 5;
  expect_bad(s, "row_ptr does not end at nnz");
  s = ok;
  s.values.pop_back();
  expect_bad(s, "values shorter than col_idx");
  s = ok;
  s.col_idx[4] = 4;
  expect_bad(s, "column index == cols");
  s = ok;
  s.col_idx[0] = -1;
  expect_bad(s, "negative column index");
  s = ok;
  std::swap(s.col_idx[0], s.col_idx[1]);
  expect_bad(s, "unsorted row");
  s = ok;
  s.col_idx[4] = 0;
  expect_bad(s, "duplicate column");
  s = ok;
  s.cols = 3;
  expect_bad(s, "cols too small for the indices");
}

TEST(SparseValidation, MalformedBsrThrows) {
  Rng rng(106);
  const MatrixT<double> d = random_sparse<double>(10, 7, 1.0, rng, {{4, 0, 4, 3}});  // 4 x 3 blocks: 3 x 3 grid
  const BsrMatrix<double> ok = bsr_from_dense(d, 4, 3);
  ASSERT_EQ(ok.nblocks(), 8);
  EXPECT_NO_THROW(validate(ok));
  auto expect_bad = [](const BsrMatrix<double>& s, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_THROW(validate(s), std::logic_error);
    EXPECT_THROW(to_dense(s), std::logic_error);
  };
  BsrMatrix<double> s = ok;
  s.block_rows = 0;
  expect_bad(s, "zero block rows");
  s = ok;
  s.block_row_ptr.push_back(8);
  expect_bad(s, "block_row_ptr too long");
  s = ok;
  s.block_col_idx[0] = 3;
  expect_bad(s, "block column out of range");
  s = ok;
  std::swap(s.block_col_idx[0], s.block_col_idx[1]);
  expect_bad(s, "unsorted block row");
  s = ok;
  s.blocks.pop_back();
  expect_bad(s, "blocks too short");
  s = ok;
  s.block_row_ptr[1] = 9;
  expect_bad(s, "block_row_ptr beyond nblocks");
  s = ok;
  s.blocks[s.blocks.size() - 1] = 1.0;  // last block: rows 8..9, cols 6..6 inside; (3, 2) is padding
  expect_bad(s, "nonzero padding");
  s = ok;
  s.rows = 9;  // still 3 block rows, but the last block's row 9 - 8 = 1 becomes padding and is nonzero
  expect_bad(s, "padding after shrinking rows");
}

// ---------------------------------------------------------------------------------------------------------------
// SpMM on every backend

// Dense storage with optional padding: the view sits at (2, 1) inside a larger matrix (ld > rows) whose other
// entries must not change.
template <class T>
struct Dense {
  MatrixT<T> full;
  Index r0 = 0, c0 = 0, rows = 0, cols = 0;
  Index ld() const { return std::max<Index>(1, full.rows()); }
  MatrixViewT<T> view() { return {full.data() + r0 + c0 * ld(), rows, cols, ld()}; }
  ConstMatrixViewT<T> cview() const { return {full.data() + r0 + c0 * ld(), rows, cols, ld()}; }
  T at(Index i, Index j) const { return full(r0 + i, c0 + j); }
  void set(T v) {
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) full(r0 + i, c0 + j) = v;
  }
};

template <class T>
Dense<T> make_dense(Index rows, Index cols, bool padded, Rng& rng) {
  Dense<T> d;
  d.rows = rows;
  d.cols = cols;
  if (padded) {
    d.r0 = 2;
    d.c0 = 1;
  }
  d.full.resize(rows + (padded ? 5 : 0), cols + (padded ? 3 : 0));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (Index j = 0; j < d.full.cols(); ++j)
    for (Index i = 0; i < d.full.rows(); ++i) d.full(i, j) = static_cast<T>(dist(rng));
  return d;
}

// Expected C (in double) from naive loops on the dense S; beta == 0: C is not read. Also returns the error bound's
// scale: |alpha| max_i sum_l |op(S)_il| max|B| + |beta| max|C|.
template <class T>
MatrixT<double> reference(Trans ts, double alpha, const MatrixT<T>& s, const Dense<T>& b, double beta,
                          const Dense<T>& c, double& scale) {
  const Index m = c.rows, n = c.cols, k = b.rows;
  auto sat = [&](Index i, Index l) { return double(ts == Trans::no ? s(i, l) : s(l, i)); };
  MatrixT<double> r(m, n);
  double row_abs = 0, max_b = 0, max_c = 0;
  for (Index i = 0; i < m; ++i) {
    double a = 0;
    for (Index l = 0; l < k; ++l) a += std::abs(sat(i, l));
    row_abs = std::max(row_abs, a);
  }
  for (Index j = 0; j < n; ++j)
    for (Index l = 0; l < k; ++l) max_b = std::max(max_b, std::abs(double(b.at(l, j))));
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) {
      double sum = 0;
      for (Index l = 0; l < k; ++l) sum += sat(i, l) * double(b.at(l, j));
      r(i, j) = alpha * sum + (beta == 0.0 ? 0.0 : beta * double(c.at(i, j)));
      if (beta != 0.0) max_c = std::max(max_c, std::abs(double(c.at(i, j))));
    }
  scale = std::abs(alpha) * row_abs * max_b + std::abs(beta) * max_c;
  return r;
}

template <class T>
void expect_close(const Dense<T>& got, const MatrixT<double>& expected, double tol) {
  double worst = 0;
  long non_finite = 0;
  for (Index j = 0; j < got.cols; ++j)
    for (Index i = 0; i < got.rows; ++i) {
      const double g = double(got.at(i, j));
      if (!std::isfinite(g)) {
        ++non_finite;
        continue;
      }
      worst = std::max(worst, std::abs(g - expected(i, j)));
    }
  EXPECT_EQ(non_finite, 0) << "non-finite results";
  EXPECT_LE(worst, tol);
}

// Every element of `after` outside the view is bit-for-bit as it was.
template <class T>
void expect_outside_unchanged(const MatrixT<T>& before, const Dense<T>& after) {
  long changed = 0;
  for (Index j = 0; j < before.cols(); ++j)
    for (Index i = 0; i < before.rows(); ++i) {
      const bool inside = i >= after.r0 && i < after.r0 + after.rows && j >= after.c0 && j < after.c0 + after.cols;
      if (!inside && !same_bits(before(i, j), after.full(i, j))) ++changed;
    }
  EXPECT_EQ(changed, 0) << "elements outside the view were written";
}

template <class T>
void expect_all_unchanged(const MatrixT<T>& before, const MatrixT<T>& after, const char* what) {
  long changed = 0;
  for (Index j = 0; j < before.cols(); ++j)
    for (Index i = 0; i < before.rows(); ++i)
      if (!same_bits(before(i, j), after(i, j))) ++changed;
  EXPECT_EQ(changed, 0) << what << " was modified";
}

const std::vector<std::pair<double, double>> kAlphaBeta = {{1.0, 0.0}, {-0.75, 0.0}, {0.5, 1.0}, {-1.25, -0.5},
                                                           {0.0, 2.0}, {0.0, 0.0}};
const std::vector<Shape> kSpmmShapes = {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {37, 23}, {300, 190}};
const std::vector<Index> kColumns = {0, 1, 5, 17};
const std::vector<BlockSize> kBlocks = {{128, 128}, {64, 32}, {5, 7}};

class SparseOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = dfmp2::devices::make_backend(GetParam());
    ASSERT_NE(backend_, nullptr);
    kernels_ = std::make_unique<Kernels>(*backend_, log_);
  }
  Kernels& k() { return *kernels_; }

  // One SpMM through Kernels, of S given densely (`format` "csr" or a BSR block size), checked against the naive
  // loops: values, C outside its view untouched, B untouched. beta == 0 fills C with NaN first.
  template <class T>
  void check_one(const MatrixT<T>& sd, const std::string& format, BlockSize block, Trans ts, Index n, double alpha,
                 double beta, bool padded, Rng& rng) {
    const Index m = ts == Trans::no ? sd.rows() : sd.cols(), kk = ts == Trans::no ? sd.cols() : sd.rows();
    Dense<T> b = make_dense<T>(kk, n, padded, rng);
    Dense<T> c = make_dense<T>(m, n, padded, rng);
    if (beta == 0.0) c.set(std::numeric_limits<T>::quiet_NaN());
    if (alpha == 0.0) b.set(std::numeric_limits<T>::quiet_NaN());  // alpha == 0: B must not be read
    const MatrixT<T> b_before = b.full, c_before = c.full;
    double scale = 0;
    const MatrixT<double> expected =
        alpha == 0.0 ? reference<T>(ts, 0.0, MatrixT<T>::Zero(sd.rows(), sd.cols()), make_dense<T>(kk, n, false, rng),
                                    beta, c, scale)
                     : reference<T>(ts, alpha, sd, b, beta, c, scale);
    if (format == "csr") {
      k().spmm<T>("test", ts, T(alpha), csr_from_dense(sd), b.cview(), T(beta), c.view());
    } else {
      k().spmm<T>("test", ts, T(alpha), bsr_from_dense(sd, block.r, block.c), b.cview(), T(beta), c.view());
    }
    expect_close(c, expected, kRel<T> * (scale + 1e-300));
    expect_outside_unchanged(c_before, c);
    expect_all_unchanged(b_before, b.full, "B");
  }

  template <class T>
  void spmm_matches_naive_loops() {
    Rng rng(std::is_same_v<T, double> ? 201 : 202);
    for (const Shape s : kSpmmShapes) {
      // Some blocks empty (cleared bands), the rest about 30% full.
      const MatrixT<T> sd =
          random_sparse<T>(s.rows, s.cols, 0.3, rng, {{0, s.cols / 2, s.rows, 30}, {s.rows / 3, 0, 40, s.cols}});
      for (Index n : kColumns)
        for (Trans ts : {Trans::no, Trans::yes})
          for (const auto& [alpha, beta] : kAlphaBeta)
            for (bool padded : {false, true}) {
              SCOPED_TRACE(describe(type_name<T>(), "S", s.rows, "x", s.cols, "n", n, str(ts), "alpha", alpha, "beta",
                                    beta, "padded", padded));
              {
                SCOPED_TRACE("csr");
                check_one<T>(sd, "csr", {}, ts, n, alpha, beta, padded, rng);
              }
              for (const BlockSize bs : kBlocks) {
                SCOPED_TRACE(describe("bsr", bs.r, "x", bs.c));
                check_one<T>(sd, "bsr", bs, ts, n, alpha, beta, padded, rng);
              }
            }
    }
  }

  std::unique_ptr<dfmp2::linalg::Backend> backend_;
  KernelLog log_;
  std::unique_ptr<Kernels> kernels_;
};

TEST_P(SparseOps, SupportsSpmmInBothPrecisions) {
  EXPECT_TRUE(backend_->supports(dfmp2::linalg::Op::spmm, dfmp2::linalg::DType::fp64));
  EXPECT_TRUE(backend_->supports(dfmp2::linalg::Op::spmm, dfmp2::linalg::DType::fp32));
  EXPECT_EQ(dfmp2::linalg::op_name(dfmp2::linalg::Op::spmm), "spmm");
}

TEST_P(SparseOps, SpmmFp64MatchesNaiveLoops) { spmm_matches_naive_loops<double>(); }
TEST_P(SparseOps, SpmmFp32MatchesNaiveLoops) { spmm_matches_naive_loops<float>(); }

// alpha == 0: neither S nor B is read (NaN in both), C = beta C; beta == 0 as well: C = 0 without reading it.
TEST_P(SparseOps, AlphaZeroReadsNeitherSNorB) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const MatrixT<double> sd = MatrixT<double>::Constant(4, 3, nan);
  const CsrMatrix<double> csr = csr_from_dense(sd);
  const BsrMatrix<double> bsr = bsr_from_dense(sd, 2, 2);
  ASSERT_EQ(csr.nnz(), 12);
  ASSERT_EQ(bsr.nblocks(), 4);
  MatrixT<double> b = MatrixT<double>::Constant(3, 2, nan), bt = MatrixT<double>::Constant(4, 2, nan);
  using dfmp2::linalg::view;
  for (Trans ts : {Trans::no, Trans::yes}) {
    SCOPED_TRACE(str(ts));
    const MatrixT<double>& bb = ts == Trans::no ? b : bt;
    const Index m = ts == Trans::no ? 4 : 3;
    MatrixT<double> c = MatrixT<double>::Constant(m, 2, 1.5);
    k().spmm("s", ts, 0.0, csr, view(bb), 2.0, view(c));
    EXPECT_TRUE((c.array() == 3.0).all()) << c;
    k().spmm("s", ts, 0.0, bsr, view(bb), -2.0, view(c));
    EXPECT_TRUE((c.array() == -6.0).all()) << c;
    c.setConstant(nan);
    k().spmm("s", ts, 0.0, csr, view(bb), 0.0, view(c));
    EXPECT_TRUE((c.array() == 0.0).all()) << c;
    c.setConstant(nan);
    k().spmm("s", ts, 0.0, bsr, view(bb), 0.0, view(c));
    EXPECT_TRUE((c.array() == 0.0).all()) << c;
  }
}

template <class T>
void spmv_case(Kernels& k, Rng& rng) {
  const MatrixT<T> sd = random_sparse<T>(45, 31, 0.2, rng, {{0, 8, 45, 8}});
  const CsrMatrix<T> csr = csr_from_dense(sd);
  const BsrMatrix<T> bsr = bsr_from_dense(sd, 8, 4);
  for (Trans ts : {Trans::no, Trans::yes}) {
    SCOPED_TRACE(describe(type_name<T>(), str(ts)));
    const Index m = ts == Trans::no ? 45 : 31, kk = ts == Trans::no ? 31 : 45;
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<T> x(static_cast<size_t>(kk)), y0(static_cast<size_t>(m));
    for (auto& v : x) v = static_cast<T>(dist(rng));
    for (auto& v : y0) v = static_cast<T>(dist(rng));
    const T alpha = T(0.75), beta = T(-0.5);
    std::vector<double> expected(static_cast<size_t>(m));
    double scale = 0;
    for (Index i = 0; i < m; ++i) {
      double s = 0, a = 0;
      for (Index l = 0; l < kk; ++l) {
        const double sv = ts == Trans::no ? sd(i, l) : sd(l, i);
        s += sv * double(x[static_cast<size_t>(l)]);
        a += std::abs(sv);
      }
      expected[static_cast<size_t>(i)] = double(alpha) * s + double(beta) * double(y0[static_cast<size_t>(i)]);
      scale = std::max(scale, 0.75 * a + 0.5);
    }
    std::vector<T> y = y0, yb = y0;
    k.spmv<T>("v", ts, alpha, csr, x.data(), beta, y.data());
    k.spmv<T>("v", ts, alpha, bsr, x.data(), beta, yb.data());
    for (Index i = 0; i < m; ++i) {
      EXPECT_NEAR(double(y[static_cast<size_t>(i)]), expected[static_cast<size_t>(i)], kRel<T> * scale) << i;
      EXPECT_NEAR(double(yb[static_cast<size_t>(i)]), expected[static_cast<size_t>(i)], kRel<T> * scale) << i;
    }
  }
}

TEST_P(SparseOps, SpmvIsSpmmWithOneColumn) {
  Rng rng(203);
  spmv_case<double>(k(), rng);
  spmv_case<float>(k(), rng);
  // Logged as SpMM, one record per (kernel, dtype), each with 2 calls (N and T).
  const auto& r = log_.records();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].kernel, "spmm_csr");
  EXPECT_EQ(r[1].kernel, "spmm_bsr");
  EXPECT_EQ(r[0].dtype, "fp64");
  EXPECT_EQ(r[2].dtype, "fp32");
  for (const auto& rec : r) EXPECT_EQ(rec.calls, 2);
  // An empty S with null vectors is fine (nothing to read or write); a null vector of nonzero length is not.
  const CsrMatrix<double> empty;
  EXPECT_NO_THROW(k().spmv("v", Trans::no, 1.0, empty, nullptr, 0.0, nullptr));
  const CsrMatrix<double> s = csr_from_dense(MatrixT<double>::Identity(2, 2).eval());
  double y[2];
  EXPECT_THROW(k().spmv("v", Trans::no, 1.0, s, nullptr, 0.0, y), std::logic_error);
}

TEST_P(SparseOps, ShapeMismatchesAndMalformedMatricesThrowBeforeTheBackendRuns) {
  using dfmp2::linalg::view;
  const MatrixT<double> sd = MatrixT<double>::Identity(3, 4);  // S 3 x 4
  const CsrMatrix<double> csr = csr_from_dense(sd);
  const BsrMatrix<double> bsr = bsr_from_dense(sd, 2, 2);
  MatrixT<double> b42 = MatrixT<double>::Ones(4, 2), b32 = MatrixT<double>::Ones(3, 2);
  MatrixT<double> c32 = MatrixT<double>::Constant(3, 2, 7.0), c42 = MatrixT<double>::Constant(4, 2, 7.0),
                  c33 = MatrixT<double>::Constant(3, 3, 7.0);
  auto both = [&](auto&& call) {
    call(csr);
    call(bsr);
  };
  both([&](const auto& s) {
    // B must have cols(op(S)) rows
    EXPECT_THROW(k().spmm("s", Trans::no, 1.0, s, view(b32), 0.0, view(c32)), std::logic_error);
    EXPECT_THROW(k().spmm("s", Trans::yes, 1.0, s, view(b42), 0.0, view(c42)), std::logic_error);
    // C must be rows(op(S)) x cols(B)
    EXPECT_THROW(k().spmm("s", Trans::no, 1.0, s, view(b42), 0.0, view(c42)), std::logic_error);
    EXPECT_THROW(k().spmm("s", Trans::no, 1.0, s, view(b42), 0.0, view(c33)), std::logic_error);
    EXPECT_THROW(k().spmm("s", Trans::yes, 1.0, s, view(b32), 0.0, view(c32)), std::logic_error);
    // leading dimension below the row count, negative dimensions
    EXPECT_THROW(k().spmm("s", Trans::no, 1.0, s, ConstMatrixViewT<double>{b42.data(), 4, 2, 3}, 0.0, view(c32)),
                 std::logic_error);
    EXPECT_THROW(k().spmm("s", Trans::no, 1.0, s, view(b42), 0.0, MatrixViewT<double>{c32.data(), 3, 2, 2}),
                 std::logic_error);
    EXPECT_THROW(k().spmm("s", Trans::no, 1.0, s, ConstMatrixViewT<double>{b42.data(), 4, -1, 4}, 0.0,
                          MatrixViewT<double>{c32.data(), 3, -1, 3}),
                 std::logic_error);
  });
  // A malformed S is refused by the front end (the backend could otherwise read out of bounds).
  CsrMatrix<double> bad = csr;
  bad.col_idx[0] = 9;
  EXPECT_THROW(k().spmm("s", Trans::no, 1.0, bad, view(b42), 0.0, view(c32)), std::logic_error);
  BsrMatrix<double> badb = bsr;
  badb.block_col_idx.back() = 5;
  EXPECT_THROW(k().spmm("s", Trans::no, 1.0, badb, view(b42), 0.0, view(c32)), std::logic_error);

  EXPECT_TRUE(log_.records().empty()) << "a rejected call was logged";
  EXPECT_TRUE((c32.array() == 7.0).all());
  EXPECT_TRUE((c42.array() == 7.0).all());
  EXPECT_TRUE((c33.array() == 7.0).all());
  // The well-formed call goes through.
  EXPECT_NO_THROW(k().spmm("s", Trans::no, 1.0, csr, view(b42), 0.0, view(c32)));
  EXPECT_NO_THROW(k().spmm("s", Trans::yes, 1.0, bsr, view(b32), 0.0, view(c42)));
}

TEST_P(SparseOps, KernelLogRecordsSpmmCsrAndBsrWithTheirCosts) {
  using dfmp2::linalg::view;
  using dfmp2::linalg::spmm_bsr_cost;
  using dfmp2::linalg::spmm_csr_cost;
  Rng rng(204);
  const Index m = 50, kk = 40, n = 6;
  const MatrixT<double> sd = random_sparse<double>(m, kk, 0.1, rng, {{0, 0, 16, 40}});
  const CsrMatrix<double> csr = csr_from_dense(sd);
  const BsrMatrix<double> bsr = bsr_from_dense(sd, 16, 8);
  MatrixT<double> b = MatrixT<double>::Ones(kk, n), c = MatrixT<double>::Zero(m, n);
  k().spmm("fit", Trans::no, 1.0, csr, view(b), 0.0, view(c));
  k().spmm("fit", Trans::no, 1.0, csr, view(b), 1.0, view(c));
  k().spmm("fit", Trans::no, 2.0, bsr, view(b), 0.0, view(c));
  const MatrixT<float> sf = sd.cast<float>();
  MatrixT<float> bf = MatrixT<float>::Ones(m, n), cf = MatrixT<float>::Zero(kk, n);
  k().spmm("fit", Trans::yes, 1.0f, csr_from_dense(sf), view(bf), 0.0f, view(cf));

  const auto& r = log_.records();
  ASSERT_EQ(r.size(), 3u);
  const double nnz = double(csr.nnz()), nb = double(bsr.nblocks());
  ASSERT_GT(nnz, 0);
  ASSERT_GT(nb, 0);
  EXPECT_LT(nb, 7.0 * 5.0) << "the cleared block row must not be stored";
  EXPECT_EQ(r[0].step, "fit");
  EXPECT_EQ(r[0].kernel, "spmm_csr");
  EXPECT_EQ(r[0].backend, GetParam());
  EXPECT_EQ(r[0].dtype, "fp64");
  EXPECT_EQ(r[0].calls, 2);
  EXPECT_DOUBLE_EQ(r[0].flops, 2 * 2.0 * nnz * n);
  EXPECT_DOUBLE_EQ(r[0].bytes, spmm_csr_cost(nnz, n, kk, m, false).bytes + spmm_csr_cost(nnz, n, kk, m, true).bytes);
  EXPECT_DOUBLE_EQ(spmm_csr_cost(nnz, n, kk, m).bytes, nnz * (8 + 8) + 8.0 * (kk * n + m * n));
  EXPECT_EQ(r[1].kernel, "spmm_bsr");
  EXPECT_EQ(r[1].calls, 1);
  EXPECT_DOUBLE_EQ(r[1].flops, 2.0 * nb * 16 * 8 * n);  // whole blocks, edge padding included
  EXPECT_DOUBLE_EQ(r[1].bytes, spmm_bsr_cost(nb, 16, 8, n, kk, m).bytes);
  EXPECT_DOUBLE_EQ(spmm_bsr_cost(nb, 16, 8, n, kk, m).bytes, nb * (16 * 8 * 8 + 8) + 8.0 * (kk * n + m * n));
  EXPECT_EQ(r[2].kernel, "spmm_csr");
  EXPECT_EQ(r[2].dtype, "fp32");
  EXPECT_DOUBLE_EQ(r[2].flops, 2.0 * nnz * n);
  // fp32: 4-byte values, 8-byte indices
  EXPECT_DOUBLE_EQ(r[2].bytes, nnz * (4 + 8) + 4.0 * (m * n + kk * n));
  for (const auto& rec : r) EXPECT_GE(rec.seconds, 0.0);
}

std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Built, SparseOps, ::testing::ValuesIn(dfmp2::testing::cpu_backends()),
                         backend_param_name);

// ---------------------------------------------------------------------------------------------------------------
// eigen and openblas agree, on problems large enough for the threaded paths

template <class T>
void cross_backend_agree(Kernels& ke, Kernels& ko) {
  Rng rng(std::is_same_v<T, double> ? 301 : 302);
  const MatrixT<T> sd = random_sparse<T>(420, 260, 0.2, rng, {{128, 0, 128, 260}, {0, 128, 420, 64}});
  const CsrMatrix<T> csr = csr_from_dense(sd, 0.05);
  const BsrMatrix<T> bsr = bsr_from_dense(sd, 128, 64, 0.05);
  const BsrMatrix<T> bsr_default = bsr_from_dense(sd);
  for (Trans ts : {Trans::no, Trans::yes})
    for (Index n : {1, 24})
      for (const auto& [alpha, beta] : std::vector<std::pair<double, double>>{{1.0, 0.0}, {-0.5, 1.5}}) {
        SCOPED_TRACE(describe(type_name<T>(), str(ts), "n", n, alpha, beta));
        const Index m = ts == Trans::no ? 420 : 260, kk = ts == Trans::no ? 260 : 420;
        const Dense<T> b = make_dense<T>(kk, n, true, rng);
        const Dense<T> c0 = make_dense<T>(m, n, true, rng);
        double scale = 0;
        const MatrixT<double> dense_ref = reference<T>(ts, alpha, to_dense(csr), b, beta, c0, scale);
        auto run = [&](Kernels& kr, const auto& s) {
          Dense<T> c = c0;
          kr.spmm<T>("x", ts, T(alpha), s, b.cview(), T(beta), c.view());
          return c;
        };
        const Dense<T> ce = run(ke, csr), co = run(ko, csr);
        expect_close(co, ce.full.template cast<double>().block(ce.r0, ce.c0, m, n).eval(), kRel<T> * scale);
        expect_close(co, dense_ref, kRel<T> * scale);
        expect_outside_unchanged(c0.full, co);
        double scale_b = 0;
        const MatrixT<double> bsr_ref = reference<T>(ts, alpha, to_dense(bsr), b, beta, c0, scale_b);
        const Dense<T> be = run(ke, bsr), bo = run(ko, bsr);
        expect_close(bo, be.full.template cast<double>().block(be.r0, be.c0, m, n).eval(), kRel<T> * scale_b);
        expect_close(bo, bsr_ref, kRel<T> * scale_b);
        const Dense<T> de = run(ke, bsr_default), dd = run(ko, bsr_default);
        expect_close(dd, de.full.template cast<double>().block(de.r0, de.c0, m, n).eval(), kRel<T> * scale_b);
      }
}

TEST(SparseCrossBackend, EigenAndOpenblasAgree) {
  const auto built = dfmp2::testing::cpu_backends();
  for (const char* name : {"eigen", "openblas"})
    if (std::find(built.begin(), built.end(), name) == built.end()) GTEST_SKIP() << name << " is not built";
  auto eigen = dfmp2::devices::make_backend("eigen");
  auto openblas = dfmp2::devices::make_backend("openblas");
  KernelLog log;
  Kernels ke(*eigen, log), ko(*openblas, log);
  cross_backend_agree<double>(ke, ko);
  cross_backend_agree<float>(ke, ko);
}

}  // namespace
