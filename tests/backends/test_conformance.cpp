// Backend conformance, in the manner of ggml's test-backend-ops: a table of cases, each naming its op and options,
// its dtype and shape, the tolerance its result must meet (with the reason) and, through the op descriptors' cost()
// (linalg/ops/), the flops the kernel log must show. Every case runs on every CPU backend built into this binary and
// on the device models trn1 and trn2 (fp32; their fp64 and eigh cells count as unsupported), through
// linalg::Kernels, and is compared with the reference backend (eigen) run on the same inputs. Shape classes: 1x1, empty (a zero
// dimension), sizes that are not multiples of 128 ("odd": 129, 200, 257), tall (300 x 7) and wide (7 x 300); square
// ops (cholesky, eigh, the inverse square roots) have no tall or wide class.
//
// An op a backend lacks is reported as unsupported, never rerouted: when backend.supports(op, dtype) is false the
// case checks that the Kernels call throws dfmp2::UnsupportedError, that the backend was never called for that op
// and that nothing was logged, and counts the case as unsupported (neither a pass nor a failure). The built backends
// support everything; the mechanism is exercised by a fake backend ("partial_<backend>") that wraps a real one and
// refuses one dtype of each op, and by the device models' fp64. A summary (backend x op x dtype: passed / failed / unsupported, worst error over
// tolerance) is printed when the test program ends.
//
// Inputs come from fixed-seed std::mt19937_64 generators (one seed per case, the same for every backend). Dense
// operands sit in storage with three extra rows (leading dimension > rows), and every element a backend must not
// write (padding, the other triangle, gaps between batched problems) is checked bit for bit.
//
// Tolerance tiers of the device models' operand formats: the fp32 cases of the matrix-product family (gemm,
// gemm_batched, syrk, spmm, spmv) run on trn1 and trn2 again in bf16 and in bf16x3 (subjects "trn1_bf16", ...),
// against the same fp32 reference, with the fp32 tolerance plus the format's bound per product (kModeBound). The
// composites (trsm, cholesky, the inverse square roots) run in fp32 on the device by default (device precisions,
// README); their low-precision accuracy is measured end to end by bench/device_accuracy.py.
#include <gtest/gtest.h>

#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "devices/registry.hpp"
#include "../support/test_support.hpp"
#include "linalg/backend.hpp"
#include "linalg/op_call.hpp"
#include "linalg/errors.hpp"
#include "linalg/inverse_sqrt.hpp"
#include "linalg/kernel_log.hpp"
#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"
#include "linalg/ops.hpp"
#include "linalg/sparse.hpp"

