// Backend tests: every op of the linalg::Backend interface, on every backend built into this binary, called
// through linalg::Kernels (so the shape checks and the kernel log are exercised too), against naive loops
// written here. Shapes are deliberately awkward: 1x1, non-square, zero-sized, and sub-blocks of larger
// matrices whose leading dimension exceeds their row count. Data come from a fixed-seed mt19937_64.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "devices/packed/packed_backend.hpp"
#include "devices/eigen/eigen_backend.hpp"
#include "devices/openblas/openblas_backend.hpp"
#include "devices/calibration.hpp"
#include "devices/registry.hpp"
#include "../support/test_support.hpp"
#include "linalg/backend.hpp"
#include "linalg/op_call.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernel_log.hpp"
#include "linalg/kept_files.hpp"
#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"
#include "linalg/ops.hpp"

namespace {

using dfmp2::linalg::BatchStrides;
using dfmp2::linalg::BsrMatrix;
using dfmp2::linalg::ConstMatrixView;
using dfmp2::linalg::ConstMatrixViewF;
using dfmp2::linalg::CsrMatrix;
using dfmp2::linalg::Diag;
using dfmp2::linalg::Index;
using dfmp2::linalg::KernelLog;
using dfmp2::linalg::KernelRecord;
using dfmp2::linalg::Kernels;
using dfmp2::linalg::Matrix;
using dfmp2::linalg::MatrixView;
using dfmp2::linalg::MatrixViewF;
using dfmp2::linalg::Op;
using dfmp2::linalg::Side;
using dfmp2::linalg::Trans;
using dfmp2::linalg::Uplo;

using Rng = std::mt19937_64;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kEps = 1e-14;  // per-operation relative tolerance, scaled by the size of the sums below
constexpr double kCrossTol = 1e-10;

const char* str(Trans t) { return t == Trans::no ? "N" : "T"; }
const char* str(Uplo u) { return u == Uplo::lower ? "L" : "U"; }
const char* str(Side s) { return s == Side::left ? "left" : "right"; }
const char* str(Diag d) { return d == Diag::unit ? "unit" : "non_unit"; }

template <class... Args>
std::string describe(const Args&... args) {
  std::ostringstream os;
  ((os << args << ' '), ...);
  return os.str();
}

// ---------------------------------------------------------------------------------------------------------------
// Storage: a rows x cols block inside an owning matrix. Padded blocks sit at an offset inside a larger matrix, so
// their leading dimension exceeds their row count and the memory around them can be checked for stray writes.

void fill_random(Matrix& m, Rng& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (Index j = 0; j < m.cols(); ++j)
    for (Index i = 0; i < m.rows(); ++i) m(i, j) = dist(rng);
}

struct Block {
  Matrix full;
  Index r0 = 0, c0 = 0, rows = 0, cols = 0;

  Index ld() const { return std::max<Index>(1, full.rows()); }
  MatrixView view() { return {full.data() + r0 + c0 * ld(), rows, cols, ld()}; }
  ConstMatrixView cview() const { return {full.data() + r0 + c0 * ld(), rows, cols, ld()}; }
  double& at(Index i, Index j) { return full(r0 + i, c0 + j); }
  double at(Index i, Index j) const { return full(r0 + i, c0 + j); }
  Matrix copy() const {
    Matrix m(rows, cols);
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) m(i, j) = at(i, j);
    return m;
  }
  void set(double v) {
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) at(i, j) = v;
  }
};

Block make_block(Index rows, Index cols, bool padded, Rng& rng) {
  Block b;
  b.rows = rows;
  b.cols = cols;
  if (padded) {
    b.r0 = 2;
    b.c0 = 1;
    b.full.resize(rows + 5, cols + 3);
  } else {
    b.full.resize(rows, cols);
  }
  fill_random(b.full, rng);
  return b;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every element of `after` outside the block is bit-for-bit what it was in `before`.
void expect_outside_unchanged(const Matrix& before, const Block& after) {
  ASSERT_EQ(before.rows(), after.full.rows());
  ASSERT_EQ(before.cols(), after.full.cols());
  long changed = 0;
  for (Index j = 0; j < before.cols(); ++j)
    for (Index i = 0; i < before.rows(); ++i) {
      const bool inside = i >= after.r0 && i < after.r0 + after.rows && j >= after.c0 && j < after.c0 + after.cols;
      if (!inside && !same_bits(before(i, j), after.full(i, j))) ++changed;
    }
  EXPECT_EQ(changed, 0) << "elements outside the view were written";
}

void expect_all_unchanged(const Matrix& before, const Matrix& after, const char* what) {
  ASSERT_EQ(before.rows(), after.rows());
  ASSERT_EQ(before.cols(), after.cols());
  long changed = 0;
  for (Index j = 0; j < before.cols(); ++j)
    for (Index i = 0; i < before.rows(); ++i)
      if (!same_bits(before(i, j), after(i, j))) ++changed;
  EXPECT_EQ(changed, 0) << what << " was modified";
}

double max_abs(const Matrix& m) {
  double r = 0;
  for (Index j = 0; j < m.cols(); ++j)
    for (Index i = 0; i < m.rows(); ++i) r = std::max(r, std::abs(m(i, j)));
  return r;
}

double max_abs(const ConstMatrixView& v) {
  double r = 0;
  for (Index j = 0; j < v.cols; ++j)
    for (Index i = 0; i < v.rows; ++i) r = std::max(r, std::abs(v(i, j)));
  return r;
}

// got and expected agree to tol everywhere (selected by `mask`, all elements by default) and got is finite there.
template <class Mask>
void expect_close_masked(const Matrix& got, const Matrix& expected, double tol, Mask mask) {
  ASSERT_EQ(got.rows(), expected.rows());
  ASSERT_EQ(got.cols(), expected.cols());
  double worst = 0;
  Index wi = -1, wj = -1;
  long non_finite = 0;
  for (Index j = 0; j < got.cols(); ++j)
    for (Index i = 0; i < got.rows(); ++i) {
      if (!mask(i, j)) continue;
      if (!std::isfinite(got(i, j))) {
        if (non_finite++ == 0) {
          wi = i;
          wj = j;
        }
        continue;
      }
      const double d = std::abs(got(i, j) - expected(i, j));
      if (d > worst) {
        worst = d;
        if (non_finite == 0) {
          wi = i;
          wj = j;
        }
      }
    }
  EXPECT_EQ(non_finite, 0) << "non-finite results, first at (" << wi << "," << wj << ")";
  EXPECT_LE(worst, tol) << "worst error at (" << wi << "," << wj << ")"
                        << (wi >= 0 ? describe(": got", got(wi, wj), "expected", expected(wi, wj)) : std::string());
}

void expect_close(const Matrix& got, const Matrix& expected, double tol) {
  expect_close_masked(got, expected, tol, [](Index, Index) { return true; });
}

// ---------------------------------------------------------------------------------------------------------------
// The reference: naive loops with BLAS semantics (beta == 0 means C is not read).

double op_at(const ConstMatrixView& a, Trans t, Index i, Index j) { return t == Trans::no ? a(i, j) : a(j, i); }

Matrix ref_gemm(Trans ta, Trans tb, double alpha, const ConstMatrixView& a, const ConstMatrixView& b, double beta,
                const Matrix& c0) {
  const Index m = c0.rows(), n = c0.cols();
  const Index k = ta == Trans::no ? a.cols : a.rows;
  Matrix c(m, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) {
      double s = 0;
      for (Index l = 0; l < k; ++l) s += op_at(a, ta, i, l) * op_at(b, tb, l, j);
      c(i, j) = alpha * s + (beta == 0.0 ? 0.0 : beta * c0(i, j));
    }
  return c;
}

bool in_triangle(Uplo uplo, Index i, Index j) { return uplo == Uplo::lower ? i >= j : i <= j; }

// Only the `uplo` triangle of the result is meaningful; the other triangle keeps c0.
Matrix ref_syrk(Uplo uplo, Trans trans, double alpha, const ConstMatrixView& a, double beta, const Matrix& c0) {
  const Index n = c0.rows();
  const Index k = trans == Trans::no ? a.cols : a.rows;
  Matrix c = c0;
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) {
      if (!in_triangle(uplo, i, j)) continue;
      double s = 0;
      for (Index l = 0; l < k; ++l) {
        // op(A) is n x k: A (Trans::no) or A^T (Trans::yes); C = op(A) op(A)^T.
        s += op_at(a, trans, i, l) * op_at(a, trans, j, l);
      }
      c(i, j) = alpha * s + (beta == 0.0 ? 0.0 : beta * c0(i, j));
    }
  return c;
}

