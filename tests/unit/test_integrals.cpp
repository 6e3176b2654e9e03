// Integrals (chem/integrals/integrals.hpp) against Psi4 1.3.2 (Debian) and against naive contractions of our own integrals.
//
// The Psi4 numbers are properties that do not depend on the order or sign convention of the functions inside a
// shell (traces, Frobenius norms, eigenvalues, contractions with S^-1), so they hold for libint2's ordering too.
// They were computed with Psi4's MintsHelper (ao_overlap, ao_kinetic, ao_potential, ao_eri, and
// ao_eri(aux, zero, aux, zero) / ao_eri(aux, zero, basis, basis) for the two- and three-centre integrals) for water
// at the geometry of shared/reference/psi4_refs.json (angstrom, no_com, no_reorient, c1), with the basis files of
// inputs/basis (the same as Psi4's).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/integrals/integrals.hpp"
#include "chem/system/molecule.hpp"
#include "chem/scf/df_jk.hpp"
#include "chem/scf/scf.hpp"
#include "devices/registry.hpp"
#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::chem::BasisSet;
using dfmp2::chem::Molecule;
using dfmp2::linalg::Matrix;
using dfmp2::linalg::Vector;
namespace chem = dfmp2::chem;

Molecule water() {
  return chem::parse_xyz_lines("O 0.000000 0.000000 0.117790\nH 0.000000 0.755453 -0.471161\n"
                               "H 0.000000 -0.755453 -0.471161\n",
                               "water");
}

BasisSet basis(const std::string& name, const Molecule& molecule = water()) {
  return chem::load_basis(name, molecule, DFMP2_SOURCE_DIR "/inputs/basis", "basis");
}

// Relative closeness, for numbers of any size.
void expect_close(double actual, double expected, double rel, const char* what) {
  EXPECT_NEAR(actual, expected, rel * std::max(1.0, std::abs(expected))) << what;
}

void expect_symmetric(const Matrix& m) {
  ASSERT_EQ(m.rows(), m.cols());
  EXPECT_EQ((m - m.transpose()).cwiseAbs().maxCoeff(), 0.0);
}

Vector sorted_eigenvalues(const Matrix& m) {
  Vector w = Eigen::SelfAdjointEigenSolver<Matrix>(m, Eigen::EigenvaluesOnly).eigenvalues();
  std::sort(w.data(), w.data() + w.size());
  return w;
}

Matrix inverse(const Matrix& s) { return s.llt().solve(Matrix::Identity(s.rows(), s.cols())); }

double frobenius(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

Matrix random_symmetric(int n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Matrix d(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j <= i; ++j) d(i, j) = d(j, i) = u(rng);
  }
  return d;
}

// J and K by the definitions, from the full four-centre tensor.
void naive_jk(const std::vector<double>& eri, const Matrix& d, Matrix& j, Matrix& k) {
  const auto n = d.rows();
  j = Matrix::Zero(n, n);
  k = Matrix::Zero(n, n);
  auto at = [&](long m, long nn, long l, long s) { return eri[s + n * (l + n * (nn + n * m))]; };
  for (long m = 0; m < n; ++m) {
    for (long nn = 0; nn < n; ++nn) {
      for (long l = 0; l < n; ++l) {
        for (long s = 0; s < n; ++s) {
          j(m, nn) += at(m, nn, l, s) * d(l, s);
          k(m, nn) += at(m, l, nn, s) * d(l, s);
        }
      }
    }
  }
}

TEST(Integrals, NuclearRepulsionMatchesPsi4) {
  EXPECT_NEAR(chem::nuclear_repulsion_energy(water()), 9.18919322496848, 1e-12);
  Molecule one;
  one.atoms = water().atoms;
  one.atoms.resize(1);
  EXPECT_EQ(chem::nuclear_repulsion_energy(one), 0.0);
}

struct OneElectronReference {
  const char* basis;
  int nbf;
  double s_trace, s_frob, t_trace, t_frob, v_trace, v_frob;
  std::vector<double> s_eigenvalues;
};

