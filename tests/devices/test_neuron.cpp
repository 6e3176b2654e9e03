// The Trainium device models (devices/neuron/): calibration against the published trn1 measurements, arithmetic
// as the device does it (fp32 and bf16 against an fp64 reference), what the device refuses, HBM limits, the
// compile cache, the launch queue and parameter overrides.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "devices/neuron/bf16.hpp"
#include "devices/neuron/calibration.hpp"
#include "devices/neuron/native_pipeline.hpp"
#include "devices/neuron/neuron_backend.hpp"
#include "devices/neuron/neuron_params.hpp"
#include "devices/neuron/timing_model.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace {

namespace la = dfmp2::linalg;
namespace neuron = dfmp2::devices::neuron;
using dfmp2::devices::DeviceOptions;
using dfmp2::devices::make_backend;
using la::Index;
using la::Matrix;
using la::MatrixF;
using la::Trans;

constexpr double kU32 = 0x1p-24;  // unit roundoff of fp32
constexpr double kU16 = 0x1p-8;   // unit roundoff of bf16 (8 significant bits)

// A fresh folder under the temp directory, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int serial = 0;
    path = std::filesystem::temp_directory_path() /
           ("dfmp2-test-neuron-" + std::to_string(::getpid()) + "-" + std::to_string(serial++));
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

// Runs one call on a device model and returns its modelled cost (the call's device facet, which a device model
// always fills in).
la::ModelledTime modelled(la::Backend& device, const la::OpCall& call, la::MatmulMode mode = la::MatmulMode::fp32) {
  const auto facet = device.run(call, mode);
  EXPECT_TRUE(facet.modelled.has_value()) << device.name() << ": no modelled time";
  return facet.modelled.value_or(la::ModelledTime{});
}

MatrixF random_f(Index r, Index c, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  MatrixF m(r, c);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = u(rng);
  return m;
}

Matrix to_d(const MatrixF& m) { return m.cast<double>(); }

// Largest |computed - reference| / (|A||B| bound) over the entries: below 1 means within gamma_k-style bounds.
double max_ratio(const MatrixF& got, const Matrix& ref, const Matrix& scale, double per_entry_bound) {
  double worst = 0;
  for (Index i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - ref.data()[i]) / (per_entry_bound * scale.data()[i] + 1e-300));
  return worst;
}

double max_abs_err(const MatrixF& got, const Matrix& ref) { return (got.cast<double>() - ref).cwiseAbs().maxCoeff(); }

// ---- Calibration ---------------------------------------------------------------------------------------------

const std::vector<neuron::CalibrationRow>& calibration() {
  static TempDir dir;
  static const auto rows = neuron::run_calibration("trn1", dir.str());
  return rows;
}

TEST(NeuronCalibration, CalibrationRowsWithin25PercentAndChecksReported) {
  const auto& rows = calibration();
  int calibration_rows = 0, check_rows = 0;
  for (const auto& r : rows) {
    EXPECT_FALSE(r.source.empty()) << r.kernel << " " << r.shape;
    EXPECT_GT(r.published_s, 0.0);
    EXPECT_GT(r.model_s, 0.0) << r.kernel << " " << r.shape;
    if (r.role == neuron::RowRole::check) {
      ++check_rows;
      continue;
    }
    ++calibration_rows;
    EXPECT_LE(std::abs(r.error), 0.25) << r.kernel << " " << r.shape << ": model " << r.model_s * 1e3
                                       << " ms, published " << r.published_s * 1e3 << " ms";
    EXPECT_TRUE(r.pass) << r.kernel << " " << r.shape;
  }
  // shared/: GEMM cold 1, SYRK 4 + 2 cold, SpMM 12; trntensor steps: 7 copies in, 14 copies out, 5 submissions.
  EXPECT_EQ(calibration_rows, 1 + 4 + 2 + 12 + 7 + 14 + 5);
  // Calls: GEMM 2 (shared/) + 3 (trntensor end to end), TRSM 4 warm + 2 cold; steps: 9 submissions.
  EXPECT_EQ(check_rows, 5 + 4 + 2 + 9);
  const auto errors = neuron::row_errors(rows, neuron::RowRole::check);
  const auto calls = neuron::row_errors(rows, neuron::RowRole::check, true);
  EXPECT_EQ(errors.rows, check_rows);
  EXPECT_EQ(calls.rows, 5 + 4 + 2);
  EXPECT_LE(errors.median, errors.largest);
}

TEST(NeuronCalibration, ColdRowsCompileOrLoad) {
  for (const auto& r : calibration()) {
    if (r.kernel == "gemm cold, disk cache") {
      EXPECT_EQ(r.modelled.cache_loads, 1);
      EXPECT_EQ(r.modelled.compiles, 0);
    } else if (r.kernel == "syrk cold, no cache") {
      EXPECT_EQ(r.modelled.compiles, 1);
      EXPECT_GT(r.modelled.compile, 1.0);
    } else if (r.kernel == "trsm cold, no cache") {  // every trailing update its own shape, each compiled
      EXPECT_GT(r.modelled.launches, 1);
      EXPECT_EQ(r.modelled.compiles, r.modelled.launches);
    } else if (r.kernel.rfind("copy", 0) == 0 || r.kernel.rfind("launch", 0) == 0) {
      EXPECT_EQ(r.modelled.launches, 0) << r.kernel;  // a step of a call, not a call
    } else {
      EXPECT_EQ(r.modelled.compiles + r.modelled.cache_loads, 0) << r.kernel << " " << r.shape;
      if (r.kernel == "trsm") EXPECT_GT(r.modelled.launches, 1);
      else EXPECT_EQ(r.modelled.launches, 1);
    }
  }
}