// The triangular matrix a backend must see in A: the `uplo` triangle, with 1 on the diagonal when unit.
Matrix effective_triangle(const ConstMatrixView& a, Uplo uplo, Diag diag) {
  const Index n = a.rows;
  Matrix t = Matrix::Zero(n, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) {
      if (i == j) t(i, j) = diag == Diag::unit ? 1.0 : a(i, j);
      else if (in_triangle(uplo, i, j)) t(i, j) = a(i, j);
    }
  return t;
}

Matrix naive_product(const Matrix& x, bool tx, const Matrix& y, bool ty) {
  const Index m = tx ? x.cols() : x.rows();
  const Index k = tx ? x.rows() : x.cols();
  const Index n = ty ? y.rows() : y.cols();
  Matrix r(m, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) {
      double s = 0;
      for (Index l = 0; l < k; ++l) s += (tx ? x(l, i) : x(i, l)) * (ty ? y(j, l) : y(l, j));
      r(i, j) = s;
    }
  return r;
}

// A triangular matrix with diagonal in [2, 3] and off-diagonals in [-1, 1] / order (so op(A) is strictly
// diagonally dominant, also with a unit diagonal). The triangle that must not be referenced, and the diagonal when
// it must not be referenced, are NaN.
Block make_triangular(Index order, Uplo uplo, Diag diag, bool padded, Rng& rng) {
  Block a = make_block(order, order, padded, rng);
  std::uniform_real_distribution<double> off(-1.0, 1.0), on(2.0, 3.0);
  for (Index j = 0; j < order; ++j)
    for (Index i = 0; i < order; ++i) {
      if (i == j) a.at(i, j) = diag == Diag::unit ? kNaN : (j % 2 ? -1.0 : 1.0) * on(rng);
      else if (in_triangle(uplo, i, j)) a.at(i, j) = off(rng) / static_cast<double>(order);
      else a.at(i, j) = kNaN;
    }
  return a;
}

// A symmetric positive definite matrix, O(1) entries: G G^T / k + I.
Matrix make_spd(Index n, Rng& rng) {
  Matrix g(n, n + 3);
  fill_random(g, rng);
  Matrix s = naive_product(g, false, g, true) / static_cast<double>(n + 3);
  for (Index i = 0; i < n; ++i) s(i, i) += 1.0;
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// Shapes and scalars

struct GemmShape {
  Index m, n, k;
};
const std::vector<GemmShape> kGemmShapes = {{1, 1, 1},  {3, 7, 5},   {17, 1, 9}, {1, 9, 17}, {33, 65, 17},
                                            {70, 45, 130}, {0, 4, 3}, {4, 0, 3},  {4, 3, 0},  {0, 0, 0}};
const std::vector<std::pair<double, double>> kAlphaBeta = {{1.0, 0.0}, {-0.75, 0.0}, {0.5, 1.0}, {-1.25, -0.5}};
const std::vector<Trans> kTrans = {Trans::no, Trans::yes};
const std::vector<Uplo> kUplo = {Uplo::lower, Uplo::upper};
const std::vector<Side> kSide = {Side::left, Side::right};
const std::vector<Diag> kDiag = {Diag::non_unit, Diag::unit};
const std::vector<bool> kPadded = {false, true};

std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// ---------------------------------------------------------------------------------------------------------------
// Per-backend tests

class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = dfmp2::devices::make_backend(GetParam());
    ASSERT_NE(backend_, nullptr);
    // Two threads whatever the machine: the backends split large SYRK and TRSM calls across threads, and the
    // large shapes below must take that path.
    backend_->set_threads(2);
    kernels_ = std::make_unique<Kernels>(*backend_, log_);
  }
  Kernels& k() { return *kernels_; }

  std::unique_ptr<dfmp2::linalg::Backend> backend_;
  KernelLog log_;
  std::unique_ptr<Kernels> kernels_;
};

TEST_P(BackendOps, NameAndSupportsEveryOp) {
  EXPECT_EQ(backend_->name(), GetParam());
  for (Op op : dfmp2::linalg::kAllOps)
    for (auto dt : dfmp2::linalg::kAllDTypes)
      EXPECT_TRUE(backend_->supports(op, dt)) << dfmp2::linalg::op_name(op) << ' ' << dfmp2::linalg::dtype_name(dt);
}

TEST_P(BackendOps, GemmMatchesNaiveLoops) {
  Rng rng(1001);
  for (const auto& s : kGemmShapes)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        for (bool padded : kPadded)
          for (const auto& [alpha, beta] : kAlphaBeta) {
            SCOPED_TRACE(describe("gemm m", s.m, "n", s.n, "k", s.k, str(ta), str(tb), "padded", padded, "alpha",
                                  alpha, "beta", beta));
            Block a = ta == Trans::no ? make_block(s.m, s.k, padded, rng) : make_block(s.k, s.m, padded, rng);
            Block b = tb == Trans::no ? make_block(s.k, s.n, padded, rng) : make_block(s.n, s.k, padded, rng);
            Block c = make_block(s.m, s.n, padded, rng);
            if (beta == 0.0) c.set(kNaN);  // beta == 0: C must not be read
            const Matrix a_before = a.full, b_before = b.full, c_before = c.full;
            const Matrix expected = ref_gemm(ta, tb, alpha, a.cview(), b.cview(), beta, c.copy());

            k().gemm("test", ta, tb, alpha, a.cview(), b.cview(), beta, c.view());

            const double tol = kEps * (static_cast<double>(std::max<Index>(s.k, 1)) * std::abs(alpha) *
                                           max_abs(a.cview()) * max_abs(b.cview()) +
                                       (beta == 0.0 ? 0.0 : std::abs(beta) * max_abs(c_before)));
            expect_close(c.copy(), expected, tol);
            expect_outside_unchanged(c_before, c);
            expect_all_unchanged(a_before, a.full, "A");
            expect_all_unchanged(b_before, b.full, "B");
          }
}

// gemm_batched: `count` problems laid out in one buffer per operand, `stride` doubles apart, each a view with a
// leading dimension larger than its rows; stride 0 shares an operand between all problems.
struct BatchCase {
  Index count, m, n, k;
  bool share_a, share_b;
};