void check_one_electron(const OneElectronReference& ref) {
  SCOPED_TRACE(ref.basis);
  const Molecule mol = water();
  const BasisSet bs = basis(ref.basis, mol);
  const Matrix s = chem::overlap_matrix(bs);
  const Matrix t = chem::kinetic_matrix(bs);
  const Matrix v = chem::nuclear_attraction_matrix(bs, mol);
  ASSERT_EQ(s.rows(), ref.nbf);
  ASSERT_EQ(t.rows(), ref.nbf);
  ASSERT_EQ(v.rows(), ref.nbf);
  expect_symmetric(s);
  expect_symmetric(t);
  expect_symmetric(v);
  expect_close(s.trace(), ref.s_trace, 1e-12, "tr S");
  expect_close(s.norm(), ref.s_frob, 1e-12, "|S|");
  expect_close(t.trace(), ref.t_trace, 1e-12, "tr T");
  expect_close(t.norm(), ref.t_frob, 1e-12, "|T|");
  expect_close(v.trace(), ref.v_trace, 1e-12, "tr V");
  expect_close(v.norm(), ref.v_frob, 1e-12, "|V|");
  const Vector w = sorted_eigenvalues(s);
  ASSERT_EQ(static_cast<std::size_t>(w.size()), ref.s_eigenvalues.size());
  for (int i = 0; i < w.size(); ++i) EXPECT_NEAR(w(i), ref.s_eigenvalues[i], 1e-11) << "eigenvalue " << i;
}

TEST(Integrals, OneElectronStoThreeG) {
  check_one_electron({"sto-3g", 7, 7.0, 2.961412482315286e+00, 3.891758526218744e+01, 2.937042559664677e+01,
                      -1.137419863760023e+02, 6.713082785748361e+01,
                      {3.426326795267422e-01, 4.171906394985825e-01, 8.854390199267840e-01, 9.999999999999997e-01,
                       1.093378235563753e+00, 1.330007272587216e+00, 1.931352152896922e+00}});
}

TEST(Integrals, OneElectronCcPvdzSpherical) {
  check_one_electron(
      {"cc-pvdz", 24, 24.0, 6.375827719581936e+00, 8.898783938982632e+01, 4.060141454375572e+01,
       -2.430763438518467e+02, 8.820063445387134e+01,
       {3.417296610728655e-02, 7.372046104612330e-02, 1.643376725807764e-01, 1.836797958585628e-01,
        2.893906983861163e-01, 3.284252630119037e-01, 3.582559937342138e-01, 4.127684478727089e-01,
        5.919592427527103e-01, 6.185974613007484e-01, 6.586028692002710e-01, 7.170013119711895e-01,
        1.017856596731059e+00, 1.093096526047431e+00, 1.124111027237700e+00, 1.152310359012666e+00,
        1.220055492095009e+00, 1.284893339623973e+00, 1.329754842639657e+00, 1.493498708070987e+00,
        1.892810099806792e+00, 1.941692307077679e+00, 2.307781845835160e+00, 3.711226671999274e+00}});
}

// 6-31G* is cartesian: six d functions, xx normalised to 1 and xy, xz, yz to 1/3 as in Psi4.
TEST(Integrals, OneElectronCartesianSixThirtyOneGStar) {
  check_one_electron(
      {"6-31g*", 19, 17.0, 6.057421618323215e+00, 5.771222410371256e+01, 3.104852809170415e+01,
       -1.872487789305268e+02, 7.910446454129983e+01,
       {2.230763289712122e-02, 1.062282676240218e-01, 1.432562692042846e-01, 1.774317261038114e-01,
        2.804632552491008e-01, 3.333333333333333e-01, 3.333333333333334e-01, 4.234882032373327e-01,
        4.830791078953637e-01, 4.984793589251892e-01, 6.666666666666666e-01, 6.751556162990118e-01,
        7.756983494930947e-01, 8.233359654211750e-01, 1.030263193946136e+00, 1.501520641074811e+00,
        1.795727200346427e+00, 2.254345566028995e+00, 4.675886312920790e+00}});
  // The d shell of oxygen is the last shell on the first atom: functions 9..14 (xx, xy, xz, yy, yz, zz).
  const Matrix s = chem::overlap_matrix(basis("6-31g*"));
  const double expected[6] = {1.0, 1.0 / 3, 1.0 / 3, 1.0, 1.0 / 3, 1.0};
  for (int f = 0; f < 6; ++f) EXPECT_NEAR(s(9 + f, 9 + f), expected[f], 1e-13) << "d function " << f;
}

// p shells come out as x, y, z whatever the file's header says: <p_x|p_x> of a p shell on O along the axes.
TEST(Integrals, PShellsAreCartesianXYZ) {
  Molecule mol;
  mol.atoms = {{"O", 8, 0, 0, 0}, {"H", 1, 0, 0, 1.0}};  // H on the z axis
  const BasisSet bs = basis("sto-3g", mol);
  const Matrix s = chem::overlap_matrix(bs);
  // O: 1s 2s 2p(x, y, z) = functions 0..4; H 1s = function 5. Only p_z overlaps H 1s by symmetry.
  ASSERT_EQ(s.rows(), 6);
  EXPECT_NEAR(s(2, 5), 0.0, 1e-15);
  EXPECT_NEAR(s(3, 5), 0.0, 1e-15);
  EXPECT_GT(s(4, 5), 0.1);  // the positive lobe of p_z points at H
}

