// DF-MP2 against a naive implementation on random problems: explicit J^-1, every (ia|jb), every pair.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <omp.h>

#include <map>
#include <random>

#include "../support/test_support.hpp"
#include "chem/mp2/dfmp2.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::linalg::Index;
using dfmp2::linalg::Matrix;
using dfmp2::linalg::Vector;

// DF-MP2 blocked for `memory_bytes` on this process alone, as the program plans a run.
dfmp2::chem::DfMp2Result run_planned(const dfmp2::chem::DfMp2Input& in, const dfmp2::chem::DfMp2Options& options,
                                     dfmp2::linalg::Kernels& kernels, double memory_bytes = 2.0 * (1 << 30)) {
  const auto plan = dfmp2::chem::plan_for(in, options, kernels.backend(), memory_bytes);
  return dfmp2::chem::run_dfmp2(in, plan, options, kernels);
}

struct Problem {
  Index nbf = 14, nocc = 5, naux = 31;
  Matrix c, metric;
  Vector eps;
  std::vector<double> ao;  // (P|mn), row-major naux x nbf x nbf
};

Problem random_problem(unsigned seed) {
  Problem p;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  p.c = Matrix::NullaryExpr(p.nbf, p.nbf, [&] { return u(rng); });
  Matrix r = Matrix::NullaryExpr(p.naux, p.naux, [&] { return u(rng); });
  p.metric = r * r.transpose() + double(p.naux) * Matrix::Identity(p.naux, p.naux);
  p.eps.resize(p.nbf);
  for (Index i = 0; i < p.nbf; ++i) p.eps[i] = i < p.nocc ? -2.0 + 0.3 * double(i) : 0.4 + 0.2 * double(i);
  p.ao.resize(static_cast<std::size_t>(p.naux * p.nbf * p.nbf));
  for (Index q = 0; q < p.naux; ++q) {
    for (Index m = 0; m < p.nbf; ++m) {
      for (Index n = 0; n <= m; ++n) {
        const double v = u(rng);
        p.ao[static_cast<std::size_t>(n + p.nbf * (m + p.nbf * q))] = v;
        p.ao[static_cast<std::size_t>(m + p.nbf * (n + p.nbf * q))] = v;
      }
    }
  }
  return p;
}

// (ia|P) over all occupied i: rows a + nvir*i.
Matrix mo_3index(const Problem& p) {
  const Index nvir = p.nbf - p.nocc;
  Matrix a(p.nocc * nvir, p.naux);
  for (Index q = 0; q < p.naux; ++q) {
    const Matrix m = Eigen::Map<const Matrix>(p.ao.data() + q * p.nbf * p.nbf, p.nbf, p.nbf);
    const Matrix t = p.c.leftCols(p.nocc).transpose() * m * p.c.rightCols(nvir);  // nocc x nvir
    for (Index i = 0; i < p.nocc; ++i)
      for (Index x = 0; x < nvir; ++x) a(x + nvir * i, q) = t(i, x);
  }
  return a;
}

std::pair<double, double> naive_energy(const Problem& p, int nfrozen) {
  const Index nvir = p.nbf - p.nocc;
  const Matrix a = mo_3index(p);
  const Matrix v = a * p.metric.ldlt().solve(a.transpose());  // (ia|jb)
  double os = 0, ss = 0;
  for (Index i = nfrozen; i < p.nocc; ++i)
    for (Index j = nfrozen; j < p.nocc; ++j)
      for (Index x = 0; x < nvir; ++x)
        for (Index y = 0; y < nvir; ++y) {
          const double iajb = v(x + nvir * i, y + nvir * j), ibja = v(y + nvir * i, x + nvir * j);
          const double d = p.eps[i] + p.eps[j] - p.eps[p.nocc + x] - p.eps[p.nocc + y];
          os += iajb * iajb / d;
          ss += iajb * (iajb - ibja) / d;
        }
  return {os, ss};
}

struct Case {
  std::string backend;
  dfmp2::chem::ThreeIndexForm form;
  int nfrozen;
  double memory_bytes;  // small values force several auxiliary and occupied blocks
};

class DfMp2Random : public ::testing::TestWithParam<Case> {};