namespace {

namespace la = dfmp2::linalg;
using la::BatchStrides;
using la::BsrMatrix;
using la::ConstMatrixViewT;
using la::Cost;
using la::CsrMatrix;
using la::Diag;
using la::DType;
using la::Index;
using la::KernelLog;
using la::KernelRecord;
using la::Kernels;
using la::Matrix;
using la::MatrixT;
using la::MatrixViewT;
using la::Op;
using la::Side;
using la::Trans;
using la::Uplo;
using la::VectorT;

using Rng = std::mt19937_64;

const std::string kStep = "conformance";
const std::string kReference = "eigen";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* str(Trans t) { return t == Trans::no ? "N" : "T"; }
const char* str(Uplo u) { return u == Uplo::lower ? "L" : "U"; }
const char* str(Side s) { return s == Side::left ? "L" : "R"; }
const char* str(Diag d) { return d == Diag::unit ? "U" : "N"; }

bool in_triangle(Uplo uplo, Index i, Index j) { return uplo == Uplo::lower ? i >= j : i <= j; }

template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// ---------------------------------------------------------------------------------------------------------------
// The case table

enum class Kind {
  gemm,
  gemm_batched,
  syrk,
  trsm,
  cholesky,
  eigh,
  inverse_sqrt_eigh,
  inverse_sqrt_newton_schulz,
  spmm_csr,
  spmm_bsr,
  spmv_csr,
  spmv_bsr
};

struct Spec {
  Kind kind = Kind::gemm;
  DType dtype = DType::fp64;
  std::string family;       // the summary's op column: the op, or the routine built on ops
  std::string label;        // op and options, e.g. gemm_NT, trsm_RLTN (side, uplo, trans, diag)
  std::string shape_class;  // 1x1, empty, odd, tall, wide
  std::string shape;        // dimensions, e.g. 129x200x257
  std::vector<Op> needs;    // the backend ops the case calls
  // gemm: C (m x n) = alpha op(A) op(B) + beta C, inner dimension k; gemm_batched: `count` such problems.
  // syrk: C n x n, inner dimension k. trsm: B m x n. cholesky, eigh, inverse square roots: n x n.
  // spmm / spmv: S is m x k, B has n columns (spmv: n = 1).
  Index m = 0, n = 0, k = 0, count = 1;
  Trans ta = Trans::no, tb = Trans::no;  // gemm; syrk and trsm use ta; spmm uses ta for op(S)
  Uplo uplo = Uplo::lower;
  Side side = Side::left;
  Diag diag = Diag::non_unit;
  bool shared_a = false, shared_b = false;  // gemm_batched: stride 0 for that operand
  double density = 0;                       // spmm, spmv
  Index block_rows = 0, block_cols = 0;     // BSR
  double alpha = 1, beta = 0;               // beta == 0: the output is NaN beforehand (it must not be read)
  bool degenerate = false;                  // eigh: eigenvalues of high multiplicity
  double tol = 0;                           // bound on the case's normalised error (see the runners)
  std::uint64_t seed = 0;
};

constexpr double eps_of(DType dt) {
  return dt == DType::fp64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

// Twice Higham's gamma_n = n u / (1 - n u), u = eps / 2: how far apart two results may be when each is within
// gamma_n of the exact one.
double two_gamma(double n, double eps) { return 2.0 * n * (eps / 2) / (1.0 - n * (eps / 2)); }

// The condition number of every SPD input (spectrum log-spaced in [1, kSpdKappa]): modest, so that the tolerances
// of cholesky and the inverse square roots measure the backends and not the problem.
constexpr double kSpdKappa = 10.0;

std::vector<Spec> build_table() {
  std::vector<Spec> table;
  auto add = [&](Spec s) { table.push_back(std::move(s)); };
  const std::vector<Trans> trans = {Trans::no, Trans::yes};
  const std::vector<Uplo> uplos = {Uplo::lower, Uplo::upper};

  for (DType dt : la::kAllDTypes) {
    // u = eps / 2 is the unit roundoff. The dense bounds below are the standard worst-case ones (Higham, "Accuracy
    // and Stability of Numerical Algorithms", 2nd ed.), valid for any summation order, blocking or use of FMA, so
    // a conforming backend meets them however it computes; two conforming results differ by at most twice a bound.
    const double eps = eps_of(dt);

    // ---- gemm. Element (i, j) of alpha op(A) op(B) + beta C is a sum of k + 1 terms (the k products scaled by
    // alpha, and beta c_ij), each rounded at most twice before it is summed, in any order or blocking, with or
    // without FMA (at most k additions on any term's path): so it is within gamma_(k+2) D_ij of the exact value,
    // D = |alpha| |op(A)| |op(B)| + |beta| |C0| (Higham ch. 3). The error is normalised element by element by D
    // (computed in fp64), and two backends may be 2 gamma_(k+2) ~ (k + 2) eps apart: k = 257, 5.8e-14 in fp64 and
    // 3.1e-5 in fp32 (the usual "fp32 to ~1e-5 relative"). Precision lost anywhere (fp64 accumulated in fp32, fp32
    // in fp16) exceeds it by far: ConformanceSelfCheck makes sure.
    struct GemmShape {
      const char* cls;
      Index m, n, k;
      double alpha, beta;
    };
    const std::vector<GemmShape> gemm_shapes = {
        {"1x1", 1, 1, 1, 0.75, -0.5},     {"empty", 0, 7, 5, 0.75, -0.5},  {"empty", 7, 5, 0, 0.75, -0.5},
        {"odd", 129, 200, 257, 0.75, -0.5}, {"tall", 300, 7, 129, -1.25, 0.0}, {"wide", 7, 300, 129, 1.0, 1.0}};
    for (const auto& s : gemm_shapes)
      for (Trans ta : trans)
        for (Trans tb : trans) {
          Spec c;
          c.kind = Kind::gemm, c.dtype = dt, c.family = "gemm", c.needs = {Op::gemm};
          c.label = cat("gemm_", str(ta), str(tb));
          c.shape_class = s.cls, c.shape = cat(s.m, "x", s.n, "x", s.k);
          c.m = s.m, c.n = s.n, c.k = s.k, c.ta = ta, c.tb = tb, c.alpha = s.alpha, c.beta = s.beta;
          c.tol = two_gamma(double(s.k) + 2, eps);
          add(c);
        }

    // ---- gemm_batched: every problem is a gemm, so the gemm bound, per problem. A shared operand has stride 0
    // (the DF-MP2 transformation shares the orbital coefficients between problems).
    struct BatchShape {
      const char* cls;
      Index count, m, n, k;
      bool shared_a, shared_b;
      double alpha, beta;
    };
    const std::vector<BatchShape> batch_shapes = {{"1x1", 1, 1, 1, 1, false, false, 0.75, -0.5},
                                                  {"empty", 3, 0, 7, 5, false, false, 0.75, -0.5},
                                                  {"empty", 0, 5, 6, 7, false, false, 0.75, -0.5},
                                                  {"odd", 3, 129, 65, 200, true, false, 0.75, -0.5},
                                                  {"tall", 4, 300, 7, 33, false, true, -1.25, 0.0},
                                                  {"wide", 2, 7, 300, 129, true, false, 1.0, 1.0}};
    for (const auto& s : batch_shapes)
      for (Trans ta : trans)
        for (Trans tb : trans) {
          Spec c;
          c.kind = Kind::gemm_batched, c.dtype = dt, c.family = "gemm_batched", c.needs = {Op::gemm_batched};
          c.label = cat("gemm_batched_", str(ta), str(tb), s.shared_a ? "_sharedA" : "", s.shared_b ? "_sharedB" : "");
          c.shape_class = s.cls, c.shape = cat(s.count, "x", s.m, "x", s.n, "x", s.k);
          c.count = s.count, c.m = s.m, c.n = s.n, c.k = s.k, c.ta = ta, c.tb = tb;
          c.shared_a = s.shared_a, c.shared_b = s.shared_b, c.alpha = s.alpha, c.beta = s.beta;
          c.tol = two_gamma(double(s.k) + 2, eps);
          add(c);
        }

    // ---- syrk: a gemm with op(B) = op(A)^T on one triangle: the gemm bound, D = |alpha| |op(A)| |op(A)|^T + |beta|
    // |C0|.
    struct SyrkShape {
      const char* cls;
      Index n, k;
      double alpha, beta;
    };
    const std::vector<SyrkShape> syrk_shapes = {{"1x1", 1, 1, 0.75, -0.5},    {"empty", 0, 5, 0.75, -0.5},
                                                {"empty", 5, 0, 0.75, -0.5},  {"odd", 200, 257, 0.75, -0.5},
                                                {"tall", 300, 7, -1.25, 0.0}, {"wide", 7, 300, 1.0, 1.0}};
    for (const auto& s : syrk_shapes)
      for (Uplo uplo : uplos)
        for (Trans t : trans) {
          Spec c;
          c.kind = Kind::syrk, c.dtype = dt, c.family = "syrk", c.needs = {Op::syrk};
          c.label = cat("syrk_", str(uplo), str(t));
          c.shape_class = s.cls, c.shape = cat(s.n, "x", s.k);
          c.n = s.n, c.k = s.k, c.uplo = uplo, c.ta = t, c.alpha = s.alpha, c.beta = s.beta;
          c.tol = two_gamma(double(s.k) + 2, eps);
          add(c);
        }

    // ---- trsm, every side x uplo x trans x diag; the DF-MP2 fitting is trsm_RLTN (B L^T = A). The triangles have
    // diagonals of magnitude 2-3 and off-diagonals in [-0.5, 0.5] / order, so op(A) = D (I + E) with ||E||_inf <
    // 1/4 (non-unit) or 1/2 (unit) and kappa_inf(op(A)) <= 3. A triangular solve is backward stable per column
    // (row), |delta A| <= gamma_order |A| (Higham ch. 8), so its forward error is <= kappa gamma_order ~ 3 order u
    // relative to max|X|; two backends differ by <= 3 order eps. The error is normalised by max|X_ref| and may
    // reach 4 order eps (order 300: 2.7e-13 in fp64, 1.4e-4 in fp32).
    struct TrsmShape {
      const char* cls;
      Index m, n;
    };
    const std::vector<TrsmShape> trsm_shapes = {
        {"1x1", 1, 1}, {"empty", 0, 5}, {"odd", 129, 257}, {"tall", 300, 7}, {"wide", 7, 300}};
    for (const auto& s : trsm_shapes)
      for (Side side : {Side::left, Side::right})
        for (Uplo uplo : uplos)
          for (Trans t : trans)
            for (Diag diag : {Diag::non_unit, Diag::unit}) {
              Spec c;
              c.kind = Kind::trsm, c.dtype = dt, c.family = "trsm", c.needs = {Op::trsm};
              c.label = cat("trsm_", str(side), str(uplo), str(t), str(diag));
              c.shape_class = s.cls, c.shape = cat(s.m, "x", s.n);
              c.m = s.m, c.n = s.n, c.side = side, c.uplo = uplo, c.ta = t, c.diag = diag, c.alpha = -1.5;
              const Index order = side == Side::left ? s.m : s.n;
              c.tol = 4.0 * double(std::max<Index>(1, order)) * eps;
              add(c);
            }

    const std::vector<std::pair<const char*, Index>> square_shapes = {
        {"1x1", 1}, {"empty", 0}, {"odd", 129}, {"odd", 200}, {"odd", 257}};

    // ---- cholesky of an SPD matrix with kappa = 10. The computed factor is exact for A + dA with |dA| <=
    // gamma_(n+1) |L||L^T|, ~ n u ||A|| for these well-scaled matrices, and to first order the factor moves by at
    // most ~kappa ||dA|| / ||A|| relative to ||L|| (Higham ch. 10). The error is normalised by max|L_ref| and may
    // reach kappa n eps (n = 257: 5.7e-13 in fp64, 3.1e-4 in fp32). A worst-case bound: the summary shows how
    // little of it conforming backends use.
    for (const auto& [cls, n] : square_shapes)
      for (Uplo uplo : uplos) {
        Spec c;
        c.kind = Kind::cholesky, c.dtype = dt, c.family = "cholesky", c.needs = {Op::cholesky};
        c.label = cat("cholesky_", str(uplo));
        c.shape_class = cls, c.shape = cat(n);
        c.n = n, c.uplo = uplo;
        c.tol = kSpdKappa * double(std::max<Index>(1, n)) * eps;
        add(c);
      }

    // ---- eigh of a symmetric matrix (only its lower triangle is read; the upper one is NaN). Eigenvectors are not
    // unique (signs; any basis of a degenerate eigenspace), so the case compares the eigenvalues with the
    // reference and checks the backend's own decomposition: the reconstruction A - V diag(w) V^T and V^T V - I. A
    // backward-stable eigensolver gives all three at ~p(n) u ||A|| (Weyl for the eigenvalues; Golub & Van Loan
    // ch. 8), and LAPACK's own test suite measures them in units of n ulp. The errors are normalised by ||A||_2 =
    // max|w_ref| (eigenvalues, reconstruction) and 1 (orthonormality) and may reach 4 n eps (n = 257: 2.3e-13 in
    // fp64, 1.2e-4 in fp32: in fp32 a dense eigensolver is looser than a GEMM in proportion to n).
    for (const auto& [cls, n] : square_shapes) {
      Spec c;
      c.kind = Kind::eigh, c.dtype = dt, c.family = "eigh", c.needs = {Op::eigh};
      c.label = "eigh", c.shape_class = cls, c.shape = cat(n), c.n = n;
      c.tol = 4.0 * double(std::max<Index>(1, n)) * eps;
      add(c);
    }
    {  // eigenvalues -1, 0.5 and 2, each of multiplicity ~n/3: the eigenvectors are not unique at all
      Spec c;
      c.kind = Kind::eigh, c.dtype = dt, c.family = "eigh", c.needs = {Op::eigh};
      c.label = "eigh_degenerate", c.shape_class = "odd", c.shape = "129", c.n = 129, c.degenerate = true;
      c.tol = 4.0 * 129 * eps;
      add(c);
    }

    const std::vector<std::pair<const char*, Index>> inverse_sqrt_shapes = {
        {"1x1", 1}, {"empty", 0}, {"odd", 129}, {"odd", 200}};

    // ---- inverse_sqrt_eigh (eigh, a scaling on the host, syrk) of an SPD matrix with kappa = 10: A^-1/2 moves by
    // at most ~kappa/2 times the relative backward error of the eigendecomposition (~n u), relative to ||A^-1/2||.
    // The error is normalised by max|Z_ref| and may reach kappa n eps (n = 200: 4.4e-13 in fp64, 2.4e-4 in fp32).
    for (const auto& [cls, n] : inverse_sqrt_shapes) {
      Spec c;
      c.kind = Kind::inverse_sqrt_eigh, c.dtype = dt, c.family = "inverse_sqrt_eigh", c.needs = {Op::eigh, Op::syrk};
      c.label = "inverse_sqrt_eigh", c.shape_class = cls, c.shape = cat(n), c.n = n;
      c.tol = kSpdKappa * double(std::max<Index>(1, n)) * eps;
      add(c);
    }

    // ---- inverse_sqrt_newton_schulz (GEMMs only) of the same matrices. The iteration stops once ||I - Z Y||_F /
    // sqrt(n) < 1e-10 (fp64) or 1e-5 (fp32, the floor of linalg/inverse_sqrt.hpp), and Z's relative error is of
    // the order of that residual, so two backends (which may stop one iteration apart) agree to about the stopping
    // tolerance: the error is normalised by max|Z_ref| and may reach 10x the stopping tolerance (1e-9 in fp64,
    // 1e-4 in fp32).
    for (const auto& [cls, n] : inverse_sqrt_shapes) {
      Spec c;
      c.kind = Kind::inverse_sqrt_newton_schulz, c.dtype = dt, c.family = "inverse_sqrt_newton_schulz";
      c.needs = {Op::gemm};
      c.label = "inverse_sqrt_newton_schulz", c.shape_class = cls, c.shape = cat(n), c.n = n;
      c.tol = dt == DType::fp64 ? 1e-9 : 1e-4;
      add(c);
    }

    // ---- spmm and spmv, CSR and BSR: a gemm over the stored entries (BSR: whole blocks, zeros included), so the
    // gemm bound with k the inner dimension of op(S) and D = |alpha| |op(S)| |B| + |beta| |C0| (structural zeros only
    // make the sums shorter; the additions of a term's path are still at most k). BSR with the default 128 x 128
    // blocks (edge blocks partial everywhere here) and with 16 x 8 blocks on the odd shape, where zero blocks are
    // skipped.
    struct SparseShape {
      const char* cls;
      Index rows, cols, n;  // S rows x cols; B has n columns
      double alpha, beta;
    };
    const std::vector<SparseShape> sparse_shapes = {{"1x1", 1, 1, 1, 0.75, -0.5},      {"empty", 0, 5, 3, 0.75, -0.5},
                                                    {"odd", 257, 129, 200, 0.75, -0.5}, {"tall", 300, 7, 5, -1.25, 0.0},
                                                    {"wide", 7, 300, 5, 1.0, 1.0}};
    struct SparseFormat {
      Kind spmm, spmv;
      const char* name;
      Index br, bc;
    };
    const std::vector<SparseFormat> formats = {{Kind::spmm_csr, Kind::spmv_csr, "csr", 0, 0},
                                               {Kind::spmm_bsr, Kind::spmv_bsr, "bsr", la::kDefaultBlockRows,
                                                la::kDefaultBlockCols},
                                               {Kind::spmm_bsr, Kind::spmv_bsr, "bsr", 16, 8}};
    for (bool spmv : {false, true})
      for (const auto& f : formats)
        for (const auto& s : sparse_shapes) {
          if (f.br == 16 && std::string(s.cls) != "odd") continue;
          for (double density : {0.05, 0.3})
            for (Trans t : trans) {
              Spec c;
              c.kind = spmv ? f.spmv : f.spmm, c.dtype = dt, c.needs = {Op::spmm};
              c.family = cat(spmv ? "spmv_" : "spmm_", f.name);
              c.label = cat(c.family, f.br > 0 ? cat(f.br, "x", f.bc) : std::string(), "_", str(t), "_dens",
                            int(std::lround(density * 100)));
              c.shape_class = s.cls;
              c.m = s.rows, c.k = s.cols, c.n = spmv ? 1 : s.n;
              c.shape = spmv ? cat(s.rows, "x", s.cols) : cat(s.rows, "x", s.cols, "x", s.n);
              c.ta = t, c.density = density, c.block_rows = f.br, c.block_cols = f.bc;
              c.alpha = s.alpha, c.beta = s.beta;
              c.tol = two_gamma(double(t == Trans::no ? s.cols : s.rows) + 2, eps);
              add(c);
            }
        }
  }
  for (size_t i = 0; i < table.size(); ++i) table[i].seed = 0xC0FFEE00ull + i;
  return table;
}

const std::vector<Spec>& case_table() {
  static const std::vector<Spec> table = build_table();
  return table;
}

// ---------------------------------------------------------------------------------------------------------------
// Backends under test: each real one wrapped in a forwarding counter, plus the fake that refuses some ops.

std::pair<Op, DType> key(Op op, DType dt) { return {op, dt}; }

// Forwards every call to a real backend and counts the calls per (op, dtype). Reports the `refused` pairs as
// unsupported (on top of whatever the real backend does not support) and counts any call that still arrives for an
// op it reports unsupported: that count must stay 0. For the harness's own check it can also break the results
// after the real backend computed them (Fault): rounding them to half their precision, or writing one element
// past the end of the output's first column (into the padding).
enum class Fault { none, precision, stray };

class CountingBackend final : public la::Backend {
 public:
  CountingBackend(std::unique_ptr<la::Backend> inner, std::string name, std::set<std::pair<Op, DType>> refused)
      : inner_(std::move(inner)), name_(std::move(name)), refused_(std::move(refused)) {}

  std::string name() const override { return name_; }
  std::string details() const override { return inner_->details(); }
  bool supports(Op op, DType dt) const override { return refused_.count(key(op, dt)) == 0 && inner_->supports(op, dt); }
  void set_threads(int threads) override { inner_->set_threads(threads); }
  void release() override { inner_->release(); }
  std::string unsupported_reason(Op op, DType dt) const override { return inner_->unsupported_reason(op, dt); }
  bool supports_matmul_mode(la::MatmulMode mode) const override { return inner_->supports_matmul_mode(mode); }
  double peak_flops(la::MatmulMode mode) const override { return inner_->peak_flops(mode); }

  long calls(Op op, DType dt) const {
    const auto it = calls_.find(key(op, dt));
    return it == calls_.end() ? 0 : it->second;
  }
  long total_calls() const {
    long total = 0;
    for (const auto& [k, v] : calls_) total += v;
    return total;
  }
  long calls_to_unsupported() const { return calls_to_unsupported_; }
  void set_fault(Fault f) { fault_ = f; }

 protected:
  // Counts the call, forwards it, then breaks its output when a Fault is set (the first problem of a batch; only the
  // triangle syrk and cholesky write).
  la::CallFacet execute(const la::OpCall& call, la::MatmulMode mode) override {
    count(la::op_of(call), la::dtype_of(call));
    const la::CallFacet facet = inner_->run(call, mode);
    std::visit(
        [&](const auto& args) {
          using Args = std::decay_t<decltype(args)>;
          if constexpr (Args::op == Op::syrk) {
            corrupt(args.c, args.uplo);
          } else if constexpr (Args::op == Op::cholesky) {
            corrupt(args.a, args.uplo);
          } else if constexpr (Args::op == Op::trsm) {
            corrupt(args.b);
          } else if constexpr (Args::op == Op::eigh) {
            corrupt(args.a);
            if (fault_ == Fault::precision)
              for (Index i = 0; i < args.a.rows; ++i) args.w[i] = half_precision(args.w[i]);
          } else if constexpr (Args::op == Op::gemm_batched) {
            if (args.count > 0) corrupt(args.c);
          } else {
            corrupt(args.c);
          }
        },
        call);
    return facet;
  }

 private:
  // fp64 results with fp32's accuracy; fp32 results with fp16's (11 significant bits).
  template <class T>
  static T half_precision(T x) {
    if (!std::isfinite(x)) return x;
    if constexpr (std::is_same_v<T, double>) {
      return double(float(x));
    } else {
      int e = 0;
      const double m = std::frexp(double(x), &e);
      return T(std::ldexp(std::round(m * 2048.0) / 2048.0, e));
    }
  }
  template <class T>
  void corrupt(MatrixViewT<T> v, std::optional<Uplo> triangle = std::nullopt) const {
    if (fault_ == Fault::precision) {
      for (Index j = 0; j < v.cols; ++j)
        for (Index i = 0; i < v.rows; ++i)
          if (!triangle || in_triangle(*triangle, i, j)) v(i, j) = half_precision(v(i, j));
    } else if (fault_ == Fault::stray && v.cols > 0 && (v.ld > v.rows || v.cols == 1)) {
      v.data[v.rows] = T(42);  // below the first column: padding (or past the end of a vector)
    }
  }
  void count(Op op, DType dt) {
    ++calls_[key(op, dt)];
    if (!supports(op, dt)) ++calls_to_unsupported_;
  }

  std::unique_ptr<la::Backend> inner_;
  std::string name_;
  std::set<std::pair<Op, DType>> refused_;
  std::map<std::pair<Op, DType>, long> calls_;
  long calls_to_unsupported_ = 0;
  Fault fault_ = Fault::none;
};

// The fake backend refuses one dtype of each op (alternating), so every op has a refused and a supported dtype and
// the routines built on ops meet a refusal at their first call (inverse_sqrt_eigh fp64: eigh; inverse_sqrt_newton_
// schulz fp32: gemm) or after a supported one (inverse_sqrt_eigh fp32: eigh runs, then syrk is refused).
const std::set<std::pair<Op, DType>> kFakeRefuses = {
    {Op::gemm, DType::fp32},   {Op::gemm_batched, DType::fp64}, {Op::syrk, DType::fp32}, {Op::trsm, DType::fp64},
    {Op::cholesky, DType::fp32}, {Op::eigh, DType::fp64},        {Op::spmm, DType::fp32}};

bool is_built(const std::string& name) {
  const auto built = dfmp2::testing::cpu_backends();
  return std::find(built.begin(), built.end(), name) != built.end();
}

std::string fake_name() { return "partial_" + dfmp2::testing::cpu_backends().back(); }

std::vector<std::string> subject_names() {
  std::vector<std::string> names = dfmp2::testing::cpu_backends();
  names.push_back(fake_name());
  // The device models (fp32 only, no eigh: those cells count as unsupported), through the same table.
  for (const std::string device : {"trn1", "trn2"}) names.push_back(device);
  return names;
}

CountingBackend& subject(const std::string& name) {
  static std::map<std::string, std::unique_ptr<CountingBackend>> backends;
  auto& slot = backends[name];
  if (!slot) {
    if (name == fake_name()) {
      slot = std::make_unique<CountingBackend>(dfmp2::devices::make_backend(dfmp2::testing::cpu_backends().back()),
                                               name, kFakeRefuses);
    } else {
      slot = std::make_unique<CountingBackend>(dfmp2::devices::make_backend(name), name,
                                               std::set<std::pair<Op, DType>>{});
    }
  }
  return *slot;
}

la::Backend& reference_backend() {
  static const std::unique_ptr<la::Backend> backend = dfmp2::devices::make_backend(kReference);
  return *backend;
}

// ---------------------------------------------------------------------------------------------------------------
// The summary: per backend x op x dtype, cases passed / failed / unsupported and the worst error over tolerance.

struct Tally {
  int passed = 0, failed = 0, unsupported = 0;
  int compared = 0;  // cases whose results were compared with the reference
  double worst = 0;  // largest normalised error / tolerance among them
};

struct SummaryKey {
  std::string backend, family;
  DType dtype;
  bool operator<(const SummaryKey& o) const {
    return std::tie(backend, family, dtype) < std::tie(o.backend, o.family, o.dtype);
  }
};

std::vector<std::pair<SummaryKey, Tally>>& summary() {
  static std::vector<std::pair<SummaryKey, Tally>> rows;  // in first-seen order
  return rows;
}

Tally& tally_for(const SummaryKey& k) {
  auto& rows = summary();
  for (auto& [rk, t] : rows)
    if (!(rk < k) && !(k < rk)) return t;
  rows.push_back({k, Tally{}});
  return rows.back().second;
}

// Counts the case when it ends: as failed when the test has any failure (a refusal that went wrong included), else
// as unsupported if marked so, else as passed.
class TallyGuard {
 public:
  explicit TallyGuard(SummaryKey k) : key_(std::move(k)) {}
  TallyGuard(const TallyGuard&) = delete;
  TallyGuard& operator=(const TallyGuard&) = delete;
  ~TallyGuard() {
    Tally& t = tally_for(key_);
    if (::testing::Test::HasFailure()) ++t.failed;
    else if (unsupported_) ++t.unsupported;
    else ++t.passed;
    if (ratio_) {
      ++t.compared;
      t.worst = std::max(t.worst, *ratio_);
    }
  }
  void unsupported() { unsupported_ = true; }
  void ratio(double r) { ratio_ = r; }

 private:
  SummaryKey key_;
  bool unsupported_ = false;
  std::optional<double> ratio_;
};

class SummaryPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    auto rows = summary();
    if (rows.empty()) return;
    // Group the rows by backend (in the order of subject_names()), then by op in table order.
    std::vector<std::string> families;
    for (const Spec& s : case_table())
      if (std::find(families.begin(), families.end(), s.family) == families.end()) families.push_back(s.family);
    const auto order = subject_names();
    auto rank = [](const std::vector<std::string>& v, const std::string& x) {
      return std::find(v.begin(), v.end(), x) - v.begin();
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
      const auto ka = std::make_tuple(rank(order, a.first.backend), rank(families, a.first.family));
      const auto kb = std::make_tuple(rank(order, b.first.backend), rank(families, b.first.family));
      return ka < kb;
    });
    std::printf("\nBackend conformance against '%s' (cases passed / failed / unsupported; worst error / tolerance)\n",
                kReference.c_str());
    std::printf("  fake backend %s wraps %s and refuses:", fake_name().c_str(),
                dfmp2::testing::cpu_backends().back().c_str());
    for (const auto& [op, dt] : kFakeRefuses)
      std::printf(" %s/%s", std::string(la::op_name(op)).c_str(), std::string(la::dtype_name(dt)).c_str());
    std::printf("\n  %-18s %-28s %-26s %-26s\n", "backend", "op", "fp64", "fp32");
    Tally total;
    for (size_t i = 0; i < rows.size();) {
      const std::string backend = rows[i].first.backend, family = rows[i].first.family;
      std::string cells[2];
      for (; i < rows.size() && rows[i].first.backend == backend && rows[i].first.family == family; ++i) {
        const Tally& t = rows[i].second;
        char cell[64];
        std::string worst = "-";
        if (t.compared > 0)
          worst = t.worst < 100 ? cat(std::fixed, std::setprecision(2), t.worst) : cat(std::setprecision(1), t.worst);
        std::snprintf(cell, sizeof cell, "%3d / %d / %-3d (%s)", t.passed, t.failed, t.unsupported, worst.c_str());
        cells[rows[i].first.dtype == DType::fp64 ? 0 : 1] = cell;
        total.passed += t.passed, total.failed += t.failed, total.unsupported += t.unsupported;
      }
      std::printf("  %-18s %-28s %-26s %-26s\n", backend.c_str(), family.c_str(), cells[0].c_str(),
                  cells[1].c_str());
    }
    std::printf("  total: %d cases, %d passed, %d failed, %d unsupported\n\n", total.passed + total.failed +
                total.unsupported, total.passed, total.failed, total.unsupported);
    std::fflush(stdout);
  }
};