struct MetricReference {
  const char* aux;
  int naux;
  double trace, frob, eig_min, eig_max;
};

TEST(Integrals, CoulombMetricMatchesPsi4) {
  for (const auto& ref : {MetricReference{"cc-pvdz-ri", 84, 3.086566068821309e+02, 1.420544905841427e+02,
                                          5.445004339542704e-04, 1.353786582165035e+02},
                          MetricReference{"cc-pvdz-jkfit", 116, 4.675738964436364e+02, 1.796362412961655e+02,
                                          6.738925488409749e-05, 1.636270110291026e+02}}) {
    SCOPED_TRACE(ref.aux);
    const Matrix m = chem::coulomb_metric(basis(ref.aux));
    ASSERT_EQ(m.rows(), ref.naux);
    expect_symmetric(m);
    expect_close(m.trace(), ref.trace, 1e-12, "tr (P|Q)");
    expect_close(m.norm(), ref.frob, 1e-12, "|(P|Q)|");
    const Vector w = sorted_eigenvalues(m);
    EXPECT_NEAR(w(0), ref.eig_min, 1e-12);
    expect_close(w(w.size() - 1), ref.eig_max, 1e-12, "largest eigenvalue");
  }
}

struct ThreeCentreReference {
  const char* basis;
  const char* aux;
  double frob, max_abs, fitted;  // fitted: v^T (P|Q)^-1 v with v_P = sum_mn (P|mn) (S^-1)_mn
};

TEST(Integrals, ThreeCentreMatchesPsi4) {
  for (const auto& ref : {ThreeCentreReference{"cc-pvdz", "cc-pvdz-ri", 5.888137710368355e+01,
                                               5.517165014578155e+00, 3.056764424939747e+02},
                          ThreeCentreReference{"cc-pvdz", "cc-pvdz-jkfit", 6.526419696154080e+01,
                                               5.835398469977310e+00, 3.057034447857620e+02},
                          ThreeCentreReference{"6-31g*", "cc-pvdz-ri", 5.540725534666809e+01,
                                               5.627720599953813e+00, 2.023784615127887e+02}}) {
    SCOPED_TRACE(std::string(ref.basis) + " / " + ref.aux);
    const BasisSet bs = basis(ref.basis);
    const BasisSet aux = basis(ref.aux);
    const auto nbf = static_cast<std::size_t>(bs.nbf());
    const auto naux = static_cast<std::size_t>(aux.nbf());
    const std::vector<double> pmn = chem::three_center_integrals(aux, bs);
    ASSERT_EQ(pmn.size(), naux * nbf * nbf);
    expect_close(frobenius(pmn), ref.frob, 1e-12, "|(P|mn)|");
    double largest = 0;
    for (double x : pmn) largest = std::max(largest, std::abs(x));
    expect_close(largest, ref.max_abs, 1e-12, "max |(P|mn)|");
    // Both triangles of every (P|mn) slab, bit for bit.
    for (std::size_t p = 0; p < naux; ++p) {
      for (std::size_t m = 0; m < nbf; ++m) {
        for (std::size_t n = 0; n < m; ++n) {
          ASSERT_EQ(pmn[n + nbf * (m + nbf * p)], pmn[m + nbf * (n + nbf * p)]) << p << " " << m << " " << n;
        }
      }
    }
    const Matrix sinv = inverse(chem::overlap_matrix(bs));
    Vector v(static_cast<long>(naux));
    for (std::size_t p = 0; p < naux; ++p) {
      double sum = 0;
      for (std::size_t m = 0; m < nbf; ++m) {
        for (std::size_t n = 0; n < nbf; ++n) sum += pmn[n + nbf * (m + nbf * p)] * sinv(m, n);
      }
      v(static_cast<long>(p)) = sum;
    }
    const Matrix metric = chem::coulomb_metric(aux);
    expect_close(v.dot(metric.llt().solve(v)), ref.fitted, 1e-10, "v^T (P|Q)^-1 v");
  }
}