// The copy curve: a fixed cost, then the small-copy rate up to the knee and the large-copy rate beyond, continuous
// at the knee; the effective rate of a large copy tends to the large-copy rate.
TEST(NeuronCopies, RateFallsPastTheKneeToTheLargeCopyRate) {
  const auto p = neuron::load_neuron_params("trn1");
  using neuron::CopyDirection;
  for (const auto dir : {CopyDirection::to_device, CopyDirection::to_host}) {
    const bool in = dir == CopyDirection::to_device;
    const double knee = (in ? p.h2d_knee_mib : p.d2h_knee_mib) * 1048576.0;
    const double fixed = (in ? p.h2d_fixed_us : p.d2h_fixed_us) * 1e-6;
    const double small_rate = (in ? p.h2d_small_gbps : p.d2h_small_gbps) * 1e9;
    const double large_rate = (in ? p.h2d_large_gbps : p.d2h_large_gbps) * 1e9;
    EXPECT_DOUBLE_EQ(neuron::copy_seconds(p, dir, 0), fixed);
    EXPECT_NEAR(neuron::copy_seconds(p, dir, knee), fixed + knee / small_rate, 1e-12);
    EXPECT_NEAR(neuron::copy_seconds(p, dir, knee + 1e6) - neuron::copy_seconds(p, dir, knee), 1e6 / large_rate, 1e-12);
    double previous = 0;
    for (double bytes = 1024; bytes < 1e10; bytes *= 2) {
      const double t = neuron::copy_seconds(p, dir, bytes);
      EXPECT_GT(t, previous) << bytes;
      previous = t;
    }
    EXPECT_NEAR(8e9 / neuron::copy_seconds(p, dir, 8e9), large_rate, 0.01 * large_rate);
  }
  // To the device, small copies are faster than large ones (staging), as trntensor measured.
  EXPECT_GT(p.h2d_small_gbps, p.h2d_large_gbps);
  // An override moves the curve.
  DeviceOptions o;
  o.overrides["trn1"]["h2d_large_gbps"] = 2 * p.h2d_large_gbps;
  const auto q = neuron::load_neuron_params("trn1", o);
  EXPECT_LT(neuron::copy_seconds(q, neuron::CopyDirection::to_device, 1e9),
            neuron::copy_seconds(p, neuron::CopyDirection::to_device, 1e9));
}

// ---- Arithmetic ----------------------------------------------------------------------------------------------

class NeuronArithmetic : public ::testing::Test {
 protected:
  std::unique_ptr<la::Backend> trn = make_backend("trn1");
  std::mt19937_64 rng{7};
};

TEST_F(NeuronArithmetic, GemmFp32AllTransposesStridedWithinBounds) {
  const Index m = 130, n = 600, k = 300;  // partial tiles in every dimension
  for (Trans ta : {Trans::no, Trans::yes})
    for (Trans tb : {Trans::no, Trans::yes}) {
      const MatrixF a = ta == Trans::no ? random_f(m + 3, k, rng) : random_f(k + 3, m, rng);
      const MatrixF b = tb == Trans::no ? random_f(k + 2, n, rng) : random_f(n + 2, k, rng);
      const MatrixF c0 = random_f(m + 1, n, rng);
      la::ConstMatrixViewF av{a.data(), ta == Trans::no ? m : k, ta == Trans::no ? k : m, a.rows()};
      la::ConstMatrixViewF bv{b.data(), tb == Trans::no ? k : n, tb == Trans::no ? n : k, b.rows()};
      MatrixF c = c0;
      la::MatrixViewF cv{c.data(), m, n, c.rows()};
      const la::ModelledTime t = modelled(*trn, la::Gemm<float>{ta, tb, 0.5f, av, bv, -2.0f, cv});
      const Matrix ad = to_d(a).topRows(av.rows), bd = to_d(b).topRows(bv.rows);
      const Matrix opa = ta == Trans::no ? ad : Matrix(ad.transpose());
      const Matrix opb = tb == Trans::no ? bd : Matrix(bd.transpose());
      const Matrix ref = 0.5 * opa * opb - 2.0 * to_d(c0).topRows(m);
      const Matrix scale = 0.5 * opa.cwiseAbs() * opb.cwiseAbs() + 2.0 * to_d(c0).topRows(m).cwiseAbs();
      EXPECT_LT(max_ratio(c.topRows(m), ref, scale, 1.1 * (k + 2) * kU32), 1.0);
      EXPECT_EQ(c(m, 0), c0(m, 0)) << "row beyond the view written";
      EXPECT_EQ(t.launches, 1);
      EXPECT_GT(t.total, 0);
    }
}

TEST_F(NeuronArithmetic, BlasRulesForZeroAlphaAndBeta) {
  MatrixF a = random_f(4, 4, rng), b = random_f(4, 4, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  MatrixF c = MatrixF::Constant(4, 4, nan);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(std::as_const(a)), la::view(std::as_const(b)), 0.0f, la::view(c)});
  EXPECT_TRUE(c.allFinite()) << "beta 0 must not read C";
  a.fill(nan);
  MatrixF c2 = MatrixF::Ones(4, 4);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 0.0f, la::view(std::as_const(a)), la::view(std::as_const(b)), 3.0f, la::view(c2)});
  EXPECT_TRUE((c2.array() == 3.0f).all()) << "alpha 0 must not read A";
}

TEST_F(NeuronArithmetic, GemmBatchedSharedOperand) {
  const Index count = 5, m = 40, n = 70, k = 150;
  const MatrixF a = random_f(m, k, rng);              // shared (stride 0)
  const MatrixF b = random_f(k, n * count, rng);
  MatrixF c(m, n * count);
  const la::ModelledTime per_problem = modelled(*trn, la::GemmBatched<float>{Trans::no, Trans::no, count, {0, k * n, m * n}, 1.0f, la::view(a), {b.data(), k, n, k}, 0.0f,
                    {c.data(), m, n, m}});
  const Matrix ref = to_d(a) * to_d(b);
  const Matrix scale = to_d(a).cwiseAbs() * to_d(b).cwiseAbs();
  EXPECT_LT(max_ratio(c, ref, scale, 1.1 * k * kU32), 1.0);
  EXPECT_EQ(per_problem.launches, count) << "by default one launch per problem, as the published library loops";
  // batched_gemm_launches: 1 models a fused batched kernel: one launch, one dispatch, the shared operand copied once.
  auto fused = make_backend("trn1", DeviceOptions{.overrides = {{"trn1", {{"batched_gemm_launches", 1}}}},
                                                  .compile_cache = {}});
  MatrixF c1(m, n * count);
  const la::ModelledTime one_launch = modelled(*fused, la::GemmBatched<float>{Trans::no, Trans::no, count, {0, k * n, m * n}, 1.0f, la::view(a), {b.data(), k, n, k}, 0.0f,
                      {c1.data(), m, n, m}});
  EXPECT_EQ(c1, c) << "the launch structure changes the time, not the arithmetic";
  EXPECT_EQ(one_launch.launches, 1);
  EXPECT_LT(one_launch.dispatch, per_problem.dispatch / (count - 1));
  EXPECT_LT(one_launch.transfer, per_problem.transfer);
}