TEST_P(DfMp2Random, MatchesNaiveImplementation) {
  const Case c = GetParam();
  const Problem p = random_problem(7);
  const Index nvir = p.nbf - p.nocc;
  dfmp2::testing::MemorySource ao_source(dfmp2::chem::ThreeIndexForm::ao, p.naux, p.nbf * p.nbf);
  ao_source.data() = p.ao;
  dfmp2::testing::MemorySource mo_source(dfmp2::chem::ThreeIndexForm::mo, p.naux, p.nocc * nvir);
  const Matrix a = mo_3index(p);
  std::copy_n(a.data(), a.size(), mo_source.data().data());

  dfmp2::chem::DfMp2Input in;
  in.orbital_energies = &p.eps;
  in.nocc = p.nocc;
  in.mo_coefficients = &p.c;
  in.metric = &p.metric;
  in.three_index = c.form == dfmp2::chem::ThreeIndexForm::ao ? static_cast<const dfmp2::chem::ThreeIndexSource*>(&ao_source)
                                                             : &mo_source;
  dfmp2::chem::DfMp2Options options;
  options.nfrozen = c.nfrozen;
  auto backend = dfmp2::devices::make_backend(c.backend);
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  const auto result = run_planned(in, options, kernels, c.memory_bytes);
  const auto [os, ss] = naive_energy(p, c.nfrozen);
  EXPECT_NEAR(result.opposite_spin, os, 1e-12 * std::abs(os));
  EXPECT_NEAR(result.same_spin, ss, 1e-12 * std::abs(ss) + 1e-14);
  EXPECT_EQ(result.nact, p.nocc - c.nfrozen);
  // Every kernel ran on the backend asked for.
  for (const auto& r : log.records()) EXPECT_TRUE(r.backend == c.backend || r.backend == "host") << r.backend;
}

INSTANTIATE_TEST_SUITE_P(
    Forms, DfMp2Random,
    ::testing::Values(Case{"eigen", dfmp2::chem::ThreeIndexForm::ao, 0, 1e9}, Case{"openblas", dfmp2::chem::ThreeIndexForm::ao, 0, 1e9},
                      Case{"openblas", dfmp2::chem::ThreeIndexForm::ao, 2, 1e9},
                      Case{"openblas", dfmp2::chem::ThreeIndexForm::mo, 0, 1e9},
                      Case{"eigen", dfmp2::chem::ThreeIndexForm::mo, 1, 1e9},
                      // ~1 aux function per block and 1-2 occupied orbitals per pair block
                      Case{"openblas", dfmp2::chem::ThreeIndexForm::ao, 0, 8.0 * (5 * 9 * 31 + 31 * 31 + 14 * 14 + 14 * 19 + 2 * 81 + 10)},
                      Case{"eigen", dfmp2::chem::ThreeIndexForm::mo, 1, 8.0 * (4 * 9 * 31 + 31 * 31 + 5 * 9 + 2 * 81 + 10)}),
    [](const auto& info) {
      return info.param.backend + (info.param.form == dfmp2::chem::ThreeIndexForm::ao ? "_ao" : "_mo") + "_fc" +
             std::to_string(info.param.nfrozen) + (info.param.memory_bytes < 1e6 ? "_tiny_memory" : "");
    });

TEST(PlanBlocks, TinyMemoryIsAResourceErrorNamingTheNeed) {
  using dfmp2::chem::Mp2Storage;
  try {
    dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, 384, 80, 80, 304, 1344, 100e6,
                             dfmp2::chem::Precision::fp64, dfmp2::chem::MetricMethod::cholesky, false, Mp2Storage::memory);
    FAIL() << "expected ResourceError";
  } catch (const dfmp2::PhaseTooLarge& e) {
    EXPECT_NE(std::string(e.what()).find("raise 'memory' or set mp2_storage: scratch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fitted tensor 249 MiB"), std::string::npos) << e.what();
    EXPECT_GT(e.needed(), 249.0 * 1048576);
  }
  // Left to choose, the same 100 MB puts the fitted tensor on scratch and still keeps within the budget.
  const auto plan = dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, 384, 80, 80, 304, 1344, 100e6);
  EXPECT_EQ(plan.storage, Mp2Storage::scratch);
  EXPECT_LE(plan.peak_bytes, 100e6);
  EXPECT_NEAR(plan.scratch_bytes, 8.0 * 80 * 304 * 1344, 1.0);
  EXPECT_THROW(dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, 384, 80, 80, 304, 1344, 1e6),
               dfmp2::PhaseTooLarge);
}

TEST(PlanBlocks, WorkingSetStaysUnderMemory) {
  for (double memory : {0.4e9, 1e9, 2e9, 8e9}) {
    const auto plan = dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, 384, 80, 80, 304, 1344, memory);
    EXPECT_LE(plan.peak_bytes, memory);
    EXPECT_GE(plan.aux_block, 1);
    EXPECT_GE(plan.occupied_block, 1);
    EXPECT_LE(plan.occupied_block, 80);
  }
  // Enough memory for everything: one block each.
  const auto big = dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, 24, 5, 5, 19, 84, 1e9);
  EXPECT_EQ(big.aux_block, 84);
  EXPECT_EQ(big.occupied_block, 5);
}