TEST(Integrals, ThreeCentreScreeningOnlyDropsNegligibleIntegrals) {
  // Two waters 8 angstrom apart: shell pairs across them are negligible.
  Molecule dimer = water();
  for (auto atom : water().atoms) {
    atom.x += 8.0;
    dimer.atoms.push_back(atom);
  }
  const BasisSet bs = basis("cc-pvdz", dimer);
  const BasisSet aux = basis("cc-pvdz-ri", dimer);
  const std::vector<double> exact = chem::three_center_integrals(aux, bs, 0.0);
  const double threshold = 1e-10;
  const std::vector<double> screened = chem::three_center_integrals(aux, bs, threshold);
  ASSERT_EQ(exact.size(), screened.size());
  double worst = 0;
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    worst = std::max(worst, std::abs(exact[i] - screened[i]));
    if (screened[i] == 0.0 && exact[i] != 0.0) ++dropped;
    if (screened[i] != 0.0) {
      ASSERT_EQ(screened[i], exact[i]) << i;
    }
  }
  EXPECT_LT(worst, threshold);
  EXPECT_GT(dropped, exact.size() / 50);  // about 6% of the elements
}

TEST(Integrals, FourCentreMatchesPsi4AndHasEightfoldSymmetry) {
  for (const auto& [name, frob] : {std::pair<const char*, double>{"sto-3g", 8.157832589806452e+00},
                                   std::pair<const char*, double>{"cc-pvdz", 2.641349134115417e+01},
                                   std::pair<const char*, double>{"6-31g*", 2.353015607963363e+01}}) {
    SCOPED_TRACE(name);
    const BasisSet bs = basis(name);
    const auto n = static_cast<std::size_t>(bs.nbf());
    const std::vector<double> eri = chem::four_center_integrals(bs);
    ASSERT_EQ(eri.size(), n * n * n * n);
    expect_close(frobenius(eri), frob, 1e-12, "|(mn|ls)|");
    auto at = [&](std::size_t a, std::size_t b, std::size_t c, std::size_t d) {
      return eri[d + n * (c + n * (b + n * a))];
    };
    double worst = 0;
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b) {
        for (std::size_t c = 0; c < n; ++c) {
          for (std::size_t d = 0; d < n; ++d) {
            const double x = at(a, b, c, d);
            for (double y : {at(b, a, c, d), at(a, b, d, c), at(b, a, d, c), at(c, d, a, b), at(d, c, a, b),
                             at(c, d, b, a), at(d, c, b, a)}) {
              worst = std::max(worst, std::abs(x - y));
            }
          }
        }
      }
    }
    EXPECT_LT(worst, 1e-13);
  }
}

struct JkReference {
  const char* basis;
  double tr_j, frob_j, tr_k, frob_k;  // D = S^-1: tr(J S^-1), |J|, tr(K S^-1), |K|
};

TEST(Integrals, ExactJkWithInverseOverlapMatchesPsi4) {
  for (const auto& ref :
       {JkReference{"sto-3g", 3.893280333064574e+01, 1.705684937157080e+01, 1.183264534674297e+01,
                    6.068854474978401e+00},
        JkReference{"cc-pvdz", 3.057243594775047e+02, 8.637143978505648e+01, 3.533019870734000e+01,
                    1.162723335884584e+01},
        JkReference{"6-31g*", 2.023977608165954e+02, 6.714242649081122e+01, 2.751236180767974e+01,
                    1.081730005515288e+01}}) {
    SCOPED_TRACE(ref.basis);
    const BasisSet bs = basis(ref.basis);
    const Matrix sinv = inverse(chem::overlap_matrix(bs));
    Matrix j, k;
    chem::exact_jk(bs, sinv, j, k);
    ASSERT_EQ(j.rows(), sinv.rows());
    ASSERT_EQ(k.cols(), sinv.cols());
    expect_symmetric(j);
    expect_symmetric(k);
    expect_close((j * sinv).trace(), ref.tr_j, 1e-11, "tr(J S^-1)");
    expect_close(j.norm(), ref.frob_j, 1e-11, "|J|");
    expect_close((k * sinv).trace(), ref.tr_k, 1e-11, "tr(K S^-1)");
    expect_close(k.norm(), ref.frob_k, 1e-11, "|K|");
  }
}