[[maybe_unused]] ::testing::Environment* const kSummaryPrinter =
    ::testing::AddGlobalTestEnvironment(new SummaryPrinter);

// ---------------------------------------------------------------------------------------------------------------
// Inputs and comparisons

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <class T>
void fill_uniform(MatrixT<T>& m, Rng& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (Index j = 0; j < m.cols(); ++j)
    for (Index i = 0; i < m.rows(); ++i) m(i, j) = T(dist(rng));
}

double max_abs(const Matrix& m) {
  double r = 0;
  for (Index j = 0; j < m.cols(); ++j)
    for (Index i = 0; i < m.rows(); ++i) r = std::max(r, std::abs(m(i, j)));
  return r;
}

// Rows of padding below every dense operand: its leading dimension exceeds its rows, and stray writes show there.
constexpr Index kPad = 3;

template <class T>
struct Padded {
  MatrixT<T> full;
  Index rows = 0, cols = 0;

  Padded() = default;
  Padded(Index r, Index c, Rng& rng) : full(r + kPad, c), rows(r), cols(c) { fill_uniform(full, rng); }
  Index ld() const { return rows + kPad; }
  MatrixViewT<T> view() { return {full.data(), rows, cols, ld()}; }
  ConstMatrixViewT<T> cview() const { return {full.data(), rows, cols, ld()}; }
  T& at(Index i, Index j) { return full(i, j); }
  Matrix region() const { return full.topRows(rows).template cast<double>(); }
  void set_region(double v) { full.topRows(rows).setConstant(T(v)); }
  // Elements of the padding that are not bit for bit those of `before`.
  long pad_changes(const Padded& before) const {
    long n = 0;
    for (Index j = 0; j < cols; ++j)
      for (Index i = rows; i < rows + kPad; ++i) n += !same_bits(full(i, j), before.full(i, j));
    return n;
  }
};