// A backend that works on copies (the device models' emulation) gets smaller blocks and a chunked fitting, and the
// plan still counts its copies within `memory`.
TEST(PlanBlocks, BackendWorkingCopiesAreCounted) {
  using dfmp2::chem::Mp2Storage;
  using dfmp2::chem::Precision;
  const auto ao = dfmp2::chem::ThreeIndexForm::ao;
  const auto chol = dfmp2::chem::MetricMethod::cholesky;
  const auto plain = dfmp2::chem::plan_blocks(ao, 384, 80, 80, 304, 1344, 0.4e9, Precision::fp32, chol, false,
                                              Mp2Storage::memory, 0.0);
  const auto copied = dfmp2::chem::plan_blocks(ao, 384, 80, 80, 304, 1344, 0.4e9, Precision::fp32, chol, false,
                                               Mp2Storage::memory, 3.0);
  EXPECT_EQ(plain.fit_rows, plain.occupied_block * 304) << "BLAS fits a whole block in place";
  EXPECT_LT(copied.fit_rows, 80 * 304) << "copies of a row chunk, not of the fitted tensor";
  EXPECT_LT(copied.occupied_block, plain.occupied_block);
  EXPECT_LE(copied.peak_bytes, 0.4e9);
  // What the copies add is in the phase's bytes beside the fixed part and the fitted tensor: G and both operand
  // blocks, three times over.
  const double nb = double(copied.occupied_block), g = 4.0 * std::pow(nb * 304, 2);
  const double fitted = 4.0 * 80 * 304 * 1344;
  EXPECT_DOUBLE_EQ(copied.pair_bytes - copied.fixed_bytes - fitted, g + 3.0 * (g + 2.0 * 4.0 * nb * 304 * 1344));
}

TEST(OccupiedBlockPairs, CoverEveryPairOnce) {
  for (Index nact : {1, 5, 7, 80}) {
    for (Index block : {1, 2, 3, 7, 100}) {
      std::vector<int> seen(static_cast<std::size_t>(nact * nact), 0);
      for (const auto& p : dfmp2::chem::occupied_block_pairs(nact, block)) {
        EXPECT_GE(p.i0, p.j0);
        for (Index i = p.i0; i < p.i1; ++i)
          for (Index j = p.j0; j < p.j1; ++j)
            if (!p.diagonal() || j <= i) seen[static_cast<std::size_t>(i * nact + j)] += 1;
      }
      for (Index i = 0; i < nact; ++i)
        for (Index j = 0; j < nact; ++j) EXPECT_EQ(seen[static_cast<std::size_t>(i * nact + j)], j <= i ? 1 : 0);
    }
  }
}

TEST(DfMp2, HomoAboveLumoIsANumericalError) {
  Problem p = random_problem(3);
  p.eps[p.nocc - 1] = 2.0;  // above the lowest virtual (1.4)
  dfmp2::testing::MemorySource src(dfmp2::chem::ThreeIndexForm::ao, p.naux, p.nbf * p.nbf);
  src.data() = p.ao;
  dfmp2::chem::DfMp2Input in{&p.eps, p.nocc, &p.c, &p.metric, &src};
  auto backend = dfmp2::devices::make_backend("eigen");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  EXPECT_THROW(run_planned(in, {}, kernels), dfmp2::NumericalError);
}

TEST(DfMp2, IndefiniteMetricIsANumericalErrorNamingTheMetric) {
  Problem p = random_problem(5);
  p.metric(3, 3) = -1.0;
  dfmp2::testing::MemorySource src(dfmp2::chem::ThreeIndexForm::ao, p.naux, p.nbf * p.nbf);
  src.data() = p.ao;
  dfmp2::chem::DfMp2Input in{&p.eps, p.nocc, &p.c, &p.metric, &src};
  for (const std::string name : {"eigen", "openblas"}) {
    auto backend = dfmp2::devices::make_backend(name);
    dfmp2::linalg::KernelLog log;
    dfmp2::linalg::Kernels kernels(*backend, log);
    try {
      run_planned(in, {}, kernels);
      FAIL() << "expected NumericalError on " << name;
    } catch (const dfmp2::NumericalError& e) {
      EXPECT_NE(std::string(e.what()).find("metric (P|Q)"), std::string::npos) << e.what();
    }
  }
}