TEST_P(BackendOps, GemmBatchedMatchesNaiveLoops) {
  // Counts of 4 and 5 take the eigen backend's one-problem-per-thread path (count >= 2 x 2 threads).
  const std::vector<BatchCase> cases = {
      {3, 3, 7, 5, false, true},  {4, 17, 1, 9, true, false}, {2, 33, 65, 17, false, false},
      {5, 1, 1, 1, false, false}, {3, 4, 3, 0, false, true},  {3, 0, 4, 3, false, false},
      {3, 4, 0, 3, false, false}, {0, 5, 6, 7, false, false}, {1, 6, 5, 4, true, true},
      {4, 6, 5, 4, true, true}};
  Rng rng(2002);
  for (const auto& bc : cases)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        for (const auto& [alpha, beta] : kAlphaBeta) {
          SCOPED_TRACE(describe("gemm_batched count", bc.count, "m", bc.m, "n", bc.n, "k", bc.k, str(ta), str(tb),
                                "shareA", bc.share_a, "shareB", bc.share_b, "alpha", alpha, "beta", beta));
          const Index ar = ta == Trans::no ? bc.m : bc.k, ac = ta == Trans::no ? bc.k : bc.m;
          const Index br = tb == Trans::no ? bc.k : bc.n, bcol = tb == Trans::no ? bc.n : bc.k;
          const Index lda = ar + 2, ldb = br + 1, ldc = bc.m + 3;
          // Gaps between problems: stride = ld * cols + extra, so C problems never overlap.
          const BatchStrides strides{bc.share_a ? 0 : lda * ac + 3, bc.share_b ? 0 : ldb * bcol + 1,
                                     ldc * bc.n + 2};
          const Index na = std::max<Index>(1, bc.count) * std::max<Index>(strides.a, lda * ac) + 1;
          const Index nb = std::max<Index>(1, bc.count) * std::max<Index>(strides.b, ldb * bcol) + 1;
          const Index nc = std::max<Index>(1, bc.count) * strides.c + 1;
          Matrix abuf(na, 1), bbuf(nb, 1), cbuf(nc, 1);
          fill_random(abuf, rng);
          fill_random(bbuf, rng);
          fill_random(cbuf, rng);
          auto c_at = [&](Index p) { return MatrixView{cbuf.data() + p * strides.c, bc.m, bc.n, ldc}; };
          if (beta == 0.0)
            for (Index p = 0; p < bc.count; ++p) {
              const MatrixView cp = c_at(p);
              for (Index j = 0; j < bc.n; ++j)
                for (Index i = 0; i < bc.m; ++i) cp(i, j) = kNaN;
            }
          const Matrix cbuf_before = cbuf;
          std::vector<Matrix> expected;
          double max_c = 0;
          for (Index p = 0; p < bc.count; ++p) {
            const ConstMatrixView ap{abuf.data() + p * strides.a, ar, ac, lda};
            const ConstMatrixView bp{bbuf.data() + p * strides.b, br, bcol, ldb};
            Matrix c0(bc.m, bc.n);
            for (Index j = 0; j < bc.n; ++j)
              for (Index i = 0; i < bc.m; ++i) c0(i, j) = c_at(p)(i, j);
            if (beta != 0.0) max_c = std::max(max_c, max_abs(c0));
            expected.push_back(ref_gemm(ta, tb, alpha, ap, bp, beta, c0));
          }

          k().gemm_batched("test", ta, tb, bc.count, strides, alpha, ConstMatrixView{abuf.data(), ar, ac, lda},
                           ConstMatrixView{bbuf.data(), br, bcol, ldb}, beta, c_at(0));

          // Data are in [-1, 1].
          const double tol =
              kEps * (static_cast<double>(std::max<Index>(bc.k, 1)) * std::abs(alpha) + std::abs(beta) * max_c);
          std::vector<bool> inside(static_cast<size_t>(nc), false);
          for (Index p = 0; p < bc.count; ++p) {
            SCOPED_TRACE(describe("problem", p));
            Matrix got(bc.m, bc.n);
            for (Index j = 0; j < bc.n; ++j)
              for (Index i = 0; i < bc.m; ++i) {
                got(i, j) = c_at(p)(i, j);
                inside[static_cast<size_t>(p * strides.c + i + j * ldc)] = true;
              }
            expect_close(got, expected[static_cast<size_t>(p)], tol);
          }
          long changed = 0;
          for (Index i = 0; i < nc; ++i)
            if (!inside[static_cast<size_t>(i)] && !same_bits(cbuf(i, 0), cbuf_before(i, 0))) ++changed;
          EXPECT_EQ(changed, 0) << "elements of the C buffer outside the problems were written";
        }
}

struct SyrkShape {
  Index n, k;
};
// {300, 40}: large enough for the eigen backend's threaded panels (order >= 256), with a ragged last panel;
// {20, 301}: k >= 8n and >= 256, its split of the k columns over threads.
const std::vector<SyrkShape> kSyrkShapes = {{1, 1},   {7, 3},  {3, 7}, {17, 1}, {1, 17},   {33, 65},
                                            {65, 17}, {0, 3}, {4, 0}, {0, 0}, {300, 40}, {20, 301}};

TEST_P(BackendOps, SyrkMatchesNaiveLoopsAndLeavesOtherTriangle) {
  Rng rng(3003);
  for (const auto& s : kSyrkShapes)
    for (Uplo uplo : kUplo)
      for (Trans trans : kTrans)
        for (bool padded : kPadded)
          for (const auto& [alpha, beta] : kAlphaBeta) {
            SCOPED_TRACE(describe("syrk n", s.n, "k", s.k, str(uplo), str(trans), "padded", padded, "alpha", alpha,
                                  "beta", beta));
            Block a = trans == Trans::no ? make_block(s.n, s.k, padded, rng) : make_block(s.k, s.n, padded, rng);
            Block c = make_block(s.n, s.n, padded, rng);
            if (beta == 0.0)  // the referenced triangle must not be read
              for (Index j = 0; j < s.n; ++j)
                for (Index i = 0; i < s.n; ++i)
                  if (in_triangle(uplo, i, j)) c.at(i, j) = kNaN;
            const Matrix c_before = c.full;
            const Matrix c0 = c.copy();
            const Matrix expected = ref_syrk(uplo, trans, alpha, a.cview(), beta, c0);

            k().syrk("test", uplo, trans, alpha, a.cview(), beta, c.view());

            const Matrix got = c.copy();
            const double tol = kEps * (static_cast<double>(std::max<Index>(s.k, 1)) * std::abs(alpha) *
                                           max_abs(a.cview()) * max_abs(a.cview()) +
                                       (beta == 0.0 ? 0.0 : std::abs(beta) * max_abs(c0)));
            expect_close_masked(got, expected, tol, [&](Index i, Index j) { return in_triangle(uplo, i, j); });
            long changed = 0;
            for (Index j = 0; j < s.n; ++j)
              for (Index i = 0; i < s.n; ++i)
                if (!in_triangle(uplo, i, j) && !same_bits(got(i, j), c0(i, j))) ++changed;
            EXPECT_EQ(changed, 0) << "the other triangle of C was written";
            expect_outside_unchanged(c_before, c);
          }
}

struct TrsmShape {
  Index m, n;
};
// {70, 600} and {600, 70}: enough right-hand sides (>= 512) for the eigen backend's threaded slabs, on the left
// and on the right, with a ragged last slab.
const std::vector<TrsmShape> kTrsmShapes = {{1, 1},   {3, 7},   {7, 3}, {17, 1}, {1, 17},   {33, 65},
                                            {65, 20}, {0, 5},   {5, 0}, {70, 600}, {600, 70}};

TEST_P(BackendOps, TrsmSolvesEveryCombination) {
  Rng rng(4004);
  for (const auto& s : kTrsmShapes)
    for (Side side : kSide)
      for (Uplo uplo : kUplo)
        for (Trans trans : kTrans)
          for (Diag diag : kDiag)
            for (bool padded : kPadded)
              for (double alpha : {-1.7, 0.6}) {
                SCOPED_TRACE(describe("trsm m", s.m, "n", s.n, str(side), str(uplo), str(trans), str(diag), "padded",
                                      padded, "alpha", alpha));
                const Index order = side == Side::left ? s.m : s.n;
                const Block a = make_triangular(order, uplo, diag, padded, rng);
                Block b = make_block(s.m, s.n, padded, rng);
                const Matrix a_before = a.full, b_before = b.full;
                const Matrix b0 = b.copy();

                k().trsm("test", side, uplo, trans, diag, alpha, a.cview(), b.view());

                // Multiply back: op(A) X (left) or X op(A) (right) must equal alpha B.
                const Matrix x = b.copy();
                const Matrix t = effective_triangle(a.cview(), uplo, diag);
                const bool tt = trans == Trans::yes;
                const Matrix back = side == Side::left ? naive_product(t, tt, x, false) : naive_product(x, false, t, tt);
                const Matrix target = alpha * b0;
                const double tol = 4 * kEps * static_cast<double>(order + 1) *
                                   (max_abs(t) * max_abs(x) + std::abs(alpha) * max_abs(b0));
                expect_close(back, target, tol);
                expect_outside_unchanged(b_before, b);
                expect_all_unchanged(a_before, a.full, "A");
              }
}