// Q diag(w) Q^T with Q the orthogonal factor of a Gaussian matrix, symmetrised exactly.
Matrix symmetric_with_spectrum(const std::vector<double>& w, Rng& rng) {
  const Index n = static_cast<Index>(w.size());
  if (n == 0) return Matrix(0, 0);
  std::normal_distribution<double> normal;
  Matrix g(n, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) g(i, j) = normal(rng);
  const Matrix q = Eigen::HouseholderQR<Matrix>(g).householderQ();
  Eigen::VectorXd d(n);
  for (Index i = 0; i < n; ++i) d[i] = w[static_cast<size_t>(i)];
  const Matrix a = q * d.asDiagonal() * q.transpose();
  return (a + a.transpose()) / 2;
}

// SPD with eigenvalues log-spaced over [1, kSpdKappa], at the midpoints of n equal steps (so the 1 x 1 matrix is
// sqrt(kSpdKappa), whose square root and inverse square root are not exact in any precision).
Matrix spd(Index n, Rng& rng) {
  std::vector<double> w(static_cast<size_t>(n));
  for (Index i = 0; i < n; ++i) w[static_cast<size_t>(i)] = std::pow(kSpdKappa, (double(i) + 0.5) / double(n));
  return symmetric_with_spectrum(w, rng);
}

// The normalised error: the largest |got - ref| / scale(i, j) over the selected elements. Where one is finite and
// the other not, or where the scale is 0 and they differ, it is infinite (NaN matches NaN, so untouched NaN inputs
// compare equal).
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Check {
  double err = 0;
  std::string detail;
};

Check failed(std::string detail) { return {kInf, std::move(detail)}; }

template <class Scale, class Mask>
Check compare_masked(const Matrix& got, const Matrix& ref, Scale scale, const std::string& what, Mask mask) {
  Check c;
  if (got.rows() != ref.rows() || got.cols() != ref.cols())
    return failed(cat(what, ": shape ", got.rows(), "x", got.cols(), ", reference ", ref.rows(), "x", ref.cols()));
  for (Index j = 0; j < got.cols(); ++j)
    for (Index i = 0; i < got.rows(); ++i) {
      if (!mask(i, j)) continue;
      const double g = got(i, j), r = ref(i, j), d = scale(i, j);
      double e;
      if (std::isfinite(g) && std::isfinite(r)) e = g == r ? 0.0 : d > 0 ? std::abs(g - r) / d : kInf;
      else e = (std::isnan(g) && std::isnan(r)) || g == r ? 0.0 : kInf;
      if (e > c.err) {
        c.err = e;
        std::ostringstream os;
        os.precision(17);
        os << what << ": worst at (" << i << "," << j << "): got " << g << ", reference " << r << ", scale " << d;
        c.detail = os.str();
      }
    }
  return c;
}

auto everywhere = [](Index, Index) { return true; };

// Normwise: one scale for every element (1 when it is 0, as for an empty or all-zero reference).
Check compare(const Matrix& got, const Matrix& ref, double scale, const std::string& what) {
  const double sc = scale > 0 ? scale : 1.0;
  return compare_masked(got, ref, [sc](Index, Index) { return sc; }, what, everywhere);
}