// The pair-energy sum adds one value per orbital pair in a fixed order, so the energy is the same to the last bit
// for any number of threads (an OpenMP reduction would add the threads' partial sums in whatever order they end).
TEST(PairEnergy, BitwiseTheSameForAnyThreadCount) {
  const Index nact = 24, nvir = 60, naux = 90;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-0.1, 0.1);
  const Matrix fitted = Matrix::NullaryExpr(nact * nvir, naux, [&] { return u(rng); });
  Vector eps_occ(nact), eps_vir(nvir);
  for (Index i = 0; i < nact; ++i) eps_occ[i] = -1.5 + 0.03 * double(i);
  for (Index a = 0; a < nvir; ++a) eps_vir[a] = 0.2 + 0.05 * double(a);
  auto backend = dfmp2::devices::make_backend("eigen");
  backend->set_threads(1);  // the GEMMs the same in every run: only the reduction's threads vary
  auto energy = [&](int threads) {
    omp_set_num_threads(threads);
    dfmp2::linalg::KernelLog log;
    dfmp2::linalg::Kernels kernels(*backend, log);
    Matrix workspace;
    dfmp2::chem::PairEnergy total;
    for (const auto& pair : dfmp2::chem::occupied_block_pairs(nact, 12)) {
      total += dfmp2::chem::block_pair_energy<double, double>(pair, fitted, eps_occ, eps_vir, kernels, workspace);
    }
    return total;
  };
  const auto one = energy(1);
  for (int threads : {2, 3, 2, 4, 2}) {
    const auto many = energy(threads);
    EXPECT_EQ(one.opposite_spin, many.opposite_spin) << threads << " threads";
    EXPECT_EQ(one.same_spin, many.same_spin) << threads << " threads";
  }
  omp_set_num_threads(omp_get_num_procs());
}

// Integrals of absurd magnitude overflow somewhere in the method: the run stops with the step named, instead of
// reporting NaN or 0 with success.
TEST(DfMp2, OverflowIsANumericalErrorNamingTheStep) {
  Problem p = random_problem(9);
  for (double& v : p.ao) v *= 1e300;
  dfmp2::testing::MemorySource src(dfmp2::chem::ThreeIndexForm::ao, p.naux, p.nbf * p.nbf);
  src.data() = p.ao;
  dfmp2::chem::DfMp2Input in{&p.eps, p.nocc, &p.c, &p.metric, &src};
  auto backend = dfmp2::devices::make_backend("eigen");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  try {
    run_planned(in, {}, kernels);
    FAIL() << "expected NumericalError";
  } catch (const dfmp2::NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("DF-MP2 step '"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
  }
}

}  // namespace