TEST_P(BackendOps, CholeskyFactorsLowerAndUpper) {
  Rng rng(5005);
  for (Index n : {0, 1, 2, 5, 17, 33, 64, 100})
    for (Uplo uplo : kUplo)
      for (bool padded : kPadded) {
        SCOPED_TRACE(describe("cholesky n", n, str(uplo), "padded", padded));
        const Matrix spd = make_spd(n, rng);
        Block a = make_block(n, n, padded, rng);
        // The referenced triangle holds the matrix; the other triangle is NaN and must stay so, untouched.
        for (Index j = 0; j < n; ++j)
          for (Index i = 0; i < n; ++i) a.at(i, j) = in_triangle(uplo, i, j) ? spd(i, j) : kNaN;
        const Matrix a_before = a.full;
        const Matrix a0 = a.copy();

        k().cholesky("test", uplo, a.view());

        const Matrix got = a.copy();
        Matrix f = Matrix::Zero(n, n);  // the factor: L (lower) or U (upper)
        for (Index j = 0; j < n; ++j)
          for (Index i = 0; i < n; ++i)
            if (in_triangle(uplo, i, j)) f(i, j) = got(i, j);
        const Matrix rebuilt = uplo == Uplo::lower ? naive_product(f, false, f, true) : naive_product(f, true, f, false);
        expect_close(rebuilt, spd, 4 * kEps * static_cast<double>(n + 1) * max_abs(spd));
        for (Index i = 0; i < n; ++i) EXPECT_GT(got(i, i), 0.0) << "diagonal of the factor at " << i;
        long changed = 0;
        for (Index j = 0; j < n; ++j)
          for (Index i = 0; i < n; ++i)
            if (!in_triangle(uplo, i, j) && !same_bits(got(i, j), a0(i, j))) ++changed;
        EXPECT_EQ(changed, 0) << "the other triangle of A was written";
        expect_outside_unchanged(a_before, a);
      }
}