// Element by element, with the bound's D_ij (see the table).
template <class Mask = decltype(everywhere)>
Check compare_elementwise(const Matrix& got, const Matrix& ref, const Matrix& d, const std::string& what,
                          Mask mask = everywhere) {
  if (d.rows() != ref.rows() || d.cols() != ref.cols()) return failed(cat(what, ": scale shape"));
  return compare_masked(got, ref, [&d](Index i, Index j) { return d(i, j); }, what, mask);
}

// D = |alpha| |X| |Y| + |beta| |C0| (the C0 term left out when beta == 0: C0 is not read).
Matrix gemm_scale(double alpha, const Matrix& x, const Matrix& y, double beta, const Matrix& c0) {
  Matrix d = std::abs(alpha) * (x.cwiseAbs() * y.cwiseAbs());
  if (beta != 0) d += std::abs(beta) * c0.cwiseAbs();
  return d;
}

Matrix op(const Matrix& x, Trans t) { return t == Trans::no ? x : Matrix(x.transpose()); }

Check worse(Check a, const Check& b) { return b.err > a.err ? b : a; }

// ---------------------------------------------------------------------------------------------------------------
// Runners: one per kind of case. The constructor makes the inputs (from the case's seed); run() calls the op on a
// Kernels with fresh copies of the outputs and returns them in double (exact for fp32); compare() gives the
// normalised error against the reference's outcome; expected_log() the kernel log the run must leave.

struct Outcome {
  std::vector<Matrix> out;
  long stray = 0;  // elements the op must not write (padding, the other triangle, gaps) that changed
  la::InverseSqrtReport report;
};

// One expected kernel-log record; flops and bytes from the op descriptors' costs (unset for host work with no cost function).
struct Expected {
  std::string kernel;
  bool host = false;
  long calls = 1;
  std::optional<Cost> cost;
};

// Kernels scales the dense ops' byte counts (written for 8-byte elements) to the element size.
template <class T>
Cost dense(Cost c) {
  return la::scaled_bytes(c, sizeof(T));
}

template <class T>
class Runner {
 public:
  explicit Runner(const Spec& s) : s_(s), rng_(s.seed) {}
  virtual ~Runner() = default;
  virtual Outcome run(Kernels& k) const = 0;
  virtual Check compare_with(const Outcome& got, const Outcome& ref) const = 0;
  virtual std::vector<Expected> expected_log(const Outcome& got) const = 0;

 protected:
  const Spec& s_;
  Rng rng_;
};

template <class T>
class GemmRunner final : public Runner<T> {
 public:
  explicit GemmRunner(const Spec& s) : Runner<T>(s) {
    a_ = s.ta == Trans::no ? Padded<T>(s.m, s.k, this->rng_) : Padded<T>(s.k, s.m, this->rng_);
    b_ = s.tb == Trans::no ? Padded<T>(s.k, s.n, this->rng_) : Padded<T>(s.n, s.k, this->rng_);
    c_ = Padded<T>(s.m, s.n, this->rng_);
    if (s.beta == 0) c_.set_region(kNaN);  // C must not be read
  }
  Outcome run(Kernels& k) const override {
    Padded<T> c = c_;
    k.gemm(kStep, this->s_.ta, this->s_.tb, T(this->s_.alpha), a_.cview(), b_.cview(), T(this->s_.beta), c.view());
    return {{c.region()}, c.pad_changes(c_), {}};
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    const Spec& s = this->s_;
    const Matrix d = gemm_scale(s.alpha, op(a_.region(), s.ta), op(b_.region(), s.tb), s.beta, c_.region());
    return compare_elementwise(got.out[0], ref.out[0], d, "C");
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    const Spec& s = this->s_;
    return {{"gemm", false, 1, dense<T>(la::gemm_cost(s.m, s.n, s.k, s.beta != 0))}};
  }

 private:
  Padded<T> a_, b_, c_;
};

// `count` problems, each operand in one buffer with its problems `stride` elements apart (0: shared), leading
// dimensions above the rows and gaps between the C problems, which must stay untouched.
template <class T>
class GemmBatchedRunner final : public Runner<T> {
 public:
  explicit GemmBatchedRunner(const Spec& s) : Runner<T>(s) {
    ar_ = s.ta == Trans::no ? s.m : s.k, ac_ = s.ta == Trans::no ? s.k : s.m;
    br_ = s.tb == Trans::no ? s.k : s.n, bc_ = s.tb == Trans::no ? s.n : s.k;
    lda_ = ar_ + 2, ldb_ = br_ + 1, ldc_ = s.m + 3;
    strides_ = {s.shared_a ? 0 : lda_ * ac_ + 3, s.shared_b ? 0 : ldb_ * bc_ + 1, ldc_ * s.n + 2};
    const Index problems = std::max<Index>(1, s.count);
    abuf_.resize(problems * std::max(strides_.a, lda_ * ac_) + 1, 1);
    bbuf_.resize(problems * std::max(strides_.b, ldb_ * bc_) + 1, 1);
    cbuf_.resize(problems * strides_.c + 1, 1);
    fill_uniform(abuf_, this->rng_);
    fill_uniform(bbuf_, this->rng_);
    fill_uniform(cbuf_, this->rng_);
    inside_.assign(static_cast<size_t>(cbuf_.rows()), false);
    for (Index p = 0; p < s.count; ++p)
      for (Index j = 0; j < s.n; ++j)
        for (Index i = 0; i < s.m; ++i) {
          const Index at = p * strides_.c + i + j * ldc_;
          inside_[static_cast<size_t>(at)] = true;
          if (s.beta == 0) cbuf_(at, 0) = T(kNaN);  // C must not be read
        }
  }
  Outcome run(Kernels& k) const override {
    const Spec& s = this->s_;
    MatrixT<T> c = cbuf_;
    k.gemm_batched(kStep, s.ta, s.tb, s.count, strides_, T(s.alpha), ConstMatrixViewT<T>(abuf_.data(), ar_, ac_, lda_),
                   ConstMatrixViewT<T>(bbuf_.data(), br_, bc_, ldb_), T(s.beta),
                   MatrixViewT<T>{c.data(), s.m, s.n, ldc_});
    Outcome o;
    for (Index p = 0; p < s.count; ++p) o.out.push_back(problem(c, p));
    for (Index i = 0; i < c.rows(); ++i) o.stray += !inside_[static_cast<size_t>(i)] && !same_bits(c(i, 0), cbuf_(i, 0));
    return o;
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    const Spec& s = this->s_;
    if (got.out.size() != ref.out.size()) return failed("problem count differs");
    Check c;
    for (Index p = 0; p < s.count; ++p) {
      const Matrix a = operand(abuf_, p * strides_.a, ar_, ac_, lda_), b = operand(bbuf_, p * strides_.b, br_, bc_, ldb_);
      const Matrix d = gemm_scale(s.alpha, op(a, s.ta), op(b, s.tb), s.beta, problem(cbuf_, p));
      const size_t q = static_cast<size_t>(p);
      c = worse(c, compare_elementwise(got.out[q], ref.out[q], d, cat("C[", p, "]")));
    }
    return c;
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    const Spec& s = this->s_;
    return {{"gemm_batched", false, 1, dense<T>(la::gemm_batched_cost(s.count, s.m, s.n, s.k, s.beta != 0))}};
  }

 private:
  static Matrix operand(const MatrixT<T>& buf, Index offset, Index rows, Index cols, Index ld) {
    Matrix r(rows, cols);
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) r(i, j) = double(buf(offset + i + j * ld, 0));
    return r;
  }
  Matrix problem(const MatrixT<T>& c, Index p) const {
    return operand(c, p * strides_.c, this->s_.m, this->s_.n, ldc_);
  }
  Index ar_, ac_, br_, bc_, lda_, ldb_, ldc_;
  BatchStrides strides_;
  MatrixT<T> abuf_, bbuf_, cbuf_;
  std::vector<bool> inside_;
};

template <class T>
class SyrkRunner final : public Runner<T> {
 public:
  explicit SyrkRunner(const Spec& s) : Runner<T>(s) {
    a_ = s.ta == Trans::no ? Padded<T>(s.n, s.k, this->rng_) : Padded<T>(s.k, s.n, this->rng_);
    c_ = Padded<T>(s.n, s.n, this->rng_);
    if (s.beta == 0)  // the referenced triangle must not be read
      for (Index j = 0; j < s.n; ++j)
        for (Index i = 0; i < s.n; ++i)
          if (in_triangle(s.uplo, i, j)) c_.at(i, j) = T(kNaN);
  }
  Outcome run(Kernels& k) const override {
    const Spec& s = this->s_;
    Padded<T> c = c_;
    k.syrk(kStep, s.uplo, s.ta, T(s.alpha), a_.cview(), T(s.beta), c.view());
    Outcome o{{c.region()}, c.pad_changes(c_), {}};
    for (Index j = 0; j < s.n; ++j)  // the other triangle is neither referenced nor written
      for (Index i = 0; i < s.n; ++i)
        if (!in_triangle(s.uplo, i, j)) o.stray += !same_bits(c.full(i, j), c_.full(i, j));
    return o;
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    const Spec& s = this->s_;
    const Matrix opa = op(a_.region(), s.ta);
    const Matrix d = gemm_scale(s.alpha, opa, opa.transpose(), s.beta, c_.region());
    return compare_elementwise(got.out[0], ref.out[0], d, "C",
                               [&](Index i, Index j) { return in_triangle(s.uplo, i, j); });
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    return {{"syrk", false, 1, dense<T>(la::syrk_cost(this->s_.n, this->s_.k))}};
  }