// The work of one DF-MP2 run over ranks (chem::make_layout): every auxiliary column and block pair exactly once,
// shares of about equal size, and pairs balanced by cost when there are at least two occupied blocks per rank.
TEST(Mp2Layout, SharesEverythingOnceAndBalancesThePairs) {
  const Index naux = 97;
  dfmp2::testing::MemorySource source(dfmp2::chem::ThreeIndexForm::mo, naux, 1);
  for (int ranks : {1, 2, 3, 4, 7}) {
    for (const auto& [nact, nb] : std::vector<std::pair<Index, Index>>{{40, 5}, {80, 8}, {5, 5}, {16, 8}, {33, 4}}) {
      const auto l = dfmp2::chem::make_layout(source, 13, {dfmp2::chem::SpinSpace{nact, nact, 1}}, nb, ranks, 0);
      SCOPED_TRACE(testing::Message() << ranks << " ranks, nact " << nact << ", block " << nb);
      // Columns: consecutive blocks of at most 13 covering [0, naux), in rank order, each rank's run at most one
      // unit longer than an even share.
      Index next = 0;
      for (std::size_t k = 0; k < l.aux_blocks.size(); ++k) {
        EXPECT_EQ(l.aux_blocks[k].first, next);
        EXPECT_LE(l.aux_blocks[k].second - l.aux_blocks[k].first, 13);
        if (k > 0) {
          EXPECT_GE(l.aux_rank[k], l.aux_rank[k - 1]);
        }
        EXPECT_GE(l.aux_blocks[k].first, l.col0[static_cast<std::size_t>(l.aux_rank[k])]);
        EXPECT_LE(l.aux_blocks[k].second, l.col0[static_cast<std::size_t>(l.aux_rank[k]) + 1]);
        next = l.aux_blocks[k].second;
      }
      EXPECT_EQ(next, naux);
      for (int r = 0; r < ranks; ++r) EXPECT_LE(l.columns(r), (naux + ranks - 1) / ranks + 1);
      // Occupied blocks in contiguous runs whose counts differ by at most one.
      std::vector<int> held(static_cast<std::size_t>(ranks), 0);
      for (std::size_t b = 0; b < l.occupied.size(); ++b) {
        if (b > 0) {
          EXPECT_GE(l.occupied_rank[b], l.occupied_rank[b - 1]);
        }
        ++held[static_cast<std::size_t>(l.occupied_rank[b])];
      }
      EXPECT_LE(*std::max_element(held.begin(), held.end()) - *std::min_element(held.begin(), held.end()), 1);
      // Pairs: the serial list, each computed by one rank: a holder of one of its blocks, or (counted in
      // pairs_away) a rank holding neither that was less loaded.
      const auto serial = dfmp2::chem::occupied_block_pairs(nact, nb);
      ASSERT_EQ(l.pairs.size(), serial.size());
      std::vector<double> cost(static_cast<std::size_t>(ranks), 0.0);
      long long away = 0;
      double largest = 0;
      for (std::size_t k = 0; k < l.pairs.size(); ++k) {
        EXPECT_EQ(l.pairs[k].i0, serial[k].i0);
        EXPECT_EQ(l.pairs[k].j0, serial[k].j0);
        const int r = l.pair_rank[k];
        ASSERT_TRUE(r >= 0 && r < ranks);
        if (r != l.occupied_rank[static_cast<std::size_t>(l.pairs[k].i0 / nb)] &&
            r != l.occupied_rank[static_cast<std::size_t>(l.pairs[k].j0 / nb)])
          ++away;
        cost[static_cast<std::size_t>(r)] += dfmp2::chem::Mp2Layout::pair_cost(l.pairs[k]);
        largest = std::max(largest, dfmp2::chem::Mp2Layout::pair_cost(l.pairs[k]));
      }
      EXPECT_EQ(away, l.pairs_away);
      if (ranks == 1) EXPECT_EQ(away, 0);
      double sum = 0;
      for (double x : cost) sum += x;
      const double busiest = *std::max_element(cost.begin(), cost.end());
      EXPECT_NEAR(l.predicted_imbalance, busiest / (sum / ranks), 1e-12);
      // A pair stays with a holder only while that holder is at most its cost above the least loaded rank, so no
      // rank ends more than two of the largest pairs above the mean; with two or more blocks per rank within 10 %
      // of an even share (measured: at most 1.08); with at least two pairs per rank, every rank computes some.
      EXPECT_LE(busiest, sum / ranks + 2.0 * largest);
      if (Index(l.occupied.size()) >= 2 * ranks) EXPECT_LE(busiest, 1.10 * sum / ranks);
      if (l.pairs.size() >= 2 * std::size_t(ranks)) EXPECT_GT(*std::min_element(cost.begin(), cost.end()), 0.0);
    }
  }
}

// With ranks, each holds a share of the tensors: the same memory keeps in memory what one rank must put on scratch,
// and every phase of each rank stays within the budget.
TEST(PlanBlocks, RanksShareTheTensors) {
  using dfmp2::chem::Mp2Storage;
  const auto ao = dfmp2::chem::ThreeIndexForm::ao;
  const double memory = 150e6;  // the fitted tensor (80 x 304 x 1344 doubles) is 261 MB
  const auto one = dfmp2::chem::plan_blocks(ao, 384, 80, 80, 304, 1344, memory);
  const auto four = dfmp2::chem::plan_blocks(ao, 384, 80, 80, 304, 1344, memory, dfmp2::chem::Precision::fp64,
                                             dfmp2::chem::MetricMethod::cholesky, false, Mp2Storage::automatic, 0.0,
                                             4, 10);
  EXPECT_EQ(one.storage, Mp2Storage::scratch);
  EXPECT_EQ(four.storage, Mp2Storage::memory);
  EXPECT_EQ(four.ranks, 4);
  for (const auto& p : {one, four}) {
    EXPECT_LE(p.peak_bytes, memory);
    EXPECT_LE(std::max({p.metric_bytes, p.transform_bytes, p.fitting_bytes, p.pair_bytes}), p.peak_bytes);
  }
  // Each rank transforms at most its share of the columns.
  EXPECT_LE(four.aux_block, 1344 / 4);
}