// The 8-fold unfolding of exact_jk against J and K by the definitions, for a density with no structure.
TEST(Integrals, ExactJkMatchesNaiveContraction) {
  for (const char* name : {"sto-3g", "cc-pvdz", "6-31g*"}) {
    SCOPED_TRACE(name);
    const BasisSet bs = basis(name);
    const Matrix d = random_symmetric(bs.nbf(), 7);
    Matrix j, k, j_ref, k_ref;
    chem::exact_jk(bs, d, j, k, 0.0);
    naive_jk(chem::four_center_integrals(bs), d, j_ref, k_ref);
    EXPECT_LT((j - j_ref).cwiseAbs().maxCoeff(), 1e-12 * j_ref.cwiseAbs().maxCoeff());
    EXPECT_LT((k - k_ref).cwiseAbs().maxCoeff(), 1e-12 * k_ref.cwiseAbs().maxCoeff());
    // Default screening changes nothing visible.
    Matrix js, ks;
    chem::exact_jk(bs, d, js, ks);
    EXPECT_LT((js - j_ref).cwiseAbs().maxCoeff(), 1e-11);
    EXPECT_LT((ks - k_ref).cwiseAbs().maxCoeff(), 1e-11);
  }
}

// (P|mn), (P|Q) and the four-centre integrals agree on the function order: density fitting reproduces the exact
// Coulomb matrix to the fitting error.
TEST(Integrals, DensityFittedCoulombMatchesExact) {
  const BasisSet bs = basis("cc-pvdz");
  const BasisSet aux = basis("cc-pvdz-jkfit");
  const auto nbf = static_cast<long>(bs.nbf());
  const auto naux = static_cast<long>(aux.nbf());
  const Matrix d = inverse(chem::overlap_matrix(bs));
  Matrix j, k;
  chem::exact_jk(bs, d, j, k);
  const std::vector<double> pmn = chem::three_center_integrals(aux, bs);
  const Eigen::Map<const Matrix> a(pmn.data(), nbf * nbf, naux);  // column P is (P|mn), m n flattened
  const Vector dvec = Eigen::Map<const Vector>(d.data(), nbf * nbf);
  const Vector c = chem::coulomb_metric(aux).llt().solve(a.transpose() * dvec);
  const Vector jdf = a * c;
  const Matrix jdf_m = Eigen::Map<const Matrix>(jdf.data(), nbf, nbf);
  EXPECT_LT((jdf_m - j).cwiseAbs().maxCoeff(), 2e-3 * j.cwiseAbs().maxCoeff());
  EXPECT_GT((jdf_m - j).cwiseAbs().maxCoeff(), 0.0);
}

// The semi-direct cache (all, part or none of the integrals kept) gives the direct J and K, on the build that
// fills it and on the next that reads it; J and K are linear in D, which the SCF's incremental builds rely on.
TEST(Integrals, SemiDirectCacheGivesTheDirectJk) {
  const Molecule dimer = chem::parse_xyz_lines("O 0 0 0.11779\nH 0 0.755453 -0.471161\nH 0 -0.755453 -0.471161\n"
                                               "O 0 0 4.11779\nH 0 0.755453 3.528839\nH 0 -0.755453 3.528839\n",
                                               "dimer");
  const BasisSet bs = basis("cc-pvdz", dimer);
  const Matrix d1 = inverse(chem::overlap_matrix(bs));
  const Matrix d2 = d1 + 0.01 * random_symmetric(bs.nbf(), 3);
  Matrix j_ref[2], k_ref[2];
  chem::exact_jk(bs, d1, j_ref[0], k_ref[0], 0.0);
  chem::exact_jk(bs, d2, j_ref[1], k_ref[1], 0.0);
  const double all = chem::FourCenterJk(bs, 0.0).stats().integrals;
  ASSERT_GT(all, 0.0);
  for (const double cache_bytes : {0.0, 4.0 * all, 1e12}) {  // none, about half, all
    SCOPED_TRACE(cache_bytes);
    chem::FourCenterJk jk(bs, cache_bytes);
    const auto& st = jk.stats();
    EXPECT_EQ(st.integrals, all);
    EXPECT_EQ(st.cache_bytes, 8.0 * st.cached_integrals);
    if (cache_bytes == 0.0) EXPECT_EQ(st.cached_integrals, 0.0);
    else if (cache_bytes < 8.0 * all) EXPECT_TRUE(st.cached_integrals > 0.3 * all && st.cached_integrals < 0.7 * all);
    else EXPECT_EQ(st.cached_integrals, all);
    const Matrix* dens[2] = {&d1, &d2};
    for (int build = 0; build < 2; ++build) {
      Matrix j, k;
      jk.compute(*dens[build], j, k);
      EXPECT_LT((j - j_ref[build]).cwiseAbs().maxCoeff(), 1e-10) << "build " << build;
      EXPECT_LT((k - k_ref[build]).cwiseAbs().maxCoeff(), 1e-10) << "build " << build;
      if (cache_bytes >= 8.0 * all && build == 1) EXPECT_EQ(st.computed_last, 0.0) << "all read from the cache";
      else EXPECT_GT(st.computed_last, 0.0);
    }
  }
  // Density screening: a change confined to one water's block skips the quartets of the other.
  chem::FourCenterJk jk(bs, 0.0);
  Matrix delta = Matrix::Zero(bs.nbf(), bs.nbf());
  const auto half = static_cast<int>(bs.nbf() / 2);
  delta.topLeftCorner(half, half) = 1e-3 * random_symmetric(half, 5);
  Matrix j, k, j0, k0;
  jk.compute(delta, j, k);
  EXPECT_GT(jk.stats().skipped_last, 0.0);
  chem::exact_jk(bs, delta, j0, k0, 0.0);
  EXPECT_LT((j - j0).cwiseAbs().maxCoeff(), 1e-11);
  EXPECT_LT((k - k0).cwiseAbs().maxCoeff(), 1e-11);
  Matrix j1, k1, j2, k2;
  jk.compute(d1, j1, k1);
  jk.compute(d1 + delta, j2, k2);
  EXPECT_LT((j1 + j - j2).cwiseAbs().maxCoeff(), 1e-11);
  EXPECT_LT((k1 + k - k2).cwiseAbs().maxCoeff(), 1e-11);
}