TEST_F(NeuronArithmetic, SyrkWritesOnlyItsTriangle) {
  const Index n = 200, k = 260;
  for (la::Uplo uplo : {la::Uplo::lower, la::Uplo::upper})
    for (Trans tr : {Trans::no, Trans::yes}) {
      const MatrixF a = tr == Trans::no ? random_f(n, k, rng) : random_f(k, n, rng);
      const MatrixF c0 = random_f(n, n, rng);
      MatrixF c = c0;
      modelled(*trn, la::Syrk<float>{uplo, tr, 1.5f, la::view(a), 0.5f, la::view(c)});
      const Matrix opa = tr == Trans::no ? to_d(a) : Matrix(to_d(a).transpose());
      const Matrix ref = 1.5 * opa * opa.transpose() + 0.5 * to_d(c0);
      const Matrix scale = 1.5 * opa.cwiseAbs() * opa.cwiseAbs().transpose() + 0.5 * to_d(c0).cwiseAbs();
      for (Index j = 0; j < n; ++j)
        for (Index i = 0; i < n; ++i) {
          const bool in = uplo == la::Uplo::lower ? i >= j : i <= j;
          if (in) ASSERT_LE(std::abs(c(i, j) - ref(i, j)), 1.1 * k * kU32 * scale(i, j)) << i << "," << j;
          else ASSERT_EQ(c(i, j), c0(i, j)) << "outside the triangle " << i << "," << j;
        }
    }
}

// A well-conditioned triangle: unit-size diagonal, small off-diagonal.
MatrixF triangle_operand(Index n, std::mt19937_64& rng) {
  MatrixF a = random_f(n, n, rng) * (0.5f / std::sqrt(float(n)));
  for (Index i = 0; i < n; ++i) a(i, i) = 1.0f + 0.5f * std::abs(a(i, i));
  return a;
}

TEST_F(NeuronArithmetic, TrsmEveryVariantSolves) {
  const Index n = 300, other = 70;  // three diagonal blocks, a partial one last
  for (la::Side side : {la::Side::left, la::Side::right})
    for (la::Uplo uplo : {la::Uplo::lower, la::Uplo::upper})
      for (Trans tr : {Trans::no, Trans::yes})
        for (la::Diag diag : {la::Diag::non_unit, la::Diag::unit}) {
          const MatrixF a = triangle_operand(n, rng);
          const MatrixF b0 = side == la::Side::left ? random_f(n, other, rng) : random_f(other, n, rng);
          MatrixF x = b0;
          const la::ModelledTime solve = modelled(*trn, la::Trsm<float>{side, uplo, tr, diag, 2.0f, la::view(a), la::view(x)});
          Matrix t = uplo == la::Uplo::lower ? Matrix(to_d(a).triangularView<Eigen::Lower>())
                                             : Matrix(to_d(a).triangularView<Eigen::Upper>());
          if (diag == la::Diag::unit) t.diagonal().setOnes();
          if (tr == Trans::yes) t.transposeInPlace();
          const Matrix resid = side == la::Side::left ? Matrix(t * to_d(x) - 2.0 * to_d(b0))
                                                      : Matrix(to_d(x) * t - 2.0 * to_d(b0));
          EXPECT_LT(resid.cwiseAbs().maxCoeff(), 2e-5)
              << int(side) << int(uplo) << int(tr) << int(diag);
          EXPECT_EQ(solve.launches, 2) << "one trailing-update GEMM after each diagonal panel but the last";
        }
}

MatrixF spd_operand(Index n, std::mt19937_64& rng) {
  const MatrixF g = random_f(n, n, rng);
  MatrixF a = g * g.transpose() / float(n);
  a.diagonal().array() += 1.0f;
  return a;
}

TEST_F(NeuronArithmetic, CholeskyFactorsAndRefusesIndefinite) {
  const Index n = 333;
  const MatrixF a0 = spd_operand(n, rng);
  for (la::Uplo uplo : {la::Uplo::lower, la::Uplo::upper}) {
    MatrixF f = a0;
    modelled(*trn, la::Cholesky<float>{uplo, la::view(f)});
    const Matrix l = uplo == la::Uplo::lower ? Matrix(to_d(f).triangularView<Eigen::Lower>())
                                             : Matrix(to_d(f).triangularView<Eigen::Upper>().transpose());
    const double err = (l * l.transpose() - to_d(a0)).cwiseAbs().maxCoeff();
    EXPECT_LT(err, 50 * n * kU32) << int(uplo);
    // The other triangle is not written.
    if (uplo == la::Uplo::lower) EXPECT_EQ(f(0, n - 1), a0(0, n - 1));
    else EXPECT_EQ(f(n - 1, 0), a0(n - 1, 0));
  }
  MatrixF bad = a0;
  bad(200, 200) = -50.0f;
  try {
    modelled(*trn, la::Cholesky<float>{la::Uplo::lower, la::view(bad)});
    FAIL() << "indefinite matrix accepted";
  } catch (const dfmp2::NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("order 201"), std::string::npos) << e.what();
  }
}

