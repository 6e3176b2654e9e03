// DF-MP2 on the committed integral files against the energies Psi4 recorded in them (1e-9 Eh), on every
// backend, with ample and with tight memory (many blocks). The Psi4 reference cases are decks (decks/).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/run.hpp"
#include "devices/registry.hpp"
#include "../support/test_support.hpp"

namespace {

constexpr double kTolerance = 1e-9;  // Eh

struct Fixture {
  std::string file;
  int nfrozen;
  double memory_bytes;  // for DF-MP2's blocks, beside the library allowance and the file's orbitals and metric
  dfmp2::chem::Mp2Storage storage = dfmp2::chem::Mp2Storage::automatic;
};

dfmp2::app::Calculation run(const Fixture& f, const std::vector<std::string>& backends,
                            dfmp2::chem::MetricMethod metric = dfmp2::chem::MetricMethod::cholesky,
                            std::vector<dfmp2::chem::Precision> precisions = {dfmp2::chem::Precision::fp64}) {
  dfmp2::app::Input in;
  in.metric = metric;
  in.precisions = precisions;
  in.path = "(test)";
  in.integrals = std::string(DFMP2_SOURCE_DIR) + "/inputs/" + f.file;
  in.frozen_core = {dfmp2::app::FrozenCore::Kind::count, f.nfrozen};
  in.backends = backends;
  // `memory` bounds the whole process: the fixture's budget comes on top of what is resident now.
  // The file's C (nbf x nmo), orbital energies and metric stay in memory throughout: water 24 / 24 / 84, methane
  // 34 / 34 / 112.
  const double held = f.file.rfind("water", 0) == 0 ? 8.0 * (24 * 24 + 24 + 84 * 84) : 8.0 * (34 * 34 + 34 + 112 * 112);
  in.memory_bytes = dfmp2::app::memory_allowance(2) + held + f.memory_bytes;
  in.mp2_storage = f.storage;
  in.threads = 2;
  dfmp2::linalg::SerialComm alone;
  return dfmp2::app::run_calculation(in, alone);
}

class FixtureEnergies : public ::testing::TestWithParam<Fixture> {};

TEST_P(FixtureEnergies, MatchPsi4OnEveryBackend) {
  const Fixture f = GetParam();
  const auto calc = run(f, dfmp2::testing::cpu_backends());
  const auto& refs = calc.reference.integral_file()->references();
  ASSERT_TRUE(refs.count(f.nfrozen)) << "no Psi4 reference for " << f.nfrozen << " frozen orbitals in " << f.file;
  const auto& ref = refs.at(f.nfrozen);
  ASSERT_EQ(calc.runs.size(), dfmp2::testing::cpu_backends().size());
  for (const auto& r : calc.runs) {
    SCOPED_TRACE(r.backend);
    EXPECT_NEAR(r.result.opposite_spin, ref.opposite_spin, kTolerance);
    EXPECT_NEAR(r.result.same_spin, ref.same_spin, kTolerance);
    EXPECT_NEAR(r.result.correlation(), ref.correlation, kTolerance);
    ASSERT_TRUE(ref.total && calc.reference.integral_file()->scf_energy());
    EXPECT_NEAR(*calc.reference.integral_file()->scf_energy() + r.result.correlation(), *ref.total, kTolerance);
  }
}

// A few hundred KB force one auxiliary function per transformation block and one or two occupied orbitals per pair block.
INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureEnergies,
                         ::testing::Values(Fixture{"water-cc-pvdz.h5", 0, 1e9}, Fixture{"water-cc-pvdz.h5", 1, 1e9},
                                           Fixture{"methane-cc-pvdz.h5", 0, 1e9},
                                           Fixture{"methane-cc-pvdz.h5", 1, 1e9},
                                           Fixture{"water-cc-pvdz.h5", 0, 135e3},
                                           Fixture{"methane-cc-pvdz.h5", 1, 240e3},
                                           // Out of core: the fitted tensor on scratch, read block by block.
                                           Fixture{"water-cc-pvdz.h5", 0, 1e9, dfmp2::chem::Mp2Storage::scratch},
                                           Fixture{"methane-cc-pvdz.h5", 1, 200e3, dfmp2::chem::Mp2Storage::scratch}),
                         [](const auto& info) {
                           std::string name = info.param.file.substr(0, info.param.file.find('-'));
                           return name + "_frozen" + std::to_string(info.param.nfrozen) +
                                  (info.param.memory_bytes < 1e6 ? "_tight_memory" : "") +
                                  (info.param.storage == dfmp2::chem::Mp2Storage::scratch ? "_scratch" : "");
                         });