TEST_P(BackendOps, CholeskyOfNonPositiveDefiniteThrowsNumericalError) {
  Rng rng(6006);
  // Leading minors 1..4 are positive definite, minor 5 is not (A(4,4) far below its Schur complement).
  const Index n = 8, failing_minor = 5;
  for (Uplo uplo : kUplo) {
    SCOPED_TRACE(str(uplo));
    Matrix a = make_spd(n, rng);
    a(failing_minor - 1, failing_minor - 1) = -10.0;
    try {
      k().cholesky("test", uplo, dfmp2::linalg::view(a));
      ADD_FAILURE() << "no exception for a matrix that is not positive definite";
    } catch (const dfmp2::NumericalError& e) {
      if (GetParam() == "openblas") {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("minor"), std::string::npos) << msg;
        EXPECT_NE(msg.find(std::to_string(failing_minor)), std::string::npos) << msg;
      }
    }
  }
  for (Uplo uplo : kUplo) {  // a negative 1x1 matrix and a zero matrix
    Matrix neg(1, 1);
    neg(0, 0) = -1.0;
    EXPECT_THROW(k().cholesky("test", uplo, dfmp2::linalg::view(neg)), dfmp2::NumericalError);
    Matrix zero = Matrix::Zero(3, 3);
    EXPECT_THROW(k().cholesky("test", uplo, dfmp2::linalg::view(zero)), dfmp2::NumericalError);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Kernels front end: shape checks and the kernel log

TEST_P(BackendOps, ShapeMismatchesThrowLogicErrorBeforeTheBackendRuns) {
  Matrix a = Matrix::Constant(3, 4, 1.0), b = Matrix::Constant(5, 2, 1.0), c = Matrix::Constant(3, 2, 7.0);
  const Matrix c_before = c;
  using dfmp2::linalg::view;
  // gemm: inner dimensions 4 and 5 differ
  EXPECT_THROW(k().gemm("s", Trans::no, Trans::no, 1.0, view(a), view(b), 0.0, view(c)), std::logic_error);
  // gemm: C has the wrong shape (A 3x4 times B 4x2 is 3x2, C is 2x2)
  Matrix b42 = Matrix::Constant(4, 2, 1.0), c22 = Matrix::Constant(2, 2, 7.0);
  EXPECT_THROW(k().gemm("s", Trans::no, Trans::no, 1.0, view(a), view(b42), 0.0, view(c22)), std::logic_error);
  // gemm: transposes change which dimensions must agree (A^T is 4x3, inner 3 vs B's 4 rows)
  EXPECT_THROW(k().gemm("s", Trans::yes, Trans::no, 1.0, view(a), view(b42), 0.0, view(c)), std::logic_error);
  // gemm: leading dimension smaller than the row count
  EXPECT_THROW(k().gemm("s", Trans::no, Trans::no, 1.0, ConstMatrixView{a.data(), 3, 4, 2}, view(b42), 0.0, view(c)),
               std::logic_error);
  EXPECT_THROW(k().gemm("s", Trans::no, Trans::no, 1.0, view(a), view(b42), 0.0, MatrixView{c.data(), 3, 2, 0}),
               std::logic_error);
  // gemm: negative dimension
  EXPECT_THROW(k().gemm("s", Trans::no, Trans::no, 1.0, ConstMatrixView{a.data(), -1, 4, 3}, view(b42), 0.0, view(c)),
               std::logic_error);
  // gemm_batched: inner dimensions, C shape, negative count, negative stride, overlapping outputs, shared C
  EXPECT_THROW(k().gemm_batched("s", Trans::no, Trans::no, 2, {12, 10, 6}, 1.0, view(a), view(b), 0.0, view(c)),
               std::logic_error);
  EXPECT_THROW(k().gemm_batched("s", Trans::no, Trans::no, 2, {12, 8, 4}, 1.0, view(a), view(b42), 0.0, view(c22)),
               std::logic_error);
  EXPECT_THROW(k().gemm_batched("s", Trans::no, Trans::no, -1, {12, 8, 6}, 1.0, view(a), view(b42), 0.0, view(c)),
               std::logic_error);
  EXPECT_THROW(k().gemm_batched("s", Trans::no, Trans::no, 2, {-12, 8, 6}, 1.0, view(a), view(b42), 0.0, view(c)),
               std::logic_error);
  EXPECT_THROW(k().gemm_batched("s", Trans::no, Trans::no, 2, {12, 8, 5}, 1.0, view(a), view(b42), 0.0, view(c)),
               std::logic_error);
  EXPECT_THROW(k().gemm_batched("s", Trans::no, Trans::no, 2, {0, 0, 0}, 1.0, view(a), view(b42), 0.0, view(c)),
               std::logic_error);
  // syrk: C must be n x n with n = rows of op(A)
  Matrix c33 = Matrix::Constant(3, 3, 7.0), c44 = Matrix::Constant(4, 4, 7.0);
  EXPECT_THROW(k().syrk("s", Uplo::lower, Trans::no, 1.0, view(a), 0.0, view(c44)), std::logic_error);
  EXPECT_THROW(k().syrk("s", Uplo::upper, Trans::yes, 1.0, view(a), 0.0, view(c33)), std::logic_error);
  EXPECT_THROW(k().syrk("s", Uplo::lower, Trans::no, 1.0, view(a), 0.0, view(c)), std::logic_error);
  // trsm: A must be m x m (left) or n x n (right) for B m x n
  Matrix b34 = Matrix::Constant(3, 4, 1.0);
  EXPECT_THROW(k().trsm("s", Side::left, Uplo::lower, Trans::no, Diag::non_unit, 1.0, view(c44), view(b34)),
               std::logic_error);
  EXPECT_THROW(k().trsm("s", Side::right, Uplo::lower, Trans::no, Diag::non_unit, 1.0, view(c33), view(b34)),
               std::logic_error);
  EXPECT_THROW(k().trsm("s", Side::left, Uplo::upper, Trans::yes, Diag::unit, 1.0, view(a), view(b34)),
               std::logic_error);
  // cholesky: A must be square
  EXPECT_THROW(k().cholesky("s", Uplo::lower, view(a)), std::logic_error);
  EXPECT_THROW(k().cholesky("s", Uplo::lower, MatrixView{c33.data(), 3, 3, 2}), std::logic_error);

  EXPECT_TRUE(log_.records().empty()) << "a rejected call was logged";
  expect_all_unchanged(c_before, c, "C of a rejected call");
  expect_all_unchanged(Matrix::Constant(2, 2, 7.0), c22, "C of a rejected call");
  expect_all_unchanged(Matrix::Constant(3, 3, 7.0), c33, "C of a rejected call");
  expect_all_unchanged(Matrix::Constant(4, 4, 7.0), c44, "C of a rejected call");
  expect_all_unchanged(Matrix::Constant(3, 4, 1.0), b34, "B of a rejected call");
}

TEST_P(BackendOps, KernelLogRecordsCallsBackendAndFlops) {
  using dfmp2::linalg::view;
  Rng rng(7007);
  const Index m = 3, n = 7, kk = 5;
  Matrix a(m, kk), b(kk, n), c(m, n);
  fill_random(a, rng);
  fill_random(b, rng);
  fill_random(c, rng);
  k().gemm("fit", Trans::no, Trans::no, 1.0, view(a), view(b), 0.0, view(c));
  k().gemm("fit", Trans::no, Trans::no, 1.0, view(a), view(b), 1.0, view(c));

  Matrix abuf(2 * m * kk, 1), cbuf(4 * m * n, 1);
  fill_random(abuf, rng);
  k().gemm_batched("pairs", Trans::no, Trans::no, 4, {0, 0, m * n}, 1.0, ConstMatrixView{abuf.data(), m, kk, m},
                   view(b), 0.0, MatrixView{cbuf.data(), m, n, m});

  Matrix s(n, n);
  k().syrk("fit", Uplo::lower, Trans::yes, 1.0, view(b), 0.0, view(s));  // B^T B: n = 7, k = 5

  Rng trng(7008);
  const Block tl = make_triangular(m, Uplo::lower, Diag::non_unit, false, trng);
  const Block tr = make_triangular(n, Uplo::upper, Diag::non_unit, false, trng);
  k().trsm("solve", Side::left, Uplo::lower, Trans::no, Diag::non_unit, 2.0, tl.cview(), view(c));
  k().trsm("solve", Side::right, Uplo::upper, Trans::no, Diag::non_unit, 2.0, tr.cview(), view(c));

  Matrix spd = make_spd(6, rng);
  k().cholesky("metric", Uplo::lower, view(spd));
  k().record_host("metric", "read_3index", 0.25, {10.0, 80.0});

  const auto& r = log_.records();
  ASSERT_EQ(r.size(), 6u);
  const std::string be = GetParam();
  auto expect_record = [&](const KernelRecord& rec, const char* step, const char* kernel, const std::string& backend,
                           long calls, double flops, double bytes) {
    SCOPED_TRACE(describe(step, kernel));
    EXPECT_EQ(rec.step, step);
    EXPECT_EQ(rec.kernel, kernel);
    EXPECT_EQ(rec.backend, backend);
    EXPECT_EQ(rec.calls, calls);
    EXPECT_DOUBLE_EQ(rec.flops, flops);
    EXPECT_DOUBLE_EQ(rec.bytes, bytes);
    EXPECT_GE(rec.seconds, 0.0);
  };
  using namespace dfmp2::linalg;
  EXPECT_DOUBLE_EQ(gemm_cost(m, n, kk).flops, 2.0 * m * n * kk);
  expect_record(r[0], "fit", "gemm", be, 2, 2 * 2.0 * m * n * kk,
                gemm_cost(m, n, kk, false).bytes + gemm_cost(m, n, kk, true).bytes);
  expect_record(r[1], "pairs", "gemm_batched", be, 1, 4 * 2.0 * m * n * kk, gemm_batched_cost(4, m, n, kk).bytes);
  expect_record(r[2], "fit", "syrk", be, 1, syrk_cost(n, kk).flops, syrk_cost(n, kk).bytes);
  expect_record(r[3], "solve", "trsm", be, 2, trsm_cost(Side::left, m, n).flops + trsm_cost(Side::right, m, n).flops,
                trsm_cost(Side::left, m, n).bytes + trsm_cost(Side::right, m, n).bytes);
  EXPECT_DOUBLE_EQ(trsm_cost(Side::left, m, n).flops, double(m) * m * n);
  EXPECT_DOUBLE_EQ(trsm_cost(Side::right, m, n).flops, double(n) * n * m);
  expect_record(r[4], "metric", "cholesky", be, 1, cholesky_cost(6).flops, cholesky_cost(6).bytes);
  expect_record(r[5], "metric", "read_3index", "host", 1, 10.0, 80.0);
  EXPECT_GE(log_.total_seconds(), 0.25);
}

TEST_P(BackendOps, UnsupportedOpIsRefusedNotRerouted) {
  // A backend that supports nothing: Kernels must throw UnsupportedError and never call it.
  struct Refusing final : dfmp2::linalg::Backend {
    int calls = 0;
    std::string name() const override { return "refusing"; }
    bool supports(Op, dfmp2::linalg::DType) const override { return false; }
    void set_threads(int) override {}
    dfmp2::linalg::CallFacet execute(const dfmp2::linalg::OpCall&, dfmp2::linalg::MatmulMode) override {
      ++calls;
      return {};
    }
  } refusing;
  KernelLog log;
  Kernels kr(refusing, log);
  using dfmp2::linalg::view;
  Matrix a = Matrix::Identity(2, 2), c = Matrix::Zero(2, 2);
  EXPECT_THROW(kr.gemm("s", Trans::no, Trans::no, 1.0, view(a), view(a), 0.0, view(c)), dfmp2::UnsupportedError);
  EXPECT_THROW(kr.gemm_batched("s", Trans::no, Trans::no, 1, {}, 1.0, view(a), view(a), 0.0, view(c)),
               dfmp2::UnsupportedError);
  EXPECT_THROW(kr.syrk("s", Uplo::lower, Trans::no, 1.0, view(a), 0.0, view(c)), dfmp2::UnsupportedError);
  EXPECT_THROW(kr.trsm("s", Side::left, Uplo::lower, Trans::no, Diag::unit, 1.0, view(a), view(c)),
               dfmp2::UnsupportedError);
  EXPECT_THROW(kr.cholesky("s", Uplo::lower, view(a)), dfmp2::UnsupportedError);
  EXPECT_THROW(kr.spmm("s", Trans::no, 1.0, dfmp2::linalg::csr_from_dense(a), view(a), 0.0, view(c)),
               dfmp2::UnsupportedError);
  EXPECT_THROW(kr.spmm("s", Trans::no, 1.0, dfmp2::linalg::bsr_from_dense(a), view(a), 0.0, view(c)),
               dfmp2::UnsupportedError);
  EXPECT_EQ(refusing.calls, 0);
  EXPECT_TRUE(log.records().empty());
  // The real backend under test is unaffected.
  EXPECT_NO_THROW(k().gemm("s", Trans::no, Trans::no, 1.0, view(a), view(a), 0.0, view(c)));
}

// With an explicit host fallback (input key device.host_fallback) an unsupported op runs on the fallback, is
// logged under "<host> (fallback from <backend>)" with the fallback flag, and counted; supported ops still run
// on the backend asked for.
TEST_P(BackendOps, FallbackRunsOnTheHostAndIsCounted) {
  struct FloatOnly final : dfmp2::linalg::Backend {
    std::unique_ptr<dfmp2::linalg::Backend> inner = dfmp2::devices::make_backend("eigen");
    std::string name() const override { return "floatonly"; }
    bool supports(Op, dfmp2::linalg::DType t) const override { return t == dfmp2::linalg::DType::fp32; }
    void set_threads(int) override {}
    dfmp2::linalg::CallFacet execute(const dfmp2::linalg::OpCall& call, dfmp2::linalg::MatmulMode mode) override {
      if (dfmp2::linalg::dtype_of(call) != dfmp2::linalg::DType::fp32) ADD_FAILURE() << "fp64 reached the backend";
      return inner->run(call, mode);
    }
  } device;
  KernelLog log;
  Kernels kd(device, log);
  using dfmp2::linalg::view;
  Matrix a = Matrix::Identity(2, 2), c = Matrix::Zero(2, 2);
  EXPECT_THROW(kd.gemm("s", Trans::no, Trans::no, 1.0, view(a), view(a), 0.0, view(c)), dfmp2::UnsupportedError);
  kd.set_fallback(backend_.get());
  a(0, 1) = 3.0;
  kd.gemm("s", Trans::no, Trans::no, 2.0, view(a), view(a), 0.0, view(c));
  kd.gemm("s", Trans::no, Trans::no, 2.0, view(a), view(a), 0.0, view(c));
  EXPECT_DOUBLE_EQ(c(0, 1), 12.0);  // 2 * (A A)_01 = 2 * (1*3 + 3*1)
  Eigen::MatrixXf af = a.cast<float>(), cf = Eigen::MatrixXf::Zero(2, 2);
  kd.gemm("s", Trans::no, Trans::no, 1.0f, view(af), view(af), 0.0f, view(cf));
  ASSERT_EQ(log.records().size(), 2u);
  EXPECT_EQ(log.records()[0].backend, GetParam() + " (fallback from floatonly)");
  EXPECT_TRUE(log.records()[0].fallback);
  EXPECT_EQ(log.records()[0].dtype, "fp64");
  EXPECT_EQ(log.records()[1].backend, "floatonly");
  EXPECT_FALSE(log.records()[1].fallback);
  EXPECT_EQ(log.fallback_calls(), 2);
  // bf16 on a backend without it is refused, not ignored.
  EXPECT_THROW(kd.set_matmul_mode(dfmp2::linalg::MatmulMode::bf16), dfmp2::UnsupportedError);
}

// BLAS: with alpha == 0 (or an empty shared dimension) the operands are not read (trsm: B is set to 0), and with
// beta == 0 C is not read, so NaN there must not leak out. OpenBLAS's AVX-512 kernel sets (SkylakeX, Cooperlake)
// break the first rule on their own; the openblas backend keeps it for every kernel set (OPENBLAS_CORETYPE runs of
// this program, label coretypes). Both element types: OpenBLAS's SGEMM and DGEMM kernels are separate code.
template <class T>
void check_blas_zero_rules(Kernels& k) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using dfmp2::linalg::view;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const Index n : {3, 40}) {  // 3: OpenBLAS's small-matrix path; 40: its blocked one
    SCOPED_TRACE(describe("n", n, sizeof(T) == 8 ? "fp64" : "fp32"));
    M a = M::Constant(n, n, nan), b = M::Constant(n, n, nan), c = M::Constant(n, n, T(1));
    k.run("s", dfmp2::linalg::Gemm<T>{Trans::no, Trans::no, T(0), view(a), view(b), T(2), view(c)});
    EXPECT_TRUE((c.array() == T(2)).all()) << "alpha 0: A and B read";
    k.run("s", dfmp2::linalg::Gemm<T>{Trans::no, Trans::no, T(0), view(a), view(b), T(0), view(c)});
    EXPECT_TRUE((c.array() == T(0)).all()) << "alpha 0, beta 0: C not cleared";
    // An empty shared dimension: C = beta C, whatever alpha.
    M a0(n, 0), b0(0, n);
    c.setConstant(T(1));
    k.run("s", dfmp2::linalg::Gemm<T>{Trans::no, Trans::no, T(1), view(a0), view(b0), T(3), view(c)});
    EXPECT_TRUE((c.array() == T(3)).all()) << "k 0: C not scaled by beta";
    // beta 0 with NaN in C: C is overwritten, never read.
    const M ones = M::Constant(n, n, T(1));
    c.setConstant(nan);
    k.run("s", dfmp2::linalg::Gemm<T>{Trans::no, Trans::yes, T(1), view(ones), view(ones), T(0), view(c)});
    EXPECT_TRUE((c.array() == T(n)).all()) << "beta 0: NaN in C was read";

    M s = M::Constant(n, n, T(1));
    k.run("s", dfmp2::linalg::Syrk<T>{Uplo::lower, Trans::no, T(0), view(a), T(2), view(s)});
    for (Index j = 0; j < n; ++j)
      for (Index i = 0; i < n; ++i) EXPECT_EQ(s(i, j), i >= j ? T(2) : T(1)) << "syrk alpha 0 at " << i << "," << j;
    s.setConstant(nan);
    k.run("s", dfmp2::linalg::Syrk<T>{Uplo::upper, Trans::no, T(1), view(ones), T(0), view(s)});
    for (Index j = 0; j < n; ++j)
      for (Index i = 0; i <= j; ++i) EXPECT_EQ(s(i, j), T(n)) << "syrk beta 0 at " << i << "," << j;

    const M tri = T(2) * M::Identity(n, n);
    M rhs = M::Constant(n, n, nan);
    k.run("s", dfmp2::linalg::Trsm<T>{Side::left, Uplo::lower, Trans::no, Diag::non_unit, T(0), view(tri), view(rhs)});
    EXPECT_TRUE((rhs.array() == T(0)).all()) << "trsm alpha 0: B read";
  }
}