TEST_F(NeuronArithmetic, SpmmCsrAndBsrAsDenseGemm) {
  const Index m = 300, k = 260, n = 40;
  MatrixF s = random_f(m, k, rng);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (Index i = 0; i < s.size(); ++i)
    if (u(rng) > 0.1f) s.data()[i] = 0.0f;
  const auto csr = la::csr_from_dense(s);
  const auto bsr = la::bsr_from_dense(s, 32, 32);
  for (Trans ts : {Trans::no, Trans::yes}) {
    const Index rows = ts == Trans::no ? m : k, inner = ts == Trans::no ? k : m;
    const MatrixF b = random_f(inner, n, rng);
    const MatrixF c0 = random_f(rows, n, rng);
    const Matrix ops = ts == Trans::no ? to_d(s) : Matrix(to_d(s).transpose());
    const Matrix ref = -1.0 * ops * to_d(b) + 0.25 * to_d(c0);
    const Matrix scale = ops.cwiseAbs() * to_d(b).cwiseAbs() + 0.25 * to_d(c0).cwiseAbs();
    MatrixF c = c0;
    modelled(*trn, la::SpmmCsr<float>{ts, -1.0f, csr, la::view(b), 0.25f, la::view(c)});
    EXPECT_LT(max_ratio(c, ref, scale, 1.1 * inner * kU32), 1.0);
    c = c0;
    const la::ModelledTime t = modelled(*trn, la::SpmmBsr<float>{ts, -1.0f, bsr, la::view(b), 0.25f, la::view(c)});
    EXPECT_LT(max_ratio(c, ref, scale, 1.1 * inner * kU32), 1.0);
    EXPECT_GT(t.host, 0) << "densify on the host";
  }
}

TEST_F(NeuronArithmetic, Bf16ErrorLargerThanFp32AndWithinBf16Bounds) {
  const Index m = 128, n = 256, k = 512;
  const MatrixF a = random_f(m, k, rng), b = random_f(k, n, rng);
  const Matrix ref = to_d(a) * to_d(b);
  const Matrix scale = to_d(a).cwiseAbs() * to_d(b).cwiseAbs();
  MatrixF c32(m, n), c16(m, n);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c32)});
  const double peak32 = trn->peak_flops(la::MatmulMode::fp32);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c16)},
           la::MatmulMode::bf16);
  EXPECT_NEAR(trn->peak_flops(la::MatmulMode::bf16) / peak32, 4.0, 1e-12);
  EXPECT_NEAR(peak32, 2.0 * 128 * 128 * 2.8e9 / 4, 1e3);
  const double e32 = max_abs_err(c32, ref), e16 = max_abs_err(c16, ref);
  EXPECT_GT(e16, 20 * e32) << "bf16 operands must lose precision against fp32";
  // Each operand carries a relative rounding error <= u16, each product <= 2 u16 (+u16^2), then fp32 sums.
  EXPECT_LT(max_ratio(c16, ref, scale, 2.01 * kU16 + 1.1 * k * kU32), 1.0);
  // And the bf16 result is exactly the fp32 product of the rounded operands, up to fp32 summation.
  const MatrixF ar = a.unaryExpr([](float x) { return neuron::round_to_bf16(x); });
  const MatrixF br = b.unaryExpr([](float x) { return neuron::round_to_bf16(x); });
  EXPECT_LT(max_ratio(c16, to_d(ar) * to_d(br), scale, 1.1 * k * kU32), 1.0);
}

// bf16x3: hi = bf16(x), lo = bf16(x - hi), hi*hi + hi*lo + lo*hi: each operand carries about 2^-17 of relative
// error and lo*lo (2^-18) is left out, so the result is within ~2^-15 of the exact product's scale: far better
// than bf16, a little worse than fp32.
TEST_F(NeuronArithmetic, Bf16x3BetweenBf16AndFp32) {
  const Index m = 128, n = 256, k = 512;
  const MatrixF a = random_f(m, k, rng), b = random_f(k, n, rng);
  const Matrix ref = to_d(a) * to_d(b);
  const Matrix scale = to_d(a).cwiseAbs() * to_d(b).cwiseAbs();
  MatrixF c32(m, n), c16(m, n), c3(m, n);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c32)});
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c16)},
           la::MatmulMode::bf16);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c3)},
           la::MatmulMode::bf16x3);
  const double peak3 = trn->peak_flops(la::MatmulMode::bf16x3);
  EXPECT_NEAR(trn->peak_flops(la::MatmulMode::fp32) / peak3, 0.75, 1e-12) << "three bf16 passes against fp32's four";
  const double e32 = max_abs_err(c32, ref), e16 = max_abs_err(c16, ref), e3 = max_abs_err(c3, ref);
  EXPECT_LT(e3, e16 / 50) << "bf16x3 " << e3 << " bf16 " << e16;
  EXPECT_GT(e3, e32) << "the low parts hold 16 bits, not fp32's 24";
  EXPECT_LT(max_ratio(c3, ref, scale, 3 * 0x1p-17 + 1.1 * k * kU32), 1.0);
}

// The timing of bf16x3: three bf16 matmul instructions per tile (0.75 of fp32's Tensor Engine time on a
// compute-bound shape), the on-chip split on the Vector Engine (once per operand), and fp32 operand traffic.
TEST(NeuronTiming, Bf16x3IsThreeBf16PassesPlusTheSplit) {
  const auto p = neuron::load_neuron_params("trn1");
  auto cost = [&](la::MatmulMode mode) {
    neuron::Launch l;
    l.m = 2048, l.n = 2048, l.k = 2048, l.mode = mode, l.tensors = 3;
    return neuron::launch_cost(p, l);
  };
  const auto f32 = cost(la::MatmulMode::fp32), b16 = cost(la::MatmulMode::bf16), x3 = cost(la::MatmulMode::bf16x3);
  EXPECT_NEAR(x3.compute / f32.compute, 0.75, 0.02);
  EXPECT_NEAR(x3.compute / b16.compute, 3.0, 0.1);
  EXPECT_GE(x3.dma, f32.dma) << "operands arrive as fp32, are split on chip, and the split parts are re-read";
  EXPECT_GE(x3.instructions - f32.instructions, 2 * 16 * 4 * 16) << "two more matmuls per tile (16 x 4 x 16 tiles)";
  EXPECT_NEAR(x3.flops, 3 * f32.flops, 1e-6 * f32.flops);
}