 private:
  Padded<T> a_, c_;
};

// A well-conditioned triangle (see the table); the triangle that must not be referenced, and the diagonal when it
// is unit, hold NaN.
template <class T>
class TrsmRunner final : public Runner<T> {
 public:
  explicit TrsmRunner(const Spec& s) : Runner<T>(s) {
    const Index order = s.side == Side::left ? s.m : s.n;
    a_ = Padded<T>(order, order, this->rng_);
    std::uniform_real_distribution<double> off(-0.5, 0.5), on(2.0, 3.0);
    for (Index j = 0; j < order; ++j)
      for (Index i = 0; i < order; ++i) {
        double v = kNaN;
        if (i == j) v = s.diag == Diag::unit ? kNaN : (j % 2 ? -1.0 : 1.0) * on(this->rng_);
        else if (in_triangle(s.uplo, i, j)) v = off(this->rng_) / double(order);
        a_.at(i, j) = T(v);
      }
    b_ = Padded<T>(s.m, s.n, this->rng_);
  }
  Outcome run(Kernels& k) const override {
    const Spec& s = this->s_;
    Padded<T> b = b_;
    k.trsm(kStep, s.side, s.uplo, s.ta, s.diag, T(s.alpha), a_.cview(), b.view());
    return {{b.region()}, b.pad_changes(b_), {}};
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    return compare(got.out[0], ref.out[0], max_abs(ref.out[0]), "X");
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    const Spec& s = this->s_;
    return {{"trsm", false, 1, dense<T>(la::trsm_cost(s.side, s.m, s.n))}};
  }

 private:
  Padded<T> a_, b_;
};

// The SPD matrix in the `uplo` triangle; the other triangle is NaN and must stay so, untouched.
template <class T>
class CholeskyRunner final : public Runner<T> {
 public:
  explicit CholeskyRunner(const Spec& s) : Runner<T>(s) {
    const Matrix a = spd(s.n, this->rng_);
    a_ = Padded<T>(s.n, s.n, this->rng_);
    for (Index j = 0; j < s.n; ++j)
      for (Index i = 0; i < s.n; ++i) a_.at(i, j) = T(in_triangle(s.uplo, i, j) ? a(i, j) : kNaN);
  }
  Outcome run(Kernels& k) const override {
    const Spec& s = this->s_;
    Padded<T> a = a_;
    k.cholesky(kStep, s.uplo, a.view());
    Outcome o{{a.region()}, a.pad_changes(a_), {}};
    for (Index j = 0; j < s.n; ++j)
      for (Index i = 0; i < s.n; ++i)
        if (!in_triangle(s.uplo, i, j)) o.stray += !same_bits(a.full(i, j), a_.full(i, j));
    return o;
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    const Spec& s = this->s_;
    auto mask = [&](Index i, Index j) { return in_triangle(s.uplo, i, j); };
    double scale = 0;
    for (Index j = 0; j < s.n; ++j)
      for (Index i = 0; i < s.n; ++i)
        if (mask(i, j)) scale = std::max(scale, std::abs(ref.out[0](i, j)));
    const double sc = scale > 0 ? scale : 1.0;
    return compare_masked(got.out[0], ref.out[0], [sc](Index, Index) { return sc; }, "factor", mask);
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    return {{"cholesky", false, 1, dense<T>(la::cholesky_cost(this->s_.n))}};
  }

 private:
  Padded<T> a_;
};

template <class T>
class EighRunner final : public Runner<T> {
 public:
  explicit EighRunner(const Spec& s) : Runner<T>(s) {
    Matrix a;
    if (s.degenerate) {
      std::vector<double> w(static_cast<size_t>(s.n));
      for (Index i = 0; i < s.n; ++i) w[static_cast<size_t>(i)] = std::vector<double>{-1.0, 0.5, 2.0}[size_t(3 * i / s.n)];
      a = symmetric_with_spectrum(w, this->rng_);
    } else {  // a random symmetric matrix: eigenvalues of both signs, simple
      a.resize(s.n, s.n);
      fill_uniform(a, this->rng_);
      a = (a + a.transpose()).eval() / 2;
    }
    a_ = Padded<T>(s.n, s.n, this->rng_);
    for (Index j = 0; j < s.n; ++j)
      for (Index i = 0; i < s.n; ++i) a_.at(i, j) = T(i >= j ? a(i, j) : kNaN);  // only the lower triangle is read
    sym_ = a.template cast<T>().template cast<double>();  // what the backend sees, as a full symmetric matrix
  }
  Outcome run(Kernels& k) const override {
    Padded<T> a = a_;
    VectorT<T> w = VectorT<T>::Constant(this->s_.n, T(kNaN));
    k.eigh(kStep, a.view(), w.data());
    return {{a.region(), w.template cast<double>()}, a.pad_changes(a_), {}};
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    const Index n = this->s_.n;
    const Matrix& v = got.out[0];
    const Matrix& w = got.out[1];
    const double norm = max_abs(ref.out[1]);  // ||A||_2
    for (Index i = 1; i < n; ++i)
      if (!(w(i - 1, 0) <= w(i, 0))) return failed(cat("eigenvalues not ascending at ", i));
    Check c = compare(w, ref.out[1], norm, "eigenvalues");
    if (n == 0) return c;
    const Matrix rebuilt = v * w.col(0).asDiagonal() * v.transpose();
    c = worse(c, compare(rebuilt, sym_, norm, "reconstruction V diag(w) V^T vs A"));
    c = worse(c, compare(v.transpose() * v, Matrix::Identity(n, n), 1.0, "orthonormality V^T V vs I"));
    return c;
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    return {{"eigh", false, 1, dense<T>(la::eigh_cost(this->s_.n))}};
  }

 private:
  Padded<T> a_;
  Matrix sym_;
};

// inverse_sqrt_eigh and inverse_sqrt_newton_schulz of an SPD matrix (both triangles) with kappa = 10.
template <class T>
class InverseSqrtRunner final : public Runner<T> {
 public:
  explicit InverseSqrtRunner(const Spec& s) : Runner<T>(s) {
    const Matrix a = spd(s.n, this->rng_);
    a_ = Padded<T>(s.n, s.n, this->rng_);
    for (Index j = 0; j < s.n; ++j)
      for (Index i = 0; i < s.n; ++i) a_.at(i, j) = T(a(i, j));
  }
  bool eigh() const { return this->s_.kind == Kind::inverse_sqrt_eigh; }
  Outcome run(Kernels& k) const override {
    Padded<T> a = a_;
    la::InverseSqrtReport report =
        eigh() ? la::inverse_sqrt_eigh(k, kStep, a.view()) : la::inverse_sqrt_newton_schulz(k, kStep, a.view());
    return {{a.region()}, a.pad_changes(a_), report};
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    if (got.report.method != ref.report.method) return failed(cat("method ", got.report.method));
    if (eigh() && got.report.dropped != 0)
      return failed(cat(got.report.dropped, " eigenvalues dropped from a matrix with condition number ", kSpdKappa));
    if (!eigh() && std::abs(got.report.iterations - ref.report.iterations) > 1)
      return failed(cat("Newton-Schulz took ", got.report.iterations, " iterations, the reference ",
                        ref.report.iterations));
    return compare(got.out[0], ref.out[0], max_abs(ref.out[0]), "A^-1/2");
  }
  std::vector<Expected> expected_log(const Outcome& got) const override {
    const Index n = this->s_.n;
    if (n == 0) return {};  // nothing to compute, no kernel called
    if (eigh()) {
      // eigh, then W = V diag(w^-1/4) on the host (no cost function: only the call is checked), then W W^T by syrk.
      return {{"eigh", false, 1, dense<T>(la::eigh_cost(n))},
              {"eigh_scale", true, 1, std::nullopt},
              {"syrk", false, 1, dense<T>(la::syrk_cost(n, n))}};
    }
    // Each iteration computes Z Y; all but the converged last one also Y T and T Z: 3 iterations - 2 GEMMs.
    const long calls = 3L * got.report.iterations - 2;
    const Cost one = dense<T>(la::gemm_cost(n, n, n, false));
    return {{"gemm", false, calls, Cost{double(calls) * one.flops, double(calls) * one.bytes}}};
  }

 private:
  Padded<T> a_;
};

