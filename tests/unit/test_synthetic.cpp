// Synthetic DF-MP2 problems: named shapes, determinism (seeds, thread counts, block cuts), the structure of each
// quantity, and DF-MP2 on them (thread counts, backends, a naive reference).
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <cmath>
#include <cstring>
#include <vector>

#include "chem/mp2/dfmp2.hpp"
#include "chem/mp2/synthetic.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernel_log.hpp"

namespace {

using dfmp2::chem::SyntheticProblem;
using dfmp2::chem::SyntheticShape;
using dfmp2::chem::SyntheticThreeIndex;
using dfmp2::linalg::Index;
using dfmp2::linalg::Matrix;

const SyntheticShape kTiny{40, 6, 100, 7};

// RAII: run a scope with a given OpenMP thread count.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

std::vector<double> all_blocks(const dfmp2::chem::ThreeIndexSource& s) {
  std::vector<double> out(static_cast<std::size_t>(s.naux() * s.block_stride()));
  s.read_block(0, s.naux(), out.data());
  return out;
}

bool same_bits(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

TEST(Synthetic, NamedShapes) {
  using dfmp2::chem::named_synthetic_shape;
  const auto small = named_synthetic_shape("small"), medium = named_synthetic_shape("medium"),
             large = named_synthetic_shape("large");
  ASSERT_TRUE(small && medium && large);
  EXPECT_EQ(std::tuple(small->nbasis, small->nocc, small->naux), std::tuple(128, 16, 384));
  EXPECT_EQ(std::tuple(medium->nbasis, medium->nocc, medium->naux), std::tuple(512, 64, 1536));
  EXPECT_EQ(std::tuple(large->nbasis, large->nocc, large->naux), std::tuple(768, 96, 2304));
  EXPECT_EQ(large->nvir(), 672);
  EXPECT_EQ(small->seed, dfmp2::chem::kDefaultSyntheticSeed);
  EXPECT_FALSE(named_synthetic_shape("huge"));
  EXPECT_FALSE(named_synthetic_shape("Small"));
  EXPECT_EQ(dfmp2::chem::synthetic_shape_names(), (std::vector<std::string>{"small", "medium", "large"}));
}

TEST(Synthetic, RejectsBadShapes) {
  EXPECT_THROW(SyntheticProblem({40, 0, 100, 1}), dfmp2::InputError);
  EXPECT_THROW(SyntheticProblem({40, 40, 100, 1}), dfmp2::InputError);
  EXPECT_THROW(SyntheticProblem({1, 1, 100, 1}), dfmp2::InputError);
  EXPECT_THROW(SyntheticProblem({40, 6, 0, 1}), dfmp2::InputError);
  const SyntheticThreeIndex t({10, 2, 20, 1});
  std::vector<double> out(100 * 2);
  EXPECT_THROW(t.read_block(19, 2, out.data()), std::out_of_range);
}

TEST(Synthetic, SameSeedSameBitsOtherSeedDiffers) {
  const SyntheticProblem a(kTiny), b(kTiny);
  EXPECT_TRUE(same_bits(a.mo_coefficients(), b.mo_coefficients()));
  EXPECT_TRUE(same_bits(Matrix(a.orbital_energies()), Matrix(b.orbital_energies())));
  EXPECT_TRUE(same_bits(a.metric(), b.metric()));
  EXPECT_TRUE(same_bits(all_blocks(a.three_index()), all_blocks(b.three_index())));

  SyntheticShape other = kTiny;
  other.seed = 8;
  const SyntheticProblem c(other);
  EXPECT_GT((a.mo_coefficients() - c.mo_coefficients()).cwiseAbs().minCoeff(), 0.0);
  EXPECT_GT((a.orbital_energies() - c.orbital_energies()).cwiseAbs().maxCoeff(), 0.0);
  EXPECT_GT((a.metric() - c.metric()).cwiseAbs().maxCoeff(), 0.0);
  const auto ta = all_blocks(a.three_index()), tc = all_blocks(c.three_index());
  std::size_t same = 0;
  for (std::size_t i = 0; i < ta.size(); ++i) same += ta[i] == tc[i];
  EXPECT_EQ(same, 0u);
}

TEST(Synthetic, IndependentOfThreadCountAndBlocking) {
  std::vector<double> ref_blocks;
  Matrix ref_c, ref_metric;
  for (int threads : {1, 2, 3}) {
    OmpThreads scope(threads);
    const SyntheticProblem p(kTiny);
    const auto blocks = all_blocks(p.three_index());
    if (threads == 1) {
      ref_blocks = blocks;
      ref_c = p.mo_coefficients();
      ref_metric = p.metric();
      continue;
    }
    EXPECT_TRUE(same_bits(blocks, ref_blocks)) << threads << " threads";
    EXPECT_TRUE(same_bits(p.mo_coefficients(), ref_c)) << threads << " threads";
    EXPECT_TRUE(same_bits(p.metric(), ref_metric)) << threads << " threads";
  }
  // Any cut of the auxiliary range reads the same numbers.
  const SyntheticThreeIndex src(kTiny);
  const Index stride = src.block_stride();
  for (Index cut : {Index{1}, Index{37}, Index{99}}) {
    std::vector<double> parts(ref_blocks.size());
    src.read_block(0, cut, parts.data());
    src.read_block(cut, kTiny.naux - cut, parts.data() + cut * stride);
    EXPECT_TRUE(same_bits(parts, ref_blocks)) << "cut at " << cut;
  }
}

TEST(Synthetic, ThreeIndexIsSymmetricAndMatchesElements) {
  const SyntheticThreeIndex src(kTiny);
  const auto t = all_blocks(src);
  const Index n = kTiny.nbasis, stride = src.block_stride();
  EXPECT_EQ(stride, n * n);
  EXPECT_EQ(src.form(), dfmp2::chem::ThreeIndexForm::ao);
  double sum = 0, sum2 = 0;
  for (Index p = 0; p < kTiny.naux; ++p)
    for (Index m = 0; m < n; ++m)
      for (Index k = 0; k < n; ++k) {
        const double v = t[std::size_t(k + n * m + stride * p)];
        ASSERT_EQ(v, t[std::size_t(m + n * k + stride * p)]) << p << " " << m << " " << k;
        sum += v;
        sum2 += v * v;
      }
  for (auto [p, m, k] : {std::tuple<Index, Index, Index>{0, 0, 0}, {3, 5, 2}, {3, 2, 5}, {99, 39, 39}, {50, 0, 39}})
    EXPECT_EQ(src.value(p, m, k), t[std::size_t(k + n * m + stride * p)]);
  // Elements have mean 0 and variance v = 1 / (nvir sqrt(8 nocc naux)).
  const double count = double(kTiny.naux * n * n), v = 1.0 / (34.0 * std::sqrt(8.0 * 6 * 100));
  EXPECT_DOUBLE_EQ(src.variance(), v);
  EXPECT_NEAR(sum / count, 0.0, 0.02 * std::sqrt(v));
  EXPECT_NEAR(sum2 / count / v, 1.0, 0.02);
}

TEST(Synthetic, LargeShapeReadsBlocksWithoutTheWholeTensor) {
  const auto large = *dfmp2::chem::named_synthetic_shape("large");
  const SyntheticThreeIndex src(large);  // no storage: just the recipe
  const Index n = large.nbasis;
  std::vector<double> block(static_cast<std::size_t>(2 * n * n));
  src.read_block(large.naux - 2, 2, block.data());
  for (Index m = 0; m < n; m += 97)
    for (Index k = 0; k < n; k += 89) {
      EXPECT_EQ(block[std::size_t(k + n * m)], block[std::size_t(m + n * k)]);
      EXPECT_EQ(block[std::size_t(k + n * m + n * n)], src.value(large.naux - 1, m, k));
    }
}

TEST(Synthetic, OrbitalEnergiesCoefficientsAndMetric) {
  const SyntheticProblem p(kTiny);
  const auto& eps = p.orbital_energies();
  ASSERT_EQ(eps.size(), kTiny.nbasis);
  for (Index i = 0; i < kTiny.nocc; ++i) {
    EXPECT_GE(eps[i], -2.0);
    EXPECT_LE(eps[i], -0.2);
    if (i > 0) {
      EXPECT_LE(eps[i - 1], eps[i]);
    }
  }
  for (Index a = kTiny.nocc; a < kTiny.nbasis; ++a) {
    EXPECT_GE(eps[a], 0.1);
    EXPECT_LE(eps[a], 3.0);
    if (a > kTiny.nocc) {
      EXPECT_LE(eps[a - 1], eps[a]);
    }
  }

  const Matrix& c = p.mo_coefficients();
  ASSERT_EQ(c.rows(), kTiny.nbasis);
  ASSERT_EQ(c.cols(), kTiny.nbasis);
  EXPECT_NEAR(c.squaredNorm() / double(kTiny.nbasis), 1.0, 0.05);  // columns of unit norm on average

  const Matrix& j = p.metric();
  ASSERT_EQ(j.rows(), kTiny.naux);
  ASSERT_EQ(j.cols(), kTiny.naux);
  EXPECT_TRUE(j == j.transpose());  // exactly symmetric
  const Eigen::LLT<Matrix> llt(j);
  EXPECT_EQ(llt.info(), Eigen::Success);
  const Eigen::SelfAdjointEigenSolver<Matrix> es(j);
  EXPECT_GE(es.eigenvalues().minCoeff(), 1.0 - 1e-10);  // J = R R^T / naux + I
  EXPECT_LT(es.eigenvalues().maxCoeff(), 6.0);          // Marchenko-Pastur edge at 4 + 1
}

// A naive DF-MP2 energy: every (ia|jb) from an explicit J^-1.
double naive_correlation(const SyntheticProblem& p) {
  const Index nbf = p.nbasis(), nocc = p.nocc(), nvir = p.nvir(), naux = p.naux();
  const auto t = all_blocks(p.three_index());
  const Matrix& c = p.mo_coefficients();
  Matrix a(nocc * nvir, naux);
  for (Index q = 0; q < naux; ++q) {
    const Matrix m = Eigen::Map<const Matrix>(t.data() + q * nbf * nbf, nbf, nbf);
    const Matrix x = c.leftCols(nocc).transpose() * m * c.rightCols(nvir);
    for (Index i = 0; i < nocc; ++i)
      for (Index b = 0; b < nvir; ++b) a(b + nvir * i, q) = x(i, b);
  }
  const Matrix v = a * p.metric().ldlt().solve(a.transpose());
  const auto& e = p.orbital_energies();
  double os = 0, ss = 0;
  for (Index i = 0; i < nocc; ++i)
    for (Index j = 0; j < nocc; ++j)
      for (Index x = 0; x < nvir; ++x)
        for (Index y = 0; y < nvir; ++y) {
          const double iajb = v(x + nvir * i, y + nvir * j), ibja = v(y + nvir * i, x + nvir * j);
          const double d = e[i] + e[j] - e[nocc + x] - e[nocc + y];
          os += iajb * iajb / d;
          ss += iajb * (iajb - ibja) / d;
        }
  return os + ss;
}

dfmp2::chem::DfMp2Result run(const SyntheticProblem& p, const std::string& backend_name, int threads) {
  OmpThreads scope(threads);
  auto backend = dfmp2::devices::make_backend(backend_name);
  backend->set_threads(threads);
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  const dfmp2::chem::DfMp2Input input = p.dfmp2_input();
  dfmp2::chem::DfMp2Options options;
  const auto plan = dfmp2::chem::plan_for(input, options, *backend, 64.0 * (1 << 20));
  return dfmp2::chem::run_dfmp2(input, plan, options, kernels);
}

TEST(Synthetic, DfMp2SameEnergyOnThreadsAndBackends) {
  const SyntheticProblem p(kTiny);
  const double ref = run(p, "openblas", 1).correlation();
  EXPECT_LT(ref, 0.0);
  EXPECT_GT(ref, -1.0);  // a molecule's order of magnitude (-0.234 Eh), as the scale of (P|mn) intends
  EXPECT_TRUE(std::isfinite(ref));
  for (const auto& [backend, threads] : {std::pair<std::string, int>{"openblas", 2}, {"eigen", 1}, {"eigen", 2}}) {
    const auto r = run(p, backend, threads);
    EXPECT_NEAR(r.correlation(), ref, 1e-12 * std::abs(ref)) << backend << ", " << threads << " threads";
    EXPECT_LT(r.opposite_spin, 0.0);
    EXPECT_LT(r.same_spin, 0.0);
  }
  EXPECT_NEAR(naive_correlation(p), ref, 1e-10 * std::abs(ref));
}

TEST(Synthetic, DfMp2OnTheSmallShape) {
  const SyntheticProblem p(*dfmp2::chem::named_synthetic_shape("small"));
  const auto r = run(p, "openblas", 2);
  EXPECT_TRUE(std::isfinite(r.correlation()));
  EXPECT_LT(r.correlation(), 0.0);
  EXPECT_EQ(r.nvir, 112);
  EXPECT_EQ(r.naux, 384);
}

}  // namespace