// The SCF's exact J/K takes what its memory budget allows: all integrals, part, or none beyond its fixed part,
// and below that it is a PhaseTooLarge naming the phase and what it needs.
TEST(Integrals, ExactJkPlanFollowsTheMemoryBudget) {
  const BasisSet bs = basis("cc-pvdz");
  auto backend = dfmp2::devices::make_backend("eigen");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  const double fixed = dfmp2::chem::exact_jk_minimum_bytes(bs, omp_get_max_threads());
  const double all = chem::FourCenterJk(bs, 0.0).stats().integrals * 8.0;
  dfmp2::chem::ExactJkPlan plan;
  dfmp2::chem::make_exact_jk(bs, fixed + 2.0 * all, kernels, plan);
  EXPECT_EQ(plan.storage, "semi-direct");
  EXPECT_EQ(plan.cached_integrals, plan.integrals);
  EXPECT_EQ(plan.memory_bytes, fixed + all);
  dfmp2::chem::make_exact_jk(bs, fixed + 0.5 * all, kernels, plan);
  EXPECT_GT(plan.cached_integrals, 0.0);
  EXPECT_LT(plan.cached_integrals, plan.integrals);
  EXPECT_LE(plan.memory_bytes, fixed + 0.5 * all);
  dfmp2::chem::make_exact_jk(bs, fixed, kernels, plan);
  EXPECT_EQ(plan.storage, "direct");
  EXPECT_EQ(plan.cached_integrals, 0.0);
  try {
    dfmp2::chem::make_exact_jk(bs, 0.5 * fixed, kernels, plan);
    ADD_FAILURE() << "no error";
  } catch (const dfmp2::PhaseTooLarge& e) {
    EXPECT_EQ(e.phase(), "SCF J/K (exact)");
    EXPECT_EQ(e.needed(), fixed);
  }
}

TEST(Integrals, ResultsDoNotDependOnThreadCount) {
  const BasisSet bs = basis("cc-pvdz");
  const BasisSet aux = basis("cc-pvdz-ri");
  const Matrix d = random_symmetric(bs.nbf(), 11);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Matrix j1, k1;
  chem::exact_jk(bs, d, j1, k1);
  const std::vector<double> b1 = chem::three_center_integrals(aux, bs);
  const Matrix v1 = chem::nuclear_attraction_matrix(bs, water());
  omp_set_num_threads(2);
  Matrix j2, k2;
  chem::exact_jk(bs, d, j2, k2);
  const std::vector<double> b2 = chem::three_center_integrals(aux, bs);
  const Matrix v2 = chem::nuclear_attraction_matrix(bs, water());
  omp_set_num_threads(threads);
  EXPECT_LT((j1 - j2).cwiseAbs().maxCoeff(), 1e-13 * j1.cwiseAbs().maxCoeff());  // summation order only
  EXPECT_LT((k1 - k2).cwiseAbs().maxCoeff(), 1e-13 * k1.cwiseAbs().maxCoeff());
  EXPECT_TRUE(b1 == b2);
  EXPECT_TRUE(v1 == v2);
}