// spmm (C = alpha op(S) B + beta C) and spmv (y = alpha op(S) x + beta y), CSR or BSR. x and y sit in buffers with
// kPad extra elements, which must stay untouched.
template <class T>
class SparseRunner final : public Runner<T> {
 public:
  explicit SparseRunner(const Spec& s) : Runner<T>(s) {
    dense_.resize(s.m, s.k);
    std::uniform_real_distribution<double> val(-1.0, 1.0), u(0.0, 1.0);
    for (Index j = 0; j < s.k; ++j)
      for (Index i = 0; i < s.m; ++i) dense_(i, j) = u(this->rng_) < s.density ? T(val(this->rng_)) : T(0);
    if (bsr()) bsr_ = la::bsr_from_dense(dense_, s.block_rows, s.block_cols);
    else csr_ = la::csr_from_dense(dense_);
    out_rows_ = s.ta == Trans::no ? s.m : s.k;
    inner_ = s.ta == Trans::no ? s.k : s.m;
    b_ = Padded<T>(inner_, s.n, this->rng_);
    c_ = Padded<T>(out_rows_, s.n, this->rng_);
    if (s.beta == 0) c_.set_region(kNaN);  // C must not be read
  }
  bool bsr() const { return this->s_.kind == Kind::spmm_bsr || this->s_.kind == Kind::spmv_bsr; }
  bool spmv() const { return this->s_.kind == Kind::spmv_csr || this->s_.kind == Kind::spmv_bsr; }
  Outcome run(Kernels& k) const override {
    const Spec& s = this->s_;
    Padded<T> c = c_;
    const T alpha = T(s.alpha), beta = T(s.beta);
    if (spmv()) {  // the one column of b_ / c_ with its padding is a vector with kPad spare elements after it
      if (bsr()) k.spmv(kStep, s.ta, alpha, bsr_, b_.full.data(), beta, c.full.data());
      else k.spmv(kStep, s.ta, alpha, csr_, b_.full.data(), beta, c.full.data());
    } else {
      if (bsr()) k.spmm(kStep, s.ta, alpha, bsr_, b_.cview(), beta, c.view());
      else k.spmm(kStep, s.ta, alpha, csr_, b_.cview(), beta, c.view());
    }
    return {{c.region()}, c.pad_changes(c_), {}};
  }
  Check compare_with(const Outcome& got, const Outcome& ref) const override {
    const Spec& s = this->s_;
    const Matrix d = gemm_scale(s.alpha, op(dense_.template cast<double>(), s.ta), b_.region(), s.beta, c_.region());
    return compare_elementwise(got.out[0], ref.out[0], d, "C");
  }
  std::vector<Expected> expected_log(const Outcome&) const override {
    const Spec& s = this->s_;
    // Sparse costs take the element and index sizes and are logged as they are (not scaled).
    if (bsr()) {
      return {{"spmm_bsr", false, 1,
               la::spmm_bsr_cost(bsr_.nblocks(), bsr_.block_rows, bsr_.block_cols, s.n, inner_, out_rows_, s.beta != 0,
                                 sizeof(T), sizeof(Index))}};
    }
    return {{"spmm_csr", false, 1,
             la::spmm_csr_cost(csr_.nnz(), s.n, inner_, out_rows_, s.beta != 0, sizeof(T), sizeof(Index))}};
  }

 private:
  MatrixT<T> dense_;
  CsrMatrix<T> csr_;
  BsrMatrix<T> bsr_;
  Index out_rows_ = 0, inner_ = 0;
  Padded<T> b_, c_;
};

template <class T>
std::unique_ptr<Runner<T>> make_runner(const Spec& s) {
  switch (s.kind) {
    case Kind::gemm: return std::make_unique<GemmRunner<T>>(s);
    case Kind::gemm_batched: return std::make_unique<GemmBatchedRunner<T>>(s);
    case Kind::syrk: return std::make_unique<SyrkRunner<T>>(s);
    case Kind::trsm: return std::make_unique<TrsmRunner<T>>(s);
    case Kind::cholesky: return std::make_unique<CholeskyRunner<T>>(s);
    case Kind::eigh: return std::make_unique<EighRunner<T>>(s);
    case Kind::inverse_sqrt_eigh:
    case Kind::inverse_sqrt_newton_schulz: return std::make_unique<InverseSqrtRunner<T>>(s);
    case Kind::spmm_csr:
    case Kind::spmm_bsr:
    case Kind::spmv_csr:
    case Kind::spmv_bsr: return std::make_unique<SparseRunner<T>>(s);
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// The parameterised test

struct Param {
  std::string backend;
  const Spec* spec;
  la::MatmulMode mode = la::MatmulMode::fp32;  // the device models' operand format (tolerance tiers above)
  // The name in test names and the summary: the backend, with the operand format when it is not fp32.
  std::string label() const {
    return mode == la::MatmulMode::fp32 ? backend : cat(backend, "_", la::matmul_mode_name(mode));
  }
};

// What an operand format adds to a product's elementwise error bound (normalised by D = |alpha||op(A)||op(B)| +
// |beta||C0|): bf16 rounds both operands (relative error <= u16 = 2^-8 each), so each product is within 2 u16 + u16^2
// of the exact one; bf16x3 keeps each operand to about 2^-17 and leaves out lo*lo (2^-18): 3 * 2^-17 per product.
// The fp32 accumulation is the fp32 case's own tolerance.
double mode_bound(la::MatmulMode mode) {
  switch (mode) {
    case la::MatmulMode::fp32: return 0;
    case la::MatmulMode::bf16: return 2.01 * 0x1p-8;
    case la::MatmulMode::bf16x3: return 3 * 0x1p-17;
  }
  return 0;
}

bool matrix_product(const Spec& s) {
  return s.kind == Kind::gemm || s.kind == Kind::gemm_batched || s.kind == Kind::syrk || s.kind == Kind::spmm_csr ||
         s.kind == Kind::spmm_bsr || s.kind == Kind::spmv_csr || s.kind == Kind::spmv_bsr;
}

std::string case_name(const std::string& backend, const Spec& s) {
  return cat(backend, "_", s.label, "_", la::dtype_name(s.dtype), "_", s.shape);
}

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (const std::string& backend : subject_names())
    for (const Spec& s : case_table()) params.push_back({backend, &s});
  for (const std::string device : {"trn1", "trn2"})
    for (const la::MatmulMode mode : {la::MatmulMode::bf16, la::MatmulMode::bf16x3})
      for (const Spec& s : case_table())
        if (s.dtype == DType::fp32 && matrix_product(s)) params.push_back({device, &s, mode});
  return params;
}

void PrintTo(const Param& p, std::ostream* os) { *os << case_name(p.label(), *p.spec); }

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return case_name(info.param.label(), *info.param.spec);
}

// The reference outcome of a case, computed once (on eigen, through its own Kernels) and shared by the backends.
template <class T>
const Outcome& reference_outcome(const Spec& s, const Runner<T>& runner) {
  static std::map<const Spec*, Outcome> cache;
  auto it = cache.find(&s);
  if (it == cache.end()) {
    KernelLog log;
    Kernels k(reference_backend(), log);
    it = cache.emplace(&s, runner.run(k)).first;
    reference_backend().release();
  }
  return it->second;
}

void expect_log(const KernelLog& log, const std::vector<Expected>& expected, const std::string& backend, DType dt,
                la::MatmulMode mode) {
  const auto& records = log.records();
  ASSERT_EQ(records.size(), expected.size()) << "kernel log records";
  for (size_t i = 0; i < expected.size(); ++i) {
    const KernelRecord& r = records[i];
    const Expected& e = expected[i];
    SCOPED_TRACE(cat("kernel log record ", i, " (", e.kernel, ")"));
    EXPECT_EQ(r.step, kStep);
    EXPECT_EQ(r.kernel, e.kernel);
    EXPECT_EQ(r.backend, e.host ? std::string("host") : backend);
    // A device op in bf16 or bf16x3 is logged with that format; host work with its element type.
    EXPECT_EQ(r.dtype, dt == DType::fp32 && !e.host ? std::string(la::matmul_mode_name(mode))
                                                    : std::string(la::dtype_name(dt)));
    EXPECT_EQ(r.calls, e.calls);
    EXPECT_GE(r.seconds, 0.0);
    if (e.cost) {
      EXPECT_DOUBLE_EQ(r.flops, e.cost->flops) << "flops (the descriptor's cost)";
      EXPECT_DOUBLE_EQ(r.bytes, e.cost->bytes) << "bytes (the descriptor's cost)";
    }
  }
}

// Routines built on ops return before any kernel call when n == 0 (there is nothing to compute), so on a backend
// lacking one of their ops there is no call to refuse: such a case must simply call nothing.
bool calls_a_kernel(const Spec& s) {
  const bool routine = s.kind == Kind::inverse_sqrt_eigh || s.kind == Kind::inverse_sqrt_newton_schulz;
  return !(routine && s.n == 0);
}

template <class T>
void run_case(const Param& p) {
  const Spec& s = *p.spec;
  TallyGuard tally({p.label(), s.family, s.dtype});
  const auto runner = make_runner<T>(s);
  CountingBackend& backend = subject(p.backend);
  KernelLog log;
  Kernels kernels(backend, log);
  kernels.set_matmul_mode(p.mode);
  const double tol = s.tol + mode_bound(p.mode);
  const long calls_before = backend.total_calls();
  const long stray_calls_before = backend.calls_to_unsupported();

  std::vector<Op> lacking;
  for (Op op : s.needs)
    if (!backend.supports(op, s.dtype)) lacking.push_back(op);
  if (!lacking.empty()) {
    // Unsupported: refused with UnsupportedError, never rerouted, never reaching the backend for that op.
    tally.unsupported();
    std::map<Op, long> before;
    for (Op op : lacking) before[op] = backend.calls(op, s.dtype);
    if (calls_a_kernel(s)) {
      EXPECT_THROW(runner->run(kernels), dfmp2::UnsupportedError);
    } else {
      EXPECT_NO_THROW(runner->run(kernels));
      EXPECT_EQ(backend.total_calls(), calls_before) << "a call reached the backend with nothing to compute";
    }
    for (Op op : lacking) {
      EXPECT_EQ(backend.calls(op, s.dtype), before[op]) << la::op_name(op) << " reached the backend";
      for (const KernelRecord& r : log.records()) EXPECT_NE(r.kernel, la::op_name(op)) << "a refused op was logged";
    }
    if (s.needs.front() == lacking.front()) {  // refused at the first call: nothing at all ran or was logged
      EXPECT_EQ(backend.total_calls(), calls_before);
      EXPECT_TRUE(log.records().empty());
    }
    EXPECT_EQ(backend.calls_to_unsupported(), stray_calls_before);
    backend.release();
    return;
  }

  const Outcome* ref = nullptr;
  try {
    ref = &reference_outcome(s, *runner);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the reference backend '" << kReference << "' threw: " << e.what();
    return;
  }
  Outcome got;
  try {
    got = runner->run(kernels);
  } catch (const std::exception& e) {
    backend.release();
    ADD_FAILURE() << "backend '" << p.backend << "' threw: " << e.what();
    return;
  }
  backend.release();
  EXPECT_EQ(backend.calls_to_unsupported(), stray_calls_before);
  EXPECT_EQ(got.stray, 0) << "elements the op must not write (padding, other triangle, gaps between problems) changed";
  const Check c = runner->compare_with(got, *ref);
  EXPECT_LE(c.err, tol) << "normalised error " << c.err << " > tolerance " << tol << "; " << c.detail;
  tally.ratio(c.err / tol);
  expect_log(log, runner->expected_log(got), p.backend, s.dtype, p.mode);
}