namespace {

// DF-UMP2 against the naive sums on a random problem with different alpha and beta orbitals (5 and 4 occupied):
// E_aa = 1/2 sum (ia|jb)[(ia|jb) - (ib|ja)] / D over alpha (E_bb over beta), E_ab = sum (ia|jb)^2 / D with i, a
// alpha and j, b beta; the singles terms of the active orbitals added (ROHF-MBPT(2)). One block per space, and many
// (small memory: several auxiliary blocks and one or two orbitals per block, so that cross-spin block pairs of
// unequal sizes occur), with and without a frozen core.
struct SpinSums {
  double aa = 0, bb = 0, ab = 0;
};

SpinSums naive_unrestricted(const Problem& pa, const Problem& pb, Index nfrozen) {
  const Matrix a_alpha = mo_3index(pa), a_beta = mo_3index(pb);
  const Matrix jinv_beta = pa.metric.ldlt().solve(a_beta.transpose());
  const Matrix v_aa = a_alpha * pa.metric.ldlt().solve(a_alpha.transpose());
  const Matrix v_bb = a_beta * jinv_beta, v_ab = a_alpha * jinv_beta;
  const Index va = pa.nbf - pa.nocc, vb = pb.nbf - pb.nocc;
  SpinSums s;
  auto same = [&](const Problem& p, const Matrix& v, Index nv) {
    double e = 0;
    for (Index i = nfrozen; i < p.nocc; ++i)
      for (Index j = nfrozen; j < p.nocc; ++j)
        for (Index x = 0; x < nv; ++x)
          for (Index y = 0; y < nv; ++y) {
            const double iajb = v(x + nv * i, y + nv * j), ibja = v(y + nv * i, x + nv * j);
            e += 0.5 * iajb * (iajb - ibja) / (p.eps[i] + p.eps[j] - p.eps[p.nocc + x] - p.eps[p.nocc + y]);
          }
    return e;
  };
  s.aa = same(pa, v_aa, va);
  s.bb = same(pb, v_bb, vb);
  for (Index i = nfrozen; i < pa.nocc; ++i)
    for (Index j = nfrozen; j < pb.nocc; ++j)
      for (Index x = 0; x < va; ++x)
        for (Index y = 0; y < vb; ++y) {
          const double iajb = v_ab(x + va * i, y + vb * j);
          s.ab += iajb * iajb / (pa.eps[i] + pb.eps[j] - pa.eps[pa.nocc + x] - pb.eps[pb.nocc + y]);
        }
  return s;
}

TEST(DfUmp2, MatchesTheNaiveSpinSums) {
  const Problem alpha = random_problem(7);
  Problem beta = random_problem(8);
  beta.nocc = 4;
  beta.metric = alpha.metric;
  beta.ao = alpha.ao;  // one set of integrals, two sets of orbitals
  for (Index i = 0; i < beta.nbf; ++i) beta.eps[i] = i < beta.nocc ? -1.8 + 0.25 * double(i) : 0.3 + 0.25 * double(i);
  const Vector singles_alpha = Vector::LinSpaced(alpha.nocc, -3e-3, -1e-3);
  const Vector singles_beta = Vector::LinSpaced(beta.nocc, -2e-3, -5e-4);
  dfmp2::testing::MemorySource source(dfmp2::chem::ThreeIndexForm::ao, alpha.naux, alpha.nbf * alpha.nbf);
  source.data() = alpha.ao;
  dfmp2::chem::DfMp2Input in{&alpha.eps, alpha.nocc, &alpha.c, &alpha.metric, &source,
                             &beta.eps, beta.nocc, &beta.c, &singles_alpha, &singles_beta};
  auto backend = dfmp2::devices::make_backend("openblas");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  for (const int nfrozen : {0, 1}) {
    const SpinSums want = naive_unrestricted(alpha, beta, nfrozen);
    for (const double memory : {1e9, 8.0 * (9 * 9 * 31 + 31 * 31 + 2 * 14 * 28 + 4 * 81 + 200)}) {
      SCOPED_TRACE(::testing::Message() << "frozen " << nfrozen << ", memory " << memory);
      dfmp2::chem::DfMp2Options options;
      options.nfrozen = nfrozen;
      const auto r = run_planned(in, options, kernels, memory);
      EXPECT_TRUE(r.unrestricted);
      EXPECT_NEAR(r.same_spin_alpha, want.aa, 1e-12 * std::abs(want.aa));
      EXPECT_NEAR(r.same_spin_beta, want.bb, 1e-12 * std::abs(want.bb));
      EXPECT_NEAR(r.opposite_spin, want.ab, 1e-12 * std::abs(want.ab));
      EXPECT_DOUBLE_EQ(r.same_spin, r.same_spin_alpha + r.same_spin_beta);
      EXPECT_NEAR(r.singles, singles_alpha.tail(alpha.nocc - nfrozen).sum() + singles_beta.tail(beta.nocc - nfrozen).sum(),
                  1e-15);
      EXPECT_NEAR(r.correlation(), r.singles + want.aa + want.bb + want.ab, 1e-12);
      EXPECT_EQ(r.nact, alpha.nocc - nfrozen);
      EXPECT_EQ(r.nact_beta, beta.nocc - nfrozen);
      if (memory < 1e6) EXPECT_GT(r.block_pairs, 3);
    }
  }
}

// The same orbitals for both spins give the closed-shell energies: E_ab is RHF's opposite-spin energy and
// E_aa = E_bb half its same-spin energy.
TEST(DfUmp2, EqualSpinsGiveTheClosedShellEnergies) {
  const Problem p = random_problem(11);
  dfmp2::testing::MemorySource source(dfmp2::chem::ThreeIndexForm::ao, p.naux, p.nbf * p.nbf);
  source.data() = p.ao;
  dfmp2::chem::DfMp2Input closed{&p.eps, p.nocc, &p.c, &p.metric, &source};
  dfmp2::chem::DfMp2Input open = closed;
  open.orbital_energies_beta = &p.eps;
  open.nocc_beta = p.nocc;
  open.mo_coefficients_beta = &p.c;
  auto backend = dfmp2::devices::make_backend("eigen");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  const auto r = run_planned(closed, {}, kernels), u = run_planned(open, {}, kernels);
  EXPECT_NEAR(u.opposite_spin, r.opposite_spin, 1e-13 * std::abs(r.opposite_spin));
  EXPECT_NEAR(u.same_spin_alpha, 0.5 * r.same_spin, 1e-13 * std::abs(r.same_spin));
  EXPECT_NEAR(u.same_spin_beta, 0.5 * r.same_spin, 1e-13 * std::abs(r.same_spin));
}

// Two spaces: every block of each space, and every pair of blocks once (within a space I >= J, across spaces a beta
// block with an alpha block), with the spins the blocks have.
TEST(Mp2Layout, TwoSpacesPairEveryBlockOnce) {
  dfmp2::testing::MemorySource source(dfmp2::chem::ThreeIndexForm::ao, 40, 4);
  for (const int ranks : {1, 3}) {
    const auto l = dfmp2::chem::make_layout(source, 13, {dfmp2::chem::SpinSpace{7, 7, 1}, dfmp2::chem::SpinSpace{5, 5, 1}}, 3, ranks, 0);
    ASSERT_EQ(l.occupied.size(), 5u);  // alpha [0,3) [3,6) [6,7), beta [0,3) [3,5)
    EXPECT_EQ(l.occupied_spin, (std::vector<int>{0, 0, 0, 1, 1}));
    EXPECT_EQ(l.pairs.size(), 15u);
    int cross = 0;
    for (std::size_t k = 0; k < l.pairs.size(); ++k) {
      const auto [bi, bj] = l.pair_blocks[k];
      EXPECT_GE(bi, bj);
      const auto& p = l.pairs[k];
      EXPECT_EQ(p.space_i, l.occupied_spin[static_cast<std::size_t>(bi)]);
      EXPECT_EQ(p.space_j, l.occupied_spin[static_cast<std::size_t>(bj)]);
      EXPECT_EQ(p.i0, l.occupied[static_cast<std::size_t>(bi)].first);
      EXPECT_EQ(p.j0, l.occupied[static_cast<std::size_t>(bj)].first);
      cross += !p.same_space();
      EXPECT_FALSE(!p.same_space() && p.diagonal());  // beta block 0 with alpha block 0 is not a diagonal pair
    }
    EXPECT_EQ(cross, 6);  // 2 beta blocks x 3 alpha blocks
  }
}

// Several systems in one run (an interaction energy's complex and its fragments in the complex's basis): each gets
// the energies of a run of its own, whatever the blocking, with a closed-shell system, an open-shell one and a
// closed-shell one with its own frozen core stacked; and no block pair joins two systems.
TEST(DfMp2Systems, EachSystemGetsTheEnergiesOfItsOwnRun) {
  const Problem p = random_problem(21);
  Problem q = random_problem(22);
  q.nocc = 4;
  for (Index i = 0; i < q.nbf; ++i) q.eps[i] = i < q.nocc ? -1.7 + 0.3 * double(i) : 0.35 + 0.2 * double(i);
  dfmp2::testing::MemorySource source(dfmp2::chem::ThreeIndexForm::ao, p.naux, p.nbf * p.nbf);
  source.data() = p.ao;
  const dfmp2::chem::DfMp2Input closed{&p.eps, p.nocc, &p.c, &p.metric, &source};
  dfmp2::chem::DfMp2Input open = closed;
  open.orbital_energies_beta = &q.eps;
  open.nocc_beta = q.nocc;
  open.mo_coefficients_beta = &q.c;
  const dfmp2::chem::DfMp2Input other{&q.eps, q.nocc, &q.c, &p.metric, &source};
  const std::vector<dfmp2::chem::Mp2System> systems{{closed, 0}, {open, 1}, {other, 2}};
  auto backend = dfmp2::devices::make_backend("openblas");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  std::vector<dfmp2::chem::DfMp2Result> alone;
  for (const auto& sys : systems) {
    dfmp2::chem::DfMp2Options options;
    options.nfrozen = sys.nfrozen;
    alone.push_back(run_planned(sys.input, options, kernels));
  }
  const auto spaces = dfmp2::chem::mp2_spaces(systems);
  ASSERT_EQ(spaces.size(), 4u);
  EXPECT_EQ(spaces[1].system, 1);
  EXPECT_EQ(spaces[2].system, 1);
  EXPECT_EQ(spaces[3].nact, q.nocc - 2);
  // Each space says its spin, each pair its kind: the closed shells' spaces hold both spins, the open shell's an
  // alpha and a beta space; pairs within them are closed-shell or same-spin pairs, across them opposite-spin.
  using dfmp2::chem::PairKind;
  using dfmp2::chem::SpaceSpin;
  EXPECT_EQ(spaces[0].spin, SpaceSpin::both);
  EXPECT_EQ(spaces[1].spin, SpaceSpin::alpha);
  EXPECT_EQ(spaces[2].spin, SpaceSpin::beta);
  EXPECT_EQ(spaces[3].spin, SpaceSpin::both);
  {
    const auto l = dfmp2::chem::make_layout(source, 7, spaces, 2, 1, 0);
    std::map<PairKind, int> kinds;
    for (const auto& pair : l.pairs) {
      const PairKind expected = pair.space_i != pair.space_j ? PairKind::opposite_spin
                                : pair.space_i == 1 || pair.space_i == 2 ? PairKind::same_spin
                                                                          : PairKind::closed_shell;
      EXPECT_EQ(pair.kind, expected);
      ++kinds[pair.kind];
    }
    EXPECT_EQ(kinds.size(), 3u);
  }
  // A plan records the spaces it was made for; run on other ones it is refused.
  {
    auto fewer = spaces;
    fewer.pop_back();
    const auto plan = dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, p.nbf, fewer, p.naux, 1e9);
    EXPECT_EQ(plan.spaces, fewer);
    EXPECT_THROW(dfmp2::chem::run_dfmp2(systems, plan, {}, kernels), std::logic_error);
  }
  for (const double memory : {1e9, 8.0 * (9 * 9 * 31 + 31 * 31 + 4 * 14 * 28 + 4 * 81 + 200)}) {
    SCOPED_TRACE(::testing::Message() << "memory " << memory);
    const auto plan = dfmp2::chem::plan_blocks(dfmp2::chem::ThreeIndexForm::ao, p.nbf, spaces, p.naux, memory,
                                               dfmp2::chem::Precision::fp64, dfmp2::chem::MetricMethod::cholesky,
                                               false, dfmp2::chem::Mp2Storage::automatic, 0, 1, 1);
    const auto together = dfmp2::chem::run_dfmp2(systems, plan, {}, kernels);
    ASSERT_EQ(together.size(), systems.size());
    for (std::size_t s = 0; s < systems.size(); ++s) {
      SCOPED_TRACE(::testing::Message() << "system " << s);
      EXPECT_NEAR(together[s].opposite_spin, alone[s].opposite_spin, 1e-12 * std::abs(alone[s].opposite_spin));
      EXPECT_NEAR(together[s].same_spin_alpha, alone[s].same_spin_alpha, 1e-12 * std::abs(alone[s].same_spin));
      EXPECT_NEAR(together[s].same_spin_beta, alone[s].same_spin_beta, 1e-12 * std::abs(alone[s].same_spin));
      EXPECT_EQ(together[s].unrestricted, alone[s].unrestricted);
      EXPECT_EQ(together[s].nact, alone[s].nact);
      EXPECT_EQ(together[s].nfrozen, systems[s].nfrozen);
    }
    const auto l = dfmp2::chem::make_layout(source, plan.aux_block, spaces, plan.occupied_block, 2, 0);
    for (const auto& pair : l.pairs) EXPECT_EQ(spaces[pair.space_i].system, spaces[pair.space_j].system);
    if (memory < 1e6) EXPECT_GT(together[0].block_pairs, 6);
  }
}

}  // namespace