TEST_P(BackendOps, AlphaZeroReadsNoOperands) {
  check_blas_zero_rules<double>(k());
  check_blas_zero_rules<float>(k());
}

// Under tests/coretypes/run_with_coretype.py (label coretypes) this program runs once per OpenBLAS kernel set the CPU
// can execute. OpenBLAS must have taken the one asked for (else the run tests nothing new), the calibration must be
// for it (its key names the kernel set, so each kernel set is measured on its own) and the default backend is its
// fastest (devices/calibration.hpp).
TEST(KernelSet, IsTheOneAskedForAndDecidesTheDefaultBackend) {
  const char* asked = std::getenv("DFMP2_EXPECT_OPENBLAS_CORETYPE");
  if (asked == nullptr) GTEST_SKIP() << "not run under run_with_coretype.py";
  std::string want = asked, got = dfmp2::devices::openblas_kernel_set();
  for (auto* s : {&want, &got})
    for (char& ch : *s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  ASSERT_EQ(got, want) << "OpenBLAS did not take OPENBLAS_CORETYPE";
  const auto& c = dfmp2::devices::machine_calibration();
  EXPECT_NE(c.key.find("kernels " + dfmp2::devices::openblas_kernel_set() + ";"), std::string::npos) << c.key;
  EXPECT_EQ(dfmp2::devices::default_backend(), dfmp2::devices::fastest(c.rates).backend)
      << dfmp2::devices::default_backend_choice().reason;
}

extern "C" int openblas_thread_timeout(void);

// Once an OpenBLAS backend exists, OpenBLAS's idle workers sleep after its shortest spin (2^4 cycles, setting 4)
// unless the user set OPENBLAS_THREAD_TIMEOUT (devices/openblas/openblas_backend.cpp), and the variable set for that
// is not left in the environment. (ctest runs this program without the variable.)
TEST(OpenBlas, IdleWorkersSleepAtOnce) {
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr) GTEST_SKIP() << "OPENBLAS_THREAD_TIMEOUT is set";
  const auto backend = dfmp2::devices::make_openblas_backend();
  EXPECT_EQ(openblas_thread_timeout(), 4);
  EXPECT_EQ(std::getenv("OPENBLAS_THREAD_TIMEOUT"), nullptr);
}

// A backend made slower (every call run `factor` times) than it is.
class Slowed final : public dfmp2::linalg::Backend {
 public:
  Slowed(std::unique_ptr<dfmp2::linalg::Backend> inner, int factor) : inner_(std::move(inner)), factor_(factor) {}
  std::string name() const override { return inner_->name() + " (slowed)"; }
  bool supports(dfmp2::linalg::Op op, dfmp2::linalg::DType dtype) const override { return inner_->supports(op, dtype); }
  void set_threads(int threads) override { inner_->set_threads(threads); }
  void release() override { inner_->release(); }

 protected:
  dfmp2::linalg::CallFacet execute(const dfmp2::linalg::OpCall& call, dfmp2::linalg::MatmulMode mode) override {
    for (int i = 1; i < factor_; ++i) inner_->run(call, mode);
    return inner_->run(call, mode);
  }

 private:
  std::unique_ptr<dfmp2::linalg::Backend> inner_;
  int factor_;
};