class Case : public ::testing::TestWithParam<Param> {};

TEST_P(Case, MatchesReference) {
  if (!is_built(kReference)) GTEST_SKIP() << "the reference backend '" << kReference << "' is not built";
  if (GetParam().spec->dtype == DType::fp64) run_case<double>(GetParam());
  else run_case<float>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Conformance, Case, ::testing::ValuesIn(all_params()), param_name);

// ---------------------------------------------------------------------------------------------------------------
// The table itself, and the unsupported mechanism on its own

TEST(ConformanceTable, CoversEveryOpDtypeAndShapeClass) {
  const auto& table = case_table();
  std::set<std::string> names;
  for (const Spec& s : table) {
    EXPECT_TRUE(names.insert(case_name("x", s)).second) << "duplicate case " << case_name("x", s);
    EXPECT_GT(s.tol, 0.0) << case_name("x", s);
    EXPECT_FALSE(s.needs.empty()) << case_name("x", s);
  }
  for (DType dt : la::kAllDTypes) {
    SCOPED_TRACE(la::dtype_name(dt));
    for (Op op : la::kAllOps) {
      bool direct = false;  // the op is the case's only op (not reached through a routine)
      for (const Spec& s : table) direct = direct || (s.dtype == dt && s.needs == std::vector<Op>{op});
      EXPECT_TRUE(direct) << la::op_name(op) << " has no case of its own";
    }
    std::map<std::string, std::set<std::string>> classes;
    for (const Spec& s : table)
      if (s.dtype == dt) classes[s.family].insert(s.shape_class);
    const std::set<std::string> square = {"cholesky", "eigh", "inverse_sqrt_eigh", "inverse_sqrt_newton_schulz"};
    for (const auto& [family, got] : classes) {
      std::set<std::string> want = {"1x1", "empty", "odd"};
      if (!square.count(family)) want.insert({"tall", "wide"});
      EXPECT_EQ(got, want) << family;
    }
    for (const char* family : {"gemm", "gemm_batched", "syrk", "trsm", "cholesky", "eigh", "inverse_sqrt_eigh",
                               "inverse_sqrt_newton_schulz", "spmm_csr", "spmm_bsr", "spmv_csr", "spmv_bsr"})
      EXPECT_TRUE(classes.count(family)) << family;
    // The DF-MP2 fitting pattern B L^T = A, and a shared batched operand, are in.
    bool dfmp2_trsm = false, shared = false;
    for (const Spec& s : table) {
      if (s.dtype != dt) continue;
      dfmp2_trsm = dfmp2_trsm || (s.kind == Kind::trsm && s.side == Side::right && s.uplo == Uplo::lower &&
                                  s.ta == Trans::yes && s.diag == Diag::non_unit && s.m > 100);
      shared = shared || (s.kind == Kind::gemm_batched && s.count > 1 && (s.shared_a || s.shared_b));
    }
    EXPECT_TRUE(dfmp2_trsm);
    EXPECT_TRUE(shared);
  }
}

// The fake backend refuses exactly its list, forwards everything else to the real backend, and a refused op throws
// UnsupportedError from Kernels without reaching the wrapped backend or the log.
TEST(ConformanceFakeBackend, RefusesItsOpsWithoutCallingTheWrappedBackend) {
  CountingBackend fake(dfmp2::devices::make_backend(dfmp2::testing::cpu_backends().back()), "fake", kFakeRefuses);
  for (Op op : la::kAllOps)
    for (DType dt : la::kAllDTypes) EXPECT_EQ(fake.supports(op, dt), kFakeRefuses.count({op, dt}) == 0);
  KernelLog log;
  Kernels k(fake, log);
  // gemm: fp32 refused, fp64 forwarded.
  MatrixT<float> af = MatrixT<float>::Identity(3, 3), cf = MatrixT<float>::Zero(3, 3);
  EXPECT_THROW(k.gemm(kStep, Trans::no, Trans::no, 1.0f, la::view(af), la::view(af), 0.0f, la::view(cf)),
               dfmp2::UnsupportedError);
  EXPECT_EQ(fake.total_calls(), 0);
  EXPECT_TRUE(log.records().empty());
  EXPECT_TRUE((cf.array() == 0.0f).all()) << "the refused call wrote its output";
  Matrix a = Matrix::Identity(3, 3), c = Matrix::Zero(3, 3);
  k.gemm(kStep, Trans::no, Trans::no, 2.0, la::view(a), la::view(a), 0.0, la::view(c));
  EXPECT_EQ(fake.calls(Op::gemm, DType::fp64), 1);
  EXPECT_TRUE(c.isApprox(2.0 * Matrix::Identity(3, 3)));
  ASSERT_EQ(log.records().size(), 1u);
  EXPECT_EQ(log.records()[0].backend, "fake");
  // eigh: fp64 refused; inverse_sqrt_eigh fp64 stops at it. In fp32 eigh runs and the refused syrk stops it.
  Matrix s = 4.0 * Matrix::Identity(3, 3);
  EXPECT_THROW(la::inverse_sqrt_eigh(k, kStep, la::view(s)), dfmp2::UnsupportedError);
  EXPECT_EQ(fake.calls(Op::eigh, DType::fp64), 0);
  MatrixT<float> sf = 4.0f * MatrixT<float>::Identity(3, 3);
  EXPECT_THROW(la::inverse_sqrt_eigh(k, kStep, la::view(sf)), dfmp2::UnsupportedError);
  EXPECT_EQ(fake.calls(Op::eigh, DType::fp32), 1);
  EXPECT_EQ(fake.calls(Op::syrk, DType::fp32), 0);
  // Every refused (op, dtype): no call ever reached the wrapped backend.
  for (const auto& [op, dt] : kFakeRefuses) EXPECT_EQ(fake.calls(op, dt), 0) << la::op_name(op);
  EXPECT_EQ(fake.calls_to_unsupported(), 0);
}

// The harness itself: a backend whose results lose half their precision, or that writes outside its output,
// must fail every case with more than a handful of results (the tolerances are not so loose that they pass anything).
// Newton-Schulz is left out: it never hands the caller's matrix to a kernel (no stray write can reach it), and with
// half-precision GEMMs it runs all its iterations before giving up (slow); its GEMMs are checked directly.
template <class T>
bool detects(const Spec& s, CountingBackend& broken, std::string& why) {
  const auto runner = make_runner<T>(s);
  const Outcome& ref = reference_outcome(s, *runner);
  KernelLog log;
  Kernels k(broken, log);
  Outcome got;
  try {
    got = runner->run(k);
  } catch (const dfmp2::Error& e) {  // e.g. Newton-Schulz no longer converges: caught too
    why = e.what();
    return true;
  }
  const Check c = runner->compare_with(got, ref);
  why = cat("error ", c.err, " (tolerance ", s.tol, "), stray writes ", got.stray);
  return c.err > s.tol || got.stray > 0;
}

TEST(ConformanceSelfCheck, CatchesLostPrecisionAndStrayWrites) {
  if (!is_built(kReference)) GTEST_SKIP() << "the reference backend '" << kReference << "' is not built";
  const std::string inner = dfmp2::testing::cpu_backends().back();
  for (Fault fault : {Fault::precision, Fault::stray}) {
    CountingBackend broken(dfmp2::devices::make_backend(inner), "broken_" + inner, {});
    broken.set_fault(fault);
    int checked = 0;
    for (const Spec& s : case_table()) {
      // The odd shapes, every op and option: many results each (in a 1 x 1 case the one result may be exact in half
      // precision, or tiny beside its bound after cancellation).
      if (s.shape_class != "odd") continue;
      if (s.kind == Kind::inverse_sqrt_newton_schulz) continue;
      std::string why;
      const bool caught = s.dtype == DType::fp64 ? detects<double>(s, broken, why) : detects<float>(s, broken, why);
      EXPECT_TRUE(caught) << (fault == Fault::precision ? "lost precision" : "stray write") << " not caught by "
                          << case_name(broken.name(), s) << ": " << why;
      ++checked;
    }
    broken.release();
    EXPECT_GT(checked, 0);
  }
}

}  // namespace