TEST(Integrals, BadInputsAreErrors) {
  const BasisSet bs = basis("sto-3g");
  Matrix j, k;
  EXPECT_THROW(chem::exact_jk(bs, Matrix::Zero(3, 3), j, k), std::invalid_argument);

  BasisSet high = bs;
  chem::Shell i_shell;
  i_shell.l = 6;  // beyond this libint2 build's four-centre limit (l <= 5)
  i_shell.exponents = {1.0};
  i_shell.coefficients = {1.0};
  high.shells.push_back(i_shell);
  EXPECT_THROW(chem::four_center_integrals(high), dfmp2::UnsupportedError);
  EXPECT_THROW(chem::exact_jk(high, Matrix::Zero(high.nbf(), high.nbf()), j, k), dfmp2::UnsupportedError);

  BasisSet broken = bs;
  broken.shells[0].coefficients.pop_back();
  EXPECT_THROW(chem::overlap_matrix(broken), std::invalid_argument);
}

// The one-electron part of a gradient against central finite differences of the same contraction of the integrals
// (displacing one atom by +-1e-4 bohr, the densities held fixed): every component, in a spherical basis with d
// functions (cc-pVDZ), a cartesian one (6-31G*), and with a ghost atom (its functions move, its nucleus is none);
// and the nuclear repulsion's.
TEST(OneElectronGradient, MatchesFiniteDifferencesOfTheIntegrals) {
  for (const auto& [name, xyz] : std::vector<std::pair<std::string, std::string>>{
           {"cc-pvdz", "O 0.0 0.1 0.117790\nH 0.0 0.755453 -0.471161\nH 0.05 -0.755453 -0.471161\n"},
           {"6-31g*", "O 0.0 0.1 0.117790\nH 0.0 0.755453 -0.471161\nH 0.05 -0.755453 -0.471161\n"},
           {"cc-pvdz", "O 0.0 0.1 0.117790\nH 0.0 0.755453 -0.471161\nGh(He) 0.3 -0.2 2.5\n"}}) {
    SCOPED_TRACE(name + ": " + xyz);
    const Molecule mol = chem::parse_xyz_lines(xyz, "test");
    const BasisSet bs = basis(name, mol);
    const auto n = static_cast<dfmp2::linalg::Index>(bs.nbf());
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Matrix d = Matrix::NullaryExpr(n, n, [&] { return u(rng); }), w = Matrix::NullaryExpr(n, n, [&] { return u(rng); });
    d = (d + d.transpose()).eval();
    w = (w + w.transpose()).eval();
    auto energy = [&](const Molecule& m) {
      const BasisSet b = basis(name, m);
      return (d.cwiseProduct(chem::kinetic_matrix(b) + chem::nuclear_attraction_matrix(b, m))).sum() -
             (w.cwiseProduct(chem::overlap_matrix(b))).sum() + chem::nuclear_repulsion_energy(m);
    };
    const Matrix analytic = chem::one_electron_gradient(bs, mol, d, w) + chem::nuclear_repulsion_gradient(mol);
    const double h = 1e-4;  // bohr
    for (std::size_t a = 0; a < mol.atoms.size(); ++a) {
      for (int x = 0; x < 3; ++x) {
        Molecule plus = mol, minus = mol;
        double* cp = x == 0 ? &plus.atoms[a].x : x == 1 ? &plus.atoms[a].y : &plus.atoms[a].z;
        double* cm = x == 0 ? &minus.atoms[a].x : x == 1 ? &minus.atoms[a].y : &minus.atoms[a].z;
        *cp += h / chem::kBohrPerAngstrom;
        *cm -= h / chem::kBohrPerAngstrom;
        const double numeric = (energy(plus) - energy(minus)) / (2 * h);
        EXPECT_NEAR(analytic(static_cast<Eigen::Index>(a), x), numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
            << "atom " << a << " direction " << x;
      }
    }
  }
}

}  // namespace

// Rank 0 of `ranks` for planning alone: the plan is decided on rank 0 and broadcast, so nothing else is called.
class PlanningComm final : public dfmp2::linalg::Comm {
 public:
  explicit PlanningComm(int ranks) : ranks_(ranks) {}
  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  int node_ranks() const override { return ranks_; }
  std::string description() const override { return "rank 0 of a plan"; }
  void sum(double*, std::size_t) override { unused(); }
  void sum(float*, std::size_t) override { unused(); }
  void broadcast(void*, std::size_t, int root) override { EXPECT_EQ(root, 0); }
  void allgather(const void*, std::size_t, void*) override { unused(); }
  double min(double) override { unused(); }
  double max(double) override { unused(); }
  void exchange(const std::vector<dfmp2::linalg::StridedBlock>&,
                const std::vector<dfmp2::linalg::StridedBlock>&) override { unused(); }
  std::unique_ptr<dfmp2::linalg::BlockLender> lend(dfmp2::linalg::BlockProvider) override { unused(); }
  void agree(const dfmp2::linalg::FailureReport* failed) override {
    if (failed != nullptr) throw dfmp2::linalg::RankFailure(*failed, 0, ranks_, true);
  }
  bool all_arrive_within(double) override { unused(); }