// The model's Tensor Engine flops are the op's nominal cost (its descriptor, as the kernel log counts it) plus the
// padding of partial tiles: on whole tiles the two agree exactly, and bf16x3 executes three products per tile.
TEST(NeuronTiming, TensorEngineFlopsAreTheDescriptorCostOnWholeTiles) {
  std::mt19937_64 rng(11);
  const Index m = 256, n = 512, k = 384;
  const MatrixF a = random_f(m, k, rng), b = random_f(k, n, rng);
  MatrixF c(m, n);
  const la::Gemm<float> call{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c)};
  auto trn = make_backend("trn1");
  EXPECT_DOUBLE_EQ(modelled(*trn, call).device_flops, call.cost().flops);
  EXPECT_DOUBLE_EQ(modelled(*trn, call, la::MatmulMode::bf16x3).device_flops, 3 * call.cost().flops);
  // A partial tile (k = 300 pads to 384) costs more on the device than its nominal flops.
  const la::Gemm<float> partial{Trans::no, Trans::no, 1.0f, la::view(a).block(0, 0, m, 300),
                                la::ConstMatrixViewF(la::view(b)).block(0, 0, 300, n), 0.0f, la::view(c)};
  EXPECT_DOUBLE_EQ(modelled(*trn, partial).device_flops, call.cost().flops);
  EXPECT_LT(partial.cost().flops, call.cost().flops);
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

TEST(NeuronBf16, RoundsToNearestTiesToEven) {
  using neuron::round_to_bf16;
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x3f800000))), 0x3f800000u);  // 1.0 exact
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x3f808000))), 0x3f800000u);  // tie, 0x3f80 even: down
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x3f818000))), 0x3f820000u);  // tie, 0x3f81 odd: up to even
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x3f808001))), 0x3f810000u);  // above the tie: up
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x3f807fff))), 0x3f800000u);  // below the tie: down
  EXPECT_EQ(bits(round_to_bf16(from_bits(0xbf818000))), 0xbf820000u);  // negative tie to even
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x3f7fffff))), 0x3f800000u);  // carry into the exponent
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x7f7fffff))), 0x7f800000u);  // largest float rounds to inf
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x7f800000))), 0x7f800000u);  // inf stays
  EXPECT_TRUE(std::isnan(round_to_bf16(from_bits(0x7f800001))));       // NaN with low payload stays NaN
  EXPECT_EQ(bits(round_to_bf16(from_bits(0x00008000))), 0x00000000u);  // subnormal tie to even (zero)
}

TEST(NeuronBf16, BackendRoundsOperandsBeforeMultiplying) {
  auto trn = make_backend("trn1");
  MatrixF a(1, 1), b(1, 1), c(1, 1);
  b(0, 0) = 1.0f;
  a(0, 0) = from_bits(0x3f808000);  // 1 + 2^-8: a tie, rounds down to 1
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c)},
           la::MatmulMode::bf16);
  EXPECT_EQ(c(0, 0), 1.0f);
  a(0, 0) = from_bits(0x3f818000);  // 1 + 3 * 2^-8: a tie, rounds up to 1 + 2^-6
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c)},
           la::MatmulMode::bf16);
  EXPECT_EQ(c(0, 0), 1.0f + 0x1p-6f);
  modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(b), 0.0f, la::view(c)});
  EXPECT_EQ(c(0, 0), from_bits(0x3f818000));
}

// ---- What the device refuses ---------------------------------------------------------------------------------

TEST(NeuronRefuses, Fp64AndEigh) {
  for (const std::string device : {"trn1", "trn2"}) {
    auto trn = make_backend(device);
    for (la::Op op : la::kAllOps) {
      EXPECT_FALSE(trn->supports(op, la::DType::fp64)) << la::op_name(op);
      EXPECT_EQ(trn->supports(op, la::DType::fp32), op != la::Op::eigh) << la::op_name(op);
    }
    Matrix a = Matrix::Identity(4, 4), c(4, 4);
    la::Vector w(4);
    MatrixF af = MatrixF::Identity(4, 4);
    la::VectorF wf(4);
    auto expect_fp64 = [&](auto&& call) {
      try {
        call();
        ADD_FAILURE() << "fp64 accepted";
      } catch (const dfmp2::UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("fp32 or bf16 only"), std::string::npos) << e.what();
      }
    };
    expect_fp64([&] { modelled(*trn, la::Gemm<double>{Trans::no, Trans::no, 1.0, la::view(a), la::view(a), 0.0, la::view(c)}); });
    expect_fp64([&] { modelled(*trn, la::Syrk<double>{la::Uplo::lower, Trans::no, 1.0, la::view(a), 0.0, la::view(c)}); });
    expect_fp64([&] { modelled(*trn, la::Cholesky<double>{la::Uplo::lower, la::view(c)}); });
    expect_fp64([&] { modelled(*trn, la::GemmBatched<double>{Trans::no, Trans::no, 1, {}, 1.0, la::view(a), la::view(a), 0.0, la::view(c)}); });
    expect_fp64([&] {
      modelled(*trn, la::Trsm<double>{la::Side::left, la::Uplo::lower, Trans::no, la::Diag::unit, 1.0, la::view(a), la::view(c)});
    });
    expect_fp64([&] { modelled(*trn, la::SpmmCsr<double>{Trans::no, 1.0, la::csr_from_dense(a), la::view(a), 0.0, la::view(c)}); });
    expect_fp64([&] { modelled(*trn, la::Eigh<double>{la::view(a), w.data()}); });
    EXPECT_THROW(modelled(*trn, la::Eigh<float>{la::view(af), wf.data()}), dfmp2::UnsupportedError);
  }
}

TEST(NeuronResources, OperandsBeyondHbmAreAResourceError) {
  // 0.001 GiB holds one 512 x 512 fp32 matrix (1 MiB) but not two.
  auto trn = make_backend("trn1", DeviceOptions{.overrides = {{"trn1", {{"hbm_gib", 0.001}}}}, .compile_cache = {}});
  const MatrixF a = MatrixF::Ones(512, 512);
  MatrixF c(512, 512);
  try {
    modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)});
    FAIL() << "no ResourceError";
  } catch (const dfmp2::ResourceError& e) {
    const std::string msg = e.what();
    for (const char* part : {"trn1", "gemm", "operand B", "512 x 512", "HBM", "0.001 GiB"})
      EXPECT_NE(msg.find(part), std::string::npos) << part << " missing from: " << msg;
  }
  // The same call fits the real 16 GiB.
  auto full = make_backend("trn1");
  EXPECT_NO_THROW(modelled(*full, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)}));
  // Working tiles larger than SBUF (by an override) are refused too.
  auto tiny = make_backend("trn1", DeviceOptions{.overrides = {{"trn1", {{"sbuf_partition_kib", 1}}}}, .compile_cache = {}});
  EXPECT_THROW(modelled(*tiny, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)}),
               dfmp2::ResourceError);
}