TEST(FixtureEnergies, TightMemoryReallyUsesManyBlocks) {
  const auto calc = run({"water-cc-pvdz.h5", 0, 135e3}, {"openblas"});
  EXPECT_LT(calc.runs[0].result.plan.aux_block, 84);
  EXPECT_GT(calc.runs[0].result.block_pairs, 1);
}

// The fixtures against the independent Psi4 references are validation decks now (tests/validation/decks/fixture_*),
// run from the repository's copy of shared/reference/psi4_refs.json. The copy must not drift from the original.
TEST(ReferenceCopy, MatchesShared) {
  std::ifstream shared(DFMP2_SHARED_REFERENCE), copy(DFMP2_REFERENCE_COPY);
  ASSERT_TRUE(copy) << "the repository's reference copy is missing: " << DFMP2_REFERENCE_COPY;
  if (!shared) GTEST_SKIP() << "shared reference file not found (the copy is used alone): " << DFMP2_SHARED_REFERENCE;
  EXPECT_EQ(nlohmann::json::parse(shared), nlohmann::json::parse(copy))
      << "tests/validation/reference/psi4_refs.json differs from shared/reference/psi4_refs.json: copy it again and "
         "rerun tests/validation/make_decks.py";
}

}  // namespace

namespace {

// The three ways of applying the metric agree on the fixtures: eigh within 1e-9 Eh of cholesky, Newton-Schulz
// within 1e-8 Eh at its default tolerance, on every backend.
class MetricMethods : public ::testing::TestWithParam<Fixture> {};

TEST_P(MetricMethods, AgreeWithCholesky) {
  using dfmp2::chem::MetricMethod;
  const Fixture f = GetParam();
  const auto backends = dfmp2::testing::cpu_backends();
  const auto chol = run(f, backends, MetricMethod::cholesky);
  const auto eigh = run(f, backends, MetricMethod::eigh);
  const auto ns = run(f, backends, MetricMethod::newton_schulz);
  for (std::size_t b = 0; b < backends.size(); ++b) {
    SCOPED_TRACE(backends[b]);
    const double reference = chol.runs[b].result.correlation();
    EXPECT_NEAR(eigh.runs[b].result.correlation(), reference, 1e-9);
    EXPECT_NEAR(eigh.runs[b].result.opposite_spin, chol.runs[b].result.opposite_spin, 1e-9);
    EXPECT_EQ(eigh.runs[b].result.metric_report.dropped, 0);
    EXPECT_NEAR(ns.runs[b].result.correlation(), reference, 1e-8);
    EXPECT_GT(ns.runs[b].result.metric_report.iterations, 1);
    EXPECT_LT(ns.runs[b].result.metric_report.residual, 1e-10);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MetricMethods,
                         ::testing::Values(Fixture{"water-cc-pvdz.h5", 0, 1e9}, Fixture{"methane-cc-pvdz.h5", 1, 1e9}),
                         [](const auto& info) {
                           return info.param.file.substr(0, info.param.file.find('-')) + "_frozen" +
                                  std::to_string(info.param.nfrozen);
                         });

// fp32 and mixed differ from fp64 as their arithmetic does: by far less than chemical accuracy, but by more than
// fp64 rounding (so a run that silently stayed in fp64 would fail too).
TEST(Precisions, Fp32AndMixedErrorsOnFixtures) {
  using dfmp2::chem::Precision;
  for (const auto& f : {Fixture{"water-cc-pvdz.h5", 0, 1e9}, Fixture{"methane-cc-pvdz.h5", 1, 1e9}}) {
    for (const auto metric : {dfmp2::chem::MetricMethod::cholesky, dfmp2::chem::MetricMethod::eigh}) {
      SCOPED_TRACE(f.file + " " + dfmp2::chem::metric_name(metric));
      const auto calc = run(f, {"openblas", "eigen"}, metric, {Precision::fp64, Precision::fp32, Precision::mixed});
      ASSERT_EQ(calc.runs.size(), 6u);
      for (std::size_t b = 0; b < 2; ++b) {
        const double fp64 = calc.runs[3 * b].result.correlation();
        const double fp32 = calc.runs[3 * b + 1].result.correlation();
        const double mixed = calc.runs[3 * b + 2].result.correlation();
        EXPECT_EQ(calc.runs[3 * b + 1].precision, Precision::fp32);
        EXPECT_LT(std::abs(fp32 - fp64), 1e-5);
        EXPECT_LT(std::abs(mixed - fp64), 1e-6);
        EXPECT_GT(std::abs(fp32 - fp64), 1e-12);
        EXPECT_GT(std::abs(mixed - fp64), 1e-12);
      }
      // The fp32 kernels really ran in fp32.
      bool saw_fp32_gemm = false;
      for (const auto& k : calc.runs[1].log.records()) saw_fp32_gemm |= (k.kernel == "syrk" && k.dtype == "fp32");
      EXPECT_TRUE(saw_fp32_gemm);
    }
  }
}

}  // namespace

namespace {

// Screening at a tight threshold drops only negligible tiles: the energy stays within 1e-10 Eh of the unscreened
// one. At a loose threshold it skips more tiles and the energy moves, and it moves less as the threshold tightens.
TEST(Screening, TightThresholdKeepsTheEnergyLooseOneSkipsTiles) {
  for (const std::string& backend : dfmp2::testing::cpu_backends()) {
    SCOPED_TRACE(backend);
    dfmp2::app::Input in;
    in.path = "(test)";
    in.integrals = std::string(DFMP2_SOURCE_DIR) + "/inputs/methane-cc-pvdz.h5";
    in.frozen_core = {dfmp2::app::FrozenCore::Kind::count, 1};
    in.backends = {backend};
    in.threads = 2;
    in.screening.enabled = true;
    in.screening.block = 8;
    in.screening_compare = true;
    std::vector<double> change;
    std::vector<long long> kept;
    for (double threshold : {1e-12, 1e-3, 1e-2, 3e-2}) {
      in.screening.threshold = threshold;
      dfmp2::linalg::SerialComm alone;
      const auto calc = dfmp2::app::run_calculation(in, alone);
      const auto& r = calc.runs[0];
      ASSERT_TRUE(r.unscreened_correlation);
      EXPECT_NEAR(*r.unscreened_correlation, calc.reference.integral_file()->references().at(1).correlation, 1e-9);
      change.push_back(std::abs(r.result.correlation() - *r.unscreened_correlation));
      kept.push_back(r.result.screening.blocks_kept);
      EXPECT_EQ(r.result.screening.blocks_total, 2380);
      bool used_spmm = false;
      for (const auto& k : r.log.records()) used_spmm |= k.kernel == "spmm_bsr" && k.backend == backend;
      EXPECT_TRUE(used_spmm);
    }
    EXPECT_LT(change[0], 1e-10);
    EXPECT_GT(change[3], change[2]);
    EXPECT_GT(change[2], change[1]);
    EXPECT_GT(kept[0], kept[2]);
    EXPECT_GT(kept[2], kept[3]);
  }
}

}  // namespace