// The calibration picks the faster of two backends whichever of them is made slow: so it measures, and does not
// follow an order or a width. One thread each: the suite runs beside other tests, and a backend's threads spinning
// against another process's (OpenBLAS's pthreads) made a sixfold slowdown disappear once under the sanitizer job.
TEST(Calibration, PicksTheFasterOfTwoBackendsWhenOneIsMadeSlow) {
  const auto cpu = dfmp2::testing::cpu_backends();
  ASSERT_GE(cpu.size(), 2u);
  const std::string first = cpu[cpu.size() - 1], second = cpu[cpu.size() - 2];
  using dfmp2::devices::Candidate;
  using Make = std::function<std::unique_ptr<dfmp2::linalg::Backend>()>;
  auto one_thread = [](const std::string& name) {
    auto b = dfmp2::devices::make_backend(name);
    b->set_threads(1);
    return b;
  };
  auto plain = [&](const std::string& name) -> Make { return [=] { return one_thread(name); }; };
  auto slowed = [&](const std::string& name) -> Make {
    return [=]() -> std::unique_ptr<dfmp2::linalg::Backend> { return std::make_unique<Slowed>(one_thread(name), 6); };
  };
  for (bool slow_first : {true, false}) {
    const std::vector<Candidate> candidates = {{first, slow_first ? slowed(first) : plain(first)},
                                               {second, slow_first ? plain(second) : slowed(second)}};
    const auto rates = dfmp2::devices::measure_rates(candidates, 3);
    ASSERT_EQ(rates.size(), 2u);
    EXPECT_EQ(dfmp2::devices::fastest(rates).backend, slow_first ? second : first)
        << rates[0].backend << " " << rates[0].gflops << " GFLOP/s, " << rates[1].backend << " " << rates[1].gflops;
  }
}

// The calibration's cache: written once and read back (the same figures, said to be cached), measured again when the
// file is cut short, and measured without a file (saying why) where the folder cannot be written.
TEST(Calibration, CacheIsReadBackAndMeasuredAgainWhenBrokenOrUnwritable) {
  using dfmp2::devices::Candidate;
  const std::vector<Candidate> candidates = {{"eigen", [] { return dfmp2::devices::make_backend("eigen"); }},
                                             {"openblas", [] { return dfmp2::devices::make_backend("openblas"); }}};
  dfmp2::testing::TempDir dir;
  const std::string folder = (dir.path() / "cache").string();
  const auto first = dfmp2::devices::calibrate(candidates, folder);
  EXPECT_FALSE(first.cached);
  ASSERT_FALSE(first.file.empty()) << first.note;
  ASSERT_TRUE(std::filesystem::exists(first.file));
  ASSERT_EQ(first.rates.size(), 2u);
  for (const auto& entry : std::filesystem::directory_iterator(folder))  // the file and the lock, no temporaries
    EXPECT_EQ(entry.path().extension() == ".tmp", false) << entry.path();

  const auto second = dfmp2::devices::calibrate(candidates, folder);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.file, first.file);
  ASSERT_EQ(second.rates.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second.rates[i].backend, first.rates[i].backend);
    EXPECT_NEAR(second.rates[i].seconds, first.rates[i].seconds, 1e-5 * first.rates[i].seconds);
  }
  EXPECT_NE(dfmp2::devices::calibration_summary(second).find("cached " + second.file), std::string::npos);

  {  // cut short: the last rate line gone
    std::ifstream in(first.file);
    std::stringstream text;
    text << in.rdbuf();
    std::string body = text.str();
    body.erase(body.rfind("rate "));
    std::ofstream(first.file) << body;
  }
  const auto third = dfmp2::devices::calibrate(candidates, folder);
  EXPECT_FALSE(third.cached) << "a file without every backend's rate was taken";
  EXPECT_EQ(third.rates.size(), 2u);

  // A folder under a regular file cannot be made.
  const std::string blocked = dir.file("plain", "x") + "/cache";
  const auto fourth = dfmp2::devices::calibrate(candidates, blocked);
  EXPECT_FALSE(fourth.cached);
  EXPECT_TRUE(fourth.file.empty());
  EXPECT_EQ(fourth.rates.size(), 2u);
  EXPECT_NE(fourth.note.find("not cached"), std::string::npos) << fourth.note;
  EXPECT_NE(dfmp2::devices::calibration_summary(fourth).find("not cached"), std::string::npos);
}

// The calibration's cache and lock as an attacker could leave them (README "Backends"): a link at the cache path to
// a file of the user's is replaced, never written through; a FIFO there or at the lock is never waited on; a lock
// held by a stopped process is waited for only as long as the patience given; each says so in the note.
TEST(Calibration, HostileCacheEntriesNeitherHangNorWriteThroughLinks) {
  namespace fs = std::filesystem;
  using dfmp2::devices::Candidate;
  const std::vector<Candidate> candidates = {{"eigen", [] { return dfmp2::devices::make_backend("eigen"); }}};
  dfmp2::testing::TempDir dir;
  const std::string folder = (dir.path() / "cache").string();
  const auto first = dfmp2::devices::calibrate(candidates, folder);
  ASSERT_FALSE(first.file.empty()) << first.note;
  const std::string users_file = dir.file("users-file", "precious\n");
  const auto elapsed = [](auto start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  fs::remove(first.file);
  fs::create_symlink(users_file, first.file);
  auto linked = dfmp2::devices::calibrate(candidates, folder);
  EXPECT_FALSE(linked.cached);
  EXPECT_NE(linked.note.find("symbolic link"), std::string::npos) << linked.note;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(first.file)));
  std::ifstream in(users_file);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "precious");

  fs::remove(first.file);
  ASSERT_EQ(::mkfifo(first.file.c_str(), 0600), 0);
  const std::string lock = folder + "/backend-calibration.lock";
  fs::remove(lock);
  ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  const auto fifo = dfmp2::devices::calibrate(candidates, folder);
  EXPECT_LT(elapsed(start), 30.0);
  EXPECT_NE(fifo.note.find("a FIFO"), std::string::npos) << fifo.note;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(first.file)));  // replaced by the new figures

  fs::remove(lock);
  dfmp2::linalg::KeptLock held(folder, "backend-calibration.lock", 1.0);  // as a run stopped with Ctrl-Z holds it
  ASSERT_TRUE(held.held());
  start = std::chrono::steady_clock::now();
  const auto waited = dfmp2::devices::calibrate(candidates, folder, 0.5);
  EXPECT_LT(elapsed(start), 20.0);
  EXPECT_TRUE(waited.cached);  // the figures are there: read without the lock
  fs::remove(first.file);
  const auto measured = dfmp2::devices::calibrate(candidates, folder, 0.5);
  EXPECT_FALSE(measured.cached);
  EXPECT_NE(measured.note.find("held by another process"), std::string::npos) << measured.note;
}

INSTANTIATE_TEST_SUITE_P(Built, BackendOps, ::testing::ValuesIn(dfmp2::testing::cpu_backends()),
                         backend_param_name);

// The avx512 backend's packed GEMM has blocks (rows of A in blocks of 336 doubles or 672 floats, shared
// dimension in slices of 256, columns of C in panels of 3072) that the conformance table's shapes do not cross;
// these shapes cross every one of them, with ragged edges, in both element types, against Eigen's product.
// dfmp2's packed backends (avx512, avx2) this CPU runs.
std::vector<std::string> packed_backends() {
  std::vector<std::string> out;
  for (const char* name : {"avx512", "avx2"})
    if (dfmp2::devices::unavailable_reason(name).empty()) out.push_back(name);
  return out;
}

template <class T>
void check_packed_gemm_blocks(const std::string& name, Index m, Index n, Index k) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  auto backend = dfmp2::devices::make_backend(name);
  backend->set_threads(2);
  KernelLog log;
  Kernels kernels(*backend, log);
  std::srand(11);
  for (Trans ta : {Trans::no, Trans::yes})
    for (Trans tb : {Trans::no, Trans::yes}) {
      SCOPED_TRACE(describe(name, "gemm m", m, "n", n, "k", k, str(ta), str(tb)));
      const M a = ta == Trans::no ? M::Random(m + 3, k) : M::Random(k + 3, m);
      const M b = tb == Trans::no ? M::Random(k, n) : M::Random(n, k);
      M c = M::Random(m + 1, n);
      const M c0 = c;
      const auto av = dfmp2::linalg::ConstMatrixViewT<T>{a.data(), ta == Trans::no ? m : k, ta == Trans::no ? k : m,
                                                         a.rows()};
      kernels.run("test", dfmp2::linalg::Gemm<T>{ta, tb, T(0.5), av, dfmp2::linalg::view(b), T(-1.5),
                                                 dfmp2::linalg::MatrixViewT<T>{c.data(), m, n, c.rows()}});
      const M opa = ta == Trans::no ? M(a.topRows(m)) : M(a.topRows(k).transpose());
      const M opb = tb == Trans::no ? b : M(b.transpose());
      const M expected = T(0.5) * opa * opb - T(1.5) * c0.topRows(m);
      const double err = double((c.topRows(m) - expected).cwiseAbs().maxCoeff());
      EXPECT_LT(err, 4.0 * double(k) * double(std::numeric_limits<T>::epsilon())) << "max error " << err;
      EXPECT_TRUE(c.row(m) == c0.row(m)) << "the row below C was written";
    }
}