// ---- Compile cache, queue, parameters ------------------------------------------------------------------------

TEST(NeuronCompileCache, ColdThenDiskThenResident) {
  TempDir dir;
  const DeviceOptions options{.overrides = {}, .compile_cache = (dir.path / "nested" / "cache").string()};
  const MatrixF a = MatrixF::Ones(256, 256);
  MatrixF c(256, 256);
  auto first = make_backend("trn1", options);
  EXPECT_TRUE(std::filesystem::is_directory(options.compile_cache)) << "folder created";
  auto t = modelled(*first, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)});
  EXPECT_EQ(t.compiles, 1);
  EXPECT_EQ(t.cache_loads, 0);
  EXPECT_GT(t.compile, 0.4);
  EXPECT_FALSE(std::filesystem::is_empty(options.compile_cache));

  auto second = make_backend("trn1", options);  // a new session with the same cache folder
  t = modelled(*second, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)});
  EXPECT_EQ(t.compiles, 0);
  EXPECT_EQ(t.cache_loads, 1);
  EXPECT_NEAR(t.compile, 0.024, 1e-9);

  t = modelled(*second, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)});
  EXPECT_EQ(t.compiles, 0);
  EXPECT_EQ(t.cache_loads, 0);
  EXPECT_EQ(t.compile, 0.0);

  // bf16 is another signature.
  t = modelled(*second, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)},
               la::MatmulMode::bf16);
  EXPECT_EQ(t.compiles, 1);

  // Without a disk cache every session starts cold.
  auto nocache = make_backend("trn1");
  t = modelled(*nocache, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)});
  EXPECT_EQ(t.compiles, 1);
}

// The compile model's structure: a fixed cost, a cost per instruction scheduled up to compile_unrolled_max, and a
// smaller one beyond (loops kept rolled), continuous at the knee; a kernel's compile grows with its tiles (a GEMM of
// twice the order: 8x the matmuls, 4x the loads and evacuations).
TEST(NeuronCompile, CostIsFixedPlusPerInstructionWithRolledLoopsBeyondTheKnee) {
  const auto p = neuron::load_neuron_params("trn1");
  const long knee = long(p.compile_unrolled_max);
  EXPECT_DOUBLE_EQ(neuron::compile_seconds(p, 0), p.compile_base_s);
  EXPECT_NEAR(neuron::compile_seconds(p, knee / 2) - neuron::compile_seconds(p, knee / 4),
              double(knee / 4) * p.compile_ms_per_instruction * 1e-3, 1e-9);
  EXPECT_NEAR(neuron::compile_seconds(p, knee), p.compile_base_s + knee * p.compile_ms_per_instruction * 1e-3, 1e-9);
  EXPECT_NEAR(neuron::compile_seconds(p, knee + 10000) - neuron::compile_seconds(p, knee),
              10000 * p.compile_ms_per_rolled_instruction * 1e-3, 1e-9);
  EXPECT_LT(p.compile_ms_per_rolled_instruction, p.compile_ms_per_instruction);
  auto compile_of = [](la::Index n) {
    auto trn = make_backend("trn1", DeviceOptions{.overrides = {}, .compile_cache = {}});
    const MatrixF a = MatrixF::Ones(n, n);
    MatrixF c(n, n);
    return modelled(*trn, la::Gemm<float>{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)})
        .compile;
  };
  const double small = compile_of(256) - p.compile_base_s, large = compile_of(512) - p.compile_base_s;
  EXPECT_GT(large / small, 2.0);  // below the knee: with the tiles
  EXPECT_LE(large / small, 8.0);
}

TEST(NeuronCompileCache, UnwritableFolderIsAnOutputError) {
  TempDir dir;
  std::filesystem::create_directories(dir.path);
  const auto file = dir.path / "not-a-folder";
  std::ofstream(file) << "x";
  EXPECT_THROW(make_backend("trn1", DeviceOptions{.overrides = {}, .compile_cache = file.string()}),
               dfmp2::OutputError);
}

// Kernel files planted in the cache folder as an attacker would: a link to a file of the user's (never written
// through), a FIFO (never waited on), a file longer than any signature (a miss, never read whole). Each is a miss,
// replaced by the compile's own file; a folder other users can write to is refused.
TEST(NeuronCompileCache, HostileKernelFilesAreMissesAndNeverFollowed) {
  TempDir dir;
  const auto folder = dir.path / "cache";
  const DeviceOptions options{.overrides = {}, .compile_cache = folder.string()};
  const MatrixF a = MatrixF::Ones(128, 128);
  MatrixF c(128, 128);
  const la::Gemm<float> gemm{Trans::no, Trans::no, 1.0f, la::view(a), la::view(a), 0.0f, la::view(c)};
  {  // learn the kernel file's name: the one file a cold run writes
    auto cold = make_backend("trn1", options);
    modelled(*cold, gemm);
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  const auto kernel = files[0];
  std::ofstream(dir.path / "users-file") << "precious\n";
  const auto plant = [&](const std::string& what) {
    std::filesystem::remove(kernel);
    if (what == "link") std::filesystem::create_symlink(dir.path / "users-file", kernel);
    if (what == "fifo") ASSERT_EQ(::mkfifo(kernel.c_str(), 0600), 0);
    if (what == "long") {
      std::ofstream(kernel) << "x";
      std::filesystem::resize_file(kernel, std::uintmax_t(1) << 30);
    }
  };
  for (const std::string what : {"link", "fifo", "long"}) {
    plant(what);
    const auto start = std::chrono::steady_clock::now();
    auto session = make_backend("trn1", options);
    const auto t = modelled(*session, gemm);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0) << what;
    EXPECT_EQ(t.compiles, 1) << what;
    EXPECT_EQ(t.cache_loads, 0) << what;
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(kernel))) << what;
    auto warm = make_backend("trn1", options);  // the file the compile wrote is a valid one
    EXPECT_EQ(modelled(*warm, gemm).cache_loads, 1) << what;
  }
  std::ifstream in(dir.path / "users-file");
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "precious");

  const auto open = dir.path / "open";
  std::filesystem::create_directory(open);
  std::filesystem::permissions(open, std::filesystem::perms::all);
  try {
    make_backend("trn1", DeviceOptions{.overrides = {}, .compile_cache = open.string()});
    ADD_FAILURE() << "a folder other users can write was taken";
  } catch (const dfmp2::OutputError& e) {
    EXPECT_NE(std::string(e.what()).find("writable by other users"), std::string::npos) << e.what();
  }
}