 private:
  [[noreturn]] static void unused() { throw std::logic_error("PlanningComm: planning communicates only broadcasts"); }
  int ranks_;
};

// A grid that planning must not use (it only asks whether there is one).
class PlanningGrid final : public dfmp2::linalg::DenseGrid {
  using DistributedMatrix = dfmp2::linalg::DistributedMatrix;

 public:
  int grid_rows() const override { unused(); }
  int grid_cols() const override { unused(); }
  const dfmp2::linalg::DenseOptions& options() const override { unused(); }
  DistributedMatrix matrix(dfmp2::linalg::Index) const override { unused(); }
  void cholesky(DistributedMatrix&, const std::string&) override { unused(); }
  DistributedMatrix for_row_solves(const DistributedMatrix&) override { unused(); }
  void solve_rows(const DistributedMatrix&, dfmp2::linalg::MatrixView, bool) override { unused(); }
  void eigh(DistributedMatrix&, Vector&, DistributedMatrix&) override { unused(); }
  void multiply(bool, bool, double, const DistributedMatrix&, const DistributedMatrix&, double,
                DistributedMatrix&) override { unused(); }
  void add_transpose(double, const DistributedMatrix&, double, DistributedMatrix&) override { unused(); }
  void gather(const DistributedMatrix&, dfmp2::linalg::MatrixView) override { unused(); }

 private:
  [[noreturn]] static void unused() { throw std::logic_error("PlanningGrid: planning does not factor anything"); }
};

// The DF-J/K's plan on several ranks, its metric factor replicated or on the grid (whose solves copy each rank's
// rows into a padded matrix), holds within the budget it is given for every storage, down to the smallest that
// fits: the blocks and the fitting's chunks are cut to it. ((H2O)48 on 2 ranks once planned 6.6 GiB in 4 GiB: the
// chunk was sized without the grid's copy.)
TEST(Integrals, DfJkPlanHoldsWithinItsBudgetOnRanks) {
  const Molecule dimer = chem::parse_xyz_lines(
      "O 0.0 0.0 0.117790\nH 0.0 0.755453 -0.471161\nH 0.0 -0.755453 -0.471161\n"
      "O 0.0 0.0 3.117790\nH 0.0 0.755453 2.528839\nH 0.0 -0.755453 2.528839", "dimer");
  const BasisSet orbital = basis("cc-pvdz", dimer), jkfit = basis("cc-pvdz-jkfit", dimer);
  const chem::ThreeCenterEngine engine(jkfit, orbital);
  const int nocc = 10;
  constexpr dfmp2::linalg::Index kLargestJkfitShell = 9;  // cc-pVDZ-JKFIT's g functions
  std::vector<bool> grids = {false};
  if (!dfmp2::linalg::dense_libraries().empty()) grids.push_back(true);
  for (const int ranks : {2, 3, 4}) {
    PlanningComm comm(ranks);
    PlanningGrid planning_grid;
    for (const bool grid : grids) {
      for (const chem::JkStorage storage : {chem::JkStorage::memory, chem::JkStorage::scratch,
                                            chem::JkStorage::recompute}) {
        chem::DfJkOptions options;
        options.storage = storage;
        options.comm = &comm;
        // Its presence and the size limit put the factor on the grid.
        options.dense = grid ? &planning_grid : nullptr;
        options.distributed_min_order = 1;
        const double minimum = chem::df_jk_minimum_bytes(storage, engine.nbf(), engine.naux(), engine.npacked(),
                                                         nocc, kLargestJkfitShell, ranks, grid);
        for (const double scale : {1.05, 1.5, 3.0, 10.0}) {
          options.memory_bytes = scale * minimum;
          const std::string where = fmt::format("{} ranks, {}, storage {}, budget {:.2f} x its minimum", ranks,
                                                grid ? "grid" : "replicated", chem::jk_storage_name(storage), scale);
          chem::DfJkPlan plan;
          EXPECT_NO_THROW(plan = chem::plan_df_jk(engine, jkfit, nocc, options)) << where;
          EXPECT_LE(plan.memory_bytes, options.memory_bytes) << where;
          if (storage == chem::JkStorage::scratch && scale < 2.0)
            EXPECT_LT(plan.fit_rows, engine.npacked()) << where << ": the fitting in chunks";
        }
      }
    }
  }
}