TEST(PackedBackends, GemmCrossesEveryBlockBoundary) {
  if (packed_backends().empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  for (const auto& name : packed_backends()) {
    check_packed_gemm_blocks<double>(name, 700, 3200, 300);
    check_packed_gemm_blocks<float>(name, 1400, 3100, 520);
  }
}

// A sliver's last rows with one or two vectors written straight into C (in fp64 80 = 3 x 24 + 8 and 88 = 3 x 24 + 16
// rows for avx512, 80 = 6 x 12 + 8 and 88 = 7 x 12 + 4 for avx2; in fp32 80 = 48 + 32 for avx512, 80 = 3 x 24 + 8
// and 88 = 3 x 24 + 16 for avx2), and through the tile buffer the rows that are not whole vectors (81, 20): C's row
// below must stay untouched.
TEST(PackedBackends, PartialSliversWithFewerVectors) {
  if (packed_backends().empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  for (const auto& name : packed_backends())
    for (Index m : {80, 88, 81, 20}) {
      check_packed_gemm_blocks<double>(name, m, 72, 260);
      check_packed_gemm_blocks<float>(name, m, 72, 260);
    }
}

// The SYRK's two paths: up to order 1024 slice by slice of the shared dimension; above, recursive blocks (leaves of
// 192 computed tile by tile, rectangles large enough for all threads one after the other, the rest side by side).
TEST(PackedBackends, SyrkLargeBlocksAndLeaves) {
  if (packed_backends().empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  for (const auto& name : packed_backends()) {
  auto backend = dfmp2::devices::make_backend(name);
  backend->set_threads(2);
  KernelLog log;
  Kernels kernels(*backend, log);
  Rng rng(9009);
  const Index kk = 300;
  // The sliced path (order <= 1024; 88 and 80 with partial slivers) and the blocks.
  for (Index n : {80, 88, 1000, 1100})
  for (Uplo uplo : kUplo)
    for (Trans trans : kTrans) {
      SCOPED_TRACE(describe(name, "syrk n", n, str(uplo), str(trans)));
      Matrix a = trans == Trans::no ? Matrix(n, kk) : Matrix(kk, n);
      fill_random(a, rng);
      Matrix c(n, n);
      fill_random(c, rng);
      const Matrix c0 = c;
      kernels.syrk("test", uplo, trans, 2.0, dfmp2::linalg::view(a), 0.5, dfmp2::linalg::view(c));
      const Matrix opa = trans == Trans::no ? a : Matrix(a.transpose());
      const Matrix expected = 2.0 * opa * opa.transpose() + 0.5 * c0;
      double worst = 0;
      long other = 0;
      for (Index j = 0; j < n; ++j)
        for (Index i = 0; i < n; ++i) {
          if (in_triangle(uplo, i, j)) worst = std::max(worst, std::abs(c(i, j) - expected(i, j)));
          else other += same_bits(c(i, j), c0(i, j)) ? 0 : 1;
        }
      EXPECT_LT(worst, 1e-12 * double(kk));
      EXPECT_EQ(other, 0) << "the other triangle was written";
    }
  }
}

// The blocked TRSM (diagonal blocks of 192 by Eigen, the rest by the packed GEMM) over several blocks, every
// side, triangle, transpose and diagonal, with NaN in A's other triangle (it must not be read): the residual
// op(A) X - alpha B against the data's scale.
TEST(PackedBackends, TrsmOverSeveralBlocks) {
  if (packed_backends().empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  for (const auto& name : packed_backends()) {
  auto backend = dfmp2::devices::make_backend(name);
  backend->set_threads(2);
  KernelLog log;
  Kernels kernels(*backend, log);
  Rng rng(9119);
  const Index order = 450, other = 130;
  for (Side side : {Side::left, Side::right})
    for (Uplo uplo : kUplo)
      for (Trans trans : kTrans)
        for (Diag diag : {Diag::non_unit, Diag::unit}) {
          SCOPED_TRACE(describe(name, "trsm", side == Side::left ? "left" : "right", str(uplo), str(trans),
                                diag == Diag::unit ? "unit" : "non-unit"));
          Matrix a(order, order);
          fill_random(a, rng, -0.1, 0.1);
          Matrix tri = Matrix::Zero(order, order);  // the triangle as the solver must see it
          for (Index j = 0; j < order; ++j)
            for (Index i = 0; i < order; ++i) {
              if (i == j) a(i, j) = 2.0 + a(i, j);
              if (!in_triangle(uplo, i, j)) a(i, j) = kNaN;
              else tri(i, j) = (i == j && diag == Diag::unit) ? 1.0 : a(i, j);
            }
          Matrix b = side == Side::left ? Matrix(order, other) : Matrix(other, order);
          fill_random(b, rng);
          const Matrix b0 = b;
          kernels.trsm("test", side, uplo, trans, diag, 0.5, dfmp2::linalg::view(a), dfmp2::linalg::view(b));
          const Matrix op = trans == Trans::no ? tri : Matrix(tri.transpose());
          const Matrix residual = side == Side::left ? Matrix(op * b - 0.5 * b0) : Matrix(b * op - 0.5 * b0);
          EXPECT_LT(residual.cwiseAbs().maxCoeff(), 1e-12) << "max residual";
        }
  }
}

// Agreement between backends (eigen against openblas, and the device models) is the conformance table's job
// (test_conformance.cpp), on the same inputs for every backend.

TEST(Registry, BuiltBackendsAreKnownAndConstructible) {
  const auto built = dfmp2::devices::built_backends();
  const auto known = dfmp2::devices::known_backends();
  ASSERT_FALSE(built.empty());
  for (const auto& name : built) {
    EXPECT_NE(std::find(known.begin(), known.end(), name), known.end()) << name;
    auto be = dfmp2::devices::make_backend(name);
    ASSERT_NE(be, nullptr);
    EXPECT_EQ(be->name(), name);
  }
}

TEST(Registry, UnknownBackendListsTheBuiltOnes) {
  try {
    dfmp2::devices::make_backend("nope");
    FAIL() << "make_backend(\"nope\") did not throw";
  } catch (const dfmp2::UnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
    for (const auto& name : dfmp2::devices::built_backends()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_EQ(e.exit_code(), 4);
  }
}

// Every known backend is built (the device models are always compiled in) and constructible, except avx512 on a
// CPU without AVX-512F: that one is refused with the reason, never replaced by another.
TEST(Registry, EveryKnownBackendIsBuiltOrSaysWhyNot) {
  const auto built = dfmp2::devices::built_backends();
  for (const auto& name : dfmp2::devices::known_backends()) {
    const std::string why = dfmp2::devices::unavailable_reason(name);
    if (why.empty()) {
      EXPECT_NE(std::find(built.begin(), built.end(), name), built.end()) << name;
      EXPECT_EQ(dfmp2::devices::make_backend(name)->name(), name);
    } else {
      EXPECT_EQ(name, "avx512");
      EXPECT_EQ(std::find(built.begin(), built.end(), name), built.end()) << name;
      try {
        dfmp2::devices::make_backend(name);
        ADD_FAILURE() << "avx512 was made on a CPU without AVX-512F";
      } catch (const dfmp2::UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("AVX-512F"), std::string::npos) << e.what();
      }
    }
  }
  __builtin_cpu_init();
  EXPECT_EQ(dfmp2::devices::unavailable_reason("avx512").empty(), __builtin_cpu_supports("avx512f") != 0);
}

}  // namespace