double batched_total(double depth) {
  auto trn = make_backend("trn1", DeviceOptions{.overrides = {{"trn1", {{"queue_depth", depth}}}}, .compile_cache = {}});
  std::mt19937_64 rng(3);
  const Index count = 16, m = 256, n = 512, k = 256;
  const MatrixF a = random_f(m, k * count, rng), b = random_f(k, n * count, rng);
  MatrixF c(m, n * count);
  la::ModelledTime t;
  for (int call = 0; call < 2; ++call)  // the second call is warm
    t = modelled(*trn, la::GemmBatched<float>{Trans::no, Trans::no, count, {m * k, k * n, m * n}, 1.0f, {a.data(), m, k, m},
                      {b.data(), k, n, k}, 0.0f, {c.data(), m, n, m}});
  EXPECT_EQ(t.launches, count);
  EXPECT_EQ(t.compile, 0.0);
  return t.total;
}

TEST(NeuronQueue, DeeperQueueOverlapsHostWork) {
  // Depth 1: the host dispatches a launch only after the previous one finished. Deeper: the next dispatch overlaps
  // the queued launch's transfers and device work.
  const double serial = batched_total(1), two = batched_total(2), queued = batched_total(4);
  EXPECT_GT(serial - two, 2e-4) << "depth 1 " << serial << " s, depth 2 " << two << " s";
  EXPECT_GE(two, queued) << "depth 2 " << two << " s, depth 4 " << queued << " s";
}

TEST(NeuronComposite, TrsmIsOneUpdateLaunchPerPanelWithItsOwnShape) {
  // The published library's blocked TRSM: n/128 - 1 trailing-update GEMMs, each a new shape (compiled when cold).
  auto trn = make_backend("trn1", DeviceOptions{.overrides = {}, .compile_cache = {}});
  std::mt19937_64 rng(5);
  const MatrixF a = triangle_operand(1024, rng);
  MatrixF b = random_f(1024, 256, rng);
  const la::Trsm<float> solve{la::Side::left, la::Uplo::lower, Trans::no, la::Diag::non_unit, 1.0f, la::view(a),
                              la::view(b)};
  la::ModelledTime t = modelled(*trn, solve);
  EXPECT_EQ(t.launches, 7);
  EXPECT_EQ(t.compiles, 7);
  EXPECT_GT(t.host, 0) << "panel solves and subtractions on the host";
  EXPECT_EQ(modelled(*trn, solve).compiles, 0);
  // The Cholesky runs on the host: no launch at all.
  MatrixF spd = MatrixF::Identity(300, 300) * 2.0f;
  t = modelled(*trn, la::Cholesky<float>{la::Uplo::lower, la::view(spd)});
  EXPECT_EQ(t.launches, 0);
  EXPECT_GT(t.host, 0);
}

TEST(NeuronParams, OverridesAndUnknownNames) {
  const auto names = neuron::neuron_parameter_names();
  for (const char* n : {"pe_clock_ghz", "hbm_gib", "queue_depth", "dispatch_ms", "compile_base_s"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(neuron::load_neuron_params("trn1").hbm_gib, 16);
  EXPECT_EQ(neuron::load_neuron_params("trn2").hbm_gib, 12);
  EXPECT_EQ(neuron::load_neuron_params("trn1", {.overrides = {{"trn1", {{"dispatch_ms", 2.0}}}}, .compile_cache = {}})
                .dispatch_ms,
            2.0);
  try {
    make_backend("trn1", DeviceOptions{.overrides = {{"trn1", {{"hbm_size", 1.0}}}}, .compile_cache = {}});
    FAIL() << "unknown parameter accepted";
  } catch (const dfmp2::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hbm_size"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hbm_gib"), std::string::npos) << "known names listed: " << msg;
  }
  EXPECT_THROW(make_backend("trn1", DeviceOptions{.overrides = {{"trn1", {{"queue_depth", 0}}}}, .compile_cache = {}}),
               dfmp2::InputError);
}

TEST(NeuronRegistry, BuiltAfterTheCpuBackends) {
  const auto built = dfmp2::devices::built_backends();
  ASSERT_GE(built.size(), 4u);
  EXPECT_EQ(built[0], "eigen");
  EXPECT_EQ(built[1], "openblas");
  // Then the packed backends the CPU runs: avx2 (AVX2 and FMA), avx512 (AVX-512F).
  std::size_t first_device = 2;
  for (const char* packed : {"avx2", "avx512"})
    if (first_device < built.size() && built[first_device] == packed) ++first_device;
  ASSERT_EQ(built.size(), first_device + 2);
  EXPECT_EQ(built[first_device], "trn1");
  EXPECT_EQ(built[first_device + 1], "trn2");
  for (const std::string device : {"trn1", "trn2"}) {
    auto b = make_backend(device);
    EXPECT_EQ(b->name(), device);
    EXPECT_NE(b->details().find("model of NeuronCore"), std::string::npos) << b->details();
    EXPECT_TRUE(b->supports_matmul_mode(la::MatmulMode::bf16x3));
  }
  // A CPU backend's calls carry no modelled time.
  Matrix a = Matrix::Identity(2, 2), c(2, 2);
  EXPECT_FALSE(make_backend("eigen")
                   ->run(la::Gemm<double>{Trans::no, Trans::no, 1.0, la::view(std::as_const(a)),
                                          la::view(std::as_const(a)), 0.0, la::view(c)})
                   .modelled.has_value());
}

}  // namespace

// ---- The device-native pipeline -----------------------------------------------------------------------------

namespace {
std::vector<la::MatmulMode> all(la::MatmulMode m) { return {la::MatmulMode::fp32, m, la::MatmulMode::fp32, m}; }
}  // namespace

// Each step's time is its busiest engine or link plus the serial host work and launches; the parts follow the
// shape's work (flops, bytes), and the bottleneck named is the largest part.
TEST(NeuronNative, StepsAreTheirBusiestPartPlusSerialWork) {
  const auto p = neuron::load_neuron_params("trn1");
  const neuron::Mp2Shape medium{.nbf = 512, .nocc = 64, .nvir = 448, .naux = 1536};
  const auto native = neuron::native_dfmp2(p, medium, all(la::MatmulMode::fp32));
  ASSERT_EQ(native.steps.size(), 4u);
  EXPECT_EQ(native.steps[0].step, "metric");
  EXPECT_EQ(native.steps[3].step, "pair_energy");
  EXPECT_TRUE(native.resident);
  double total = 0;
  for (const auto& s : native.steps) {
    const double concurrent = std::max({s.tensor, s.vector, s.dma, s.hbm, s.link});
    EXPECT_NEAR(s.seconds, concurrent + s.host + s.launch, 1e-15) << s.step;
    const double largest = std::max({concurrent, s.host, s.launch});
    const double named = s.bottleneck == "Tensor Engine" ? s.tensor : s.bottleneck == "Vector Engine" ? s.vector
                       : s.bottleneck == "DMA queues"    ? s.dma    : s.bottleneck == "HBM"           ? s.hbm
                       : s.bottleneck == "host link"     ? s.link   : s.bottleneck == "host"          ? s.host
                                                                                                      : s.launch;
    EXPECT_EQ(named, largest) << s.step << ": " << s.bottleneck;
    EXPECT_LE(s.peak_share, 1.0);
    EXPECT_NEAR(s.tensor, s.flops / p.peak_flops(s.mode), 1e-15);
    total += s.seconds;
  }
  EXPECT_NEAR(native.seconds(), total, 1e-12);
  // The flops of each product, and where the medium shape's time goes: the AO integrals over the host link, the
  // metric on the host, the pair energies on the Tensor Engine at fp32's quarter rate.
  const double o = 64, v = 448, q = 1536, n = 512;
  EXPECT_DOUBLE_EQ(native.steps[1].flops, 2 * q * n * n * o + 2 * q * n * o * v);
  EXPECT_DOUBLE_EQ(native.steps[2].flops, q * q * o * v);
  EXPECT_DOUBLE_EQ(native.steps[3].flops, 2 * q * v * v * o * (o + 1) / 2);
  EXPECT_EQ(native.steps[0].bottleneck, "host");
  EXPECT_EQ(native.steps[1].bottleneck, "host link");
  EXPECT_NEAR(native.steps[1].link, q * n * n * 4 / (p.h2d_large_gbps * 1e9), 0.05 * native.steps[1].link);
  EXPECT_EQ(native.steps[3].bottleneck, "Tensor Engine");
  // The figures README "Two predictions" quotes for this shape (0.43 s; fitting and pair energies at 81 % and 99 %
  // of the fp32 peak; a bf16 run's pair energies Vector-bound at 47 % of the bf16 peak).
  EXPECT_NEAR(native.seconds(), 0.43, 0.005);
  EXPECT_NEAR(native.steps[2].peak_share, 0.81, 0.005);
  EXPECT_NEAR(native.steps[3].peak_share, 0.99, 0.005);
  const auto bf16 = neuron::native_dfmp2(
      p, medium, {la::MatmulMode::fp32, la::MatmulMode::bf16x3, la::MatmulMode::fp32, la::MatmulMode::bf16});
  EXPECT_EQ(bf16.steps[3].bottleneck, "Vector Engine");
  EXPECT_NEAR(bf16.steps[3].peak_share, 0.47, 0.005);
}

// Cheaper operand formats: the pair energies' Tensor Engine time falls 4x in bf16 and is 3 bf16 passes in bf16x3,
// while the on-chip casts add Vector work; an MO-form input only crosses the link.
TEST(NeuronNative, OperandFormatsAndMoInput) {
  const auto p = neuron::load_neuron_params("trn1");
  const neuron::Mp2Shape shape{.nbf = 384, .nocc = 80, .nvir = 304, .naux = 1344};
  const auto fp32 = neuron::native_dfmp2(p, shape, all(la::MatmulMode::fp32)).steps[3];
  const auto bf16 = neuron::native_dfmp2(p, shape, all(la::MatmulMode::bf16)).steps[3];
  const auto bf16x3 = neuron::native_dfmp2(p, shape, all(la::MatmulMode::bf16x3)).steps[3];
  EXPECT_NEAR(fp32.tensor / bf16.tensor, p.fp32_cost_factor, 1e-12);
  EXPECT_NEAR(bf16x3.tensor / bf16.tensor, 3.0, 1e-12);
  EXPECT_GT(bf16.vector, fp32.vector);
  EXPECT_GT(bf16x3.vector, bf16.vector);
  const auto mo = neuron::native_dfmp2(p, {.nbf = 0, .nocc = 80, .nvir = 304, .naux = 1344}, all(la::MatmulMode::fp32));
  EXPECT_EQ(mo.steps[1].flops, 0.0);
  EXPECT_EQ(mo.steps[1].bottleneck, "host link");
}

// Beyond HBM: B streams through the host link, one launch per occupied block pair.
TEST(NeuronNative, BeyondHbmStreamsThroughTheHostLink) {
  const auto p = neuron::load_neuron_params("trn1");
  const neuron::Mp2Shape big{.nbf = 0, .nocc = 400, .nvir = 3000, .naux = 6000};  // B 28.8 GB
  const auto native = neuron::native_dfmp2(p, big, all(la::MatmulMode::fp32));
  EXPECT_FALSE(native.resident);
  EXPECT_GT(native.resident_bytes, p.hbm_bytes());
  EXPECT_GT(native.steps[3].launches, 1);
  EXPECT_GT(native.steps[3].link, 0.0);
  EXPECT_EQ(neuron::native_dfmp2(p, {.nbf = 0, .nocc = 40, .nvir = 300, .naux = 600}, all(la::MatmulMode::fp32))
                .steps[3].link, 0.0);
}
