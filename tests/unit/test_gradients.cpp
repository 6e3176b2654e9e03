// Analytic gradients: RHF (DF and exact J/K) and DF-MP2 (on either, with and without frozen core), against central
// finite differences of the program's own energies and against Psi4 1.3.2's gradient() (values recorded here; the
// live comparison is tests/psi4/live_gradient_test.py).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "chem/system/basis_set.hpp"
#include "chem/scf/df_jk.hpp"
#include "chem/mp2/dfmp2.hpp"
#include "chem/gradient/dfmp2_gradient.hpp"
#include "chem/gradient/pair_integrals.hpp"
#include "chem/integrals/integrals.hpp"
#include "chem/system/molecule.hpp"
#include "chem/scf/scf.hpp"
#include "chem/gradient/scf_gradient.hpp"
#include "chem/gradient/vibrations.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::chem::BasisSet;
using dfmp2::chem::Molecule;
using dfmp2::linalg::Matrix;
namespace chem = dfmp2::chem;

BasisSet basis(const std::string& name, const Molecule& molecule) {
  return chem::load_basis(name, molecule, DFMP2_SOURCE_DIR "/inputs/basis", "basis");
}

// The gradient tests' molecule: a water distorted out of its symmetry, so that every component is non-zero.
Molecule distorted_water() {
  return chem::parse_xyz_lines("O 0.0 0.05 0.117790\nH 0.0 0.755453 -0.471161\nH 0.03 -0.70 -0.50\n", "water");
}

// A converged RHF (1e-10) of a molecule in cc-pVDZ with its J/K kept for the gradient's orbital response: DF over
// cc-pVDZ-JKFIT in memory, or exact.
struct Rhf {
  Molecule molecule;
  BasisSet orbital, jkfit, ri;
  bool df = true;
  std::unique_ptr<dfmp2::linalg::Backend> backend = dfmp2::devices::make_backend("eigen");
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels{*backend, log};
  std::unique_ptr<chem::JkBuilder> jk;
  chem::ScfResult scf;

  static constexpr double kDConvergence = 1e-10;
  // `nearby`: the SCF of the same molecule at a nearby geometry, whose orbitals are the guess (else SAD).
  // `reference`: UHF or ROHF for an open shell (the molecule's multiplicity; the fixture's name is its first use).
  Rhf(const Molecule& m, bool density_fitted, const chem::ScfResult* nearby = nullptr,
      chem::ScfReference reference = chem::ScfReference::rhf)
      : molecule(m), orbital(basis("cc-pvdz", m)), jkfit(basis("cc-pvdz-jkfit", m)), ri(basis("cc-pvdz-ri", m)),
        df(density_fitted) {
    chem::ScfOptions options;
    options.e_convergence = 1e-11;
    options.d_convergence = kDConvergence;
    if (nearby != nullptr) {
      options.guess = chem::ScfGuess::orbitals;
      options.start_orbitals = &nearby->mo_coefficients;
    }
    const int nocc = reference == chem::ScfReference::rhf ? chem::closed_shell_occupied(m)
                                                          : chem::spin_occupied(m, m.multiplicity).first;
    if (df) {
      chem::DfJkOptions jk_options;
      jk_options.storage = chem::JkStorage::memory;
      auto engine = std::make_unique<chem::ThreeCenterEngine>(jkfit, orbital);
      const chem::DfJkPlan plan = chem::plan_df_jk(*engine, jkfit, nocc, jk_options);
      jk = chem::make_df_jk(std::move(engine), jkfit, nocc, kernels, jk_options, plan);
    } else {
      chem::ExactJkPlan plan;
      jk = chem::make_exact_jk(orbital, 1e9, kernels, plan);
    }
    scf = chem::run_scf(reference, m, orbital, *jk, options, kernels);
  }
  const BasisSet* jk_basis() const { return df ? &jkfit : nullptr; }

  // The DF-MP2 correlation energy from the energy's own kernel (chem::run_dfmp2), not the gradient's amplitudes.
  chem::DfMp2Result mp2_energy(int nfrozen) {
    const Matrix metric = chem::coulomb_metric(ri);
    const chem::DirectThreeIndex three_index(ri, orbital);
    chem::DfMp2Options options;
    options.nfrozen = nfrozen;
    const chem::DfMp2Input input = chem::dfmp2_input_of(scf, &metric, &three_index);
    const auto plan = chem::plan_for(input, options, kernels.backend(), 2.0 * (1 << 30));
    return chem::run_dfmp2(input, plan, options, kernels);
  }
  double mp2_correlation(int nfrozen) { return mp2_energy(nfrozen).correlation(); }
  chem::DfMp2Gradient mp2_gradient(int nfrozen, const chem::DfMp2GradientPlan& plan = {},
                                   double zvector_convergence = kDConvergence, chem::SpinScales scales = {},
                                   bool derivatives = true) {
    chem::DfMp2GradientInput in;
    in.derivatives = derivatives;
    in.scales = scales;
    in.plan = plan;
    in.scratch_folder = ::testing::TempDir();
    in.molecule = &molecule;
    in.basis = &orbital;
    in.ri_basis = &ri;
    in.jk_basis = jk_basis();
    in.scf = &scf;
    in.nfrozen = nfrozen;
    in.jk = jk.get();
    in.zvector_convergence = zvector_convergence;  // as the app does: the SCF's d_convergence
    return chem::dfmp2_gradient(in, kernels);
  }
};

// Central finite differences (steps of `h` bohr) of `energy` over every coordinate of `m`.
Matrix finite_difference_gradient(const Molecule& m, const std::function<double(const Molecule&)>& energy,
                                  double h = 1e-3) {
  Matrix g(static_cast<Eigen::Index>(m.atoms.size()), 3);
  for (std::size_t a = 0; a < m.atoms.size(); ++a) {
    for (int x = 0; x < 3; ++x) {
      Molecule plus = m, minus = m;
      (x == 0 ? plus.atoms[a].x : x == 1 ? plus.atoms[a].y : plus.atoms[a].z) += h / chem::kBohrPerAngstrom;
      (x == 0 ? minus.atoms[a].x : x == 1 ? minus.atoms[a].y : minus.atoms[a].z) -= h / chem::kBohrPerAngstrom;
      g(static_cast<Eigen::Index>(a), x) = (energy(plus) - energy(minus)) / (2 * h);
    }
  }
  return g;
}

void expect_gradient_near(const Matrix& actual, const Matrix& expected, double tolerance, const char* against) {
  ASSERT_EQ(actual.rows(), expected.rows());
  for (Eigen::Index a = 0; a < actual.rows(); ++a)
    for (int x = 0; x < 3; ++x)
      EXPECT_NEAR(actual(a, x), expected(a, x), tolerance) << against << ": atom " << a << " direction " << x;
}

// The RHF gradient with DF J/K (cc-pVDZ-JKFIT) and with the exact J/K (four-centre derivative integrals), against
// central finite differences of the converged SCF energy (1e-6 Eh/bohr) and against Psi4 1.3.2's gradient('scf')
// (scf_type df and pk, e_convergence 1e-11, d_convergence 1e-10, units angstrom, c1, no_reorient, no_com; measured
// 1.1e-10 and 2.3e-10 Eh/bohr apart at most); the forces sum to zero.
TEST(ScfGradient, RhfDensityFittedAndExactMatchFiniteDifferencesAndPsi4) {
  const Molecule mol = distorted_water();
  Matrix psi4_df(3, 3), psi4_pk(3, 3);
  psi4_df << -0.001071880389, 0.049045288865, 0.003499144641, 0.000234289806, -0.03361487249, 0.018348865394,
      0.000837590583, -0.015430416375, -0.021848010035;
  psi4_pk << -0.001071314807, 0.049048454596, 0.003473050232, 0.000233827068, -0.033609727952, 0.018363757615,
      0.00083748774, -0.015438726644, -0.021836807847;
  for (const bool df : {true, false}) {
    SCOPED_TRACE(df ? "DF" : "exact");
    Rhf rhf(mol, df);
    const Matrix analytic = chem::scf_gradient(mol, rhf.orbital, rhf.jk_basis(), rhf.scf, rhf.kernels);
    const Matrix numeric = finite_difference_gradient(mol, [&](const Molecule& m) { return Rhf(m, df).scf.energy; });
    expect_gradient_near(analytic, numeric, 1e-6, "finite differences");
    expect_gradient_near(analytic, df ? psi4_df : psi4_pk, 1e-8, "Psi4");
    EXPECT_NEAR(analytic.colwise().sum().cwiseAbs().maxCoeff(), 0.0, 1e-9);
  }
}

// The DF-MP2 gradient (SCF + MP2) against central finite differences (1e-3 bohr) of the SCF energy plus the energy
// kernel's DF-MP2 correlation energy, on DF and exact SCF, all electrons and frozen core: 1e-6 Eh/bohr. The
// gradient's own amplitudes give the energy kernel's energy, and the SCF gradient is rhf_gradient's.
TEST(DfMp2Gradient, MatchesFiniteDifferencesOnDfAndExactScfWithAndWithoutFrozenCore) {
  const Molecule mol = distorted_water();
  for (const bool df : {true, false}) {
    for (const int nfrozen : {0, 1}) {
      SCOPED_TRACE(std::string(df ? "DF" : "exact") + (nfrozen ? ", frozen core" : ", all electrons"));
      Rhf rhf(mol, df);
      const chem::DfMp2Gradient g = rhf.mp2_gradient(nfrozen);
      EXPECT_NEAR(g.correlation(), rhf.mp2_correlation(nfrozen), 1e-11);
      expect_gradient_near(g.scf_gradient, chem::scf_gradient(mol, rhf.orbital, rhf.jk_basis(), rhf.scf, rhf.kernels), 1e-12,
                           "rhf_gradient");
      const Matrix numeric = finite_difference_gradient(mol, [&](const Molecule& m) {
        Rhf displaced(m, df);
        return displaced.scf.energy + displaced.mp2_correlation(nfrozen);
      });
      expect_gradient_near(g.gradient, numeric, 1e-6, "finite differences");
      EXPECT_GT((g.gradient - g.scf_gradient).cwiseAbs().maxCoeff(), 1e-3);  // the MP2 part is there to check
      EXPECT_NEAR(g.gradient.colwise().sum().cwiseAbs().maxCoeff(), 0.0, 1e-9);
      EXPECT_LT(g.zvector_residual, 1e-8);
    }
  }
}

// The orbital response's J/K products: the DF builder's one-pass compute_response, and rotation_hessian with each
// choice of kept products (chem/scf/rotation_response.hpp: made on the first call, used on the second; made again
// for other orbitals), against compute_symmetric's J and K.
TEST(DfMp2Gradient, OrbitalResponseProductsMatchTheFullBuild) {
  Rhf rhf(distorted_water(), true);
  const auto nbf = static_cast<Eigen::Index>(rhf.orbital.nbf());
  const Matrix c_occ = rhf.scf.mo_coefficients.leftCols(rhf.scf.nocc);
  const Matrix c_vir = rhf.scf.mo_coefficients.rightCols(nbf - rhf.scf.nocc);
  for (const auto kept : {chem::RotationProducts::mo, chem::RotationProducts::occupied, chem::RotationProducts::none}) {
    SCOPED_TRACE(chem::rotation_products_name(kept));
    rhf.jk->keep_rotation_products(kept);
    for (int trial = 0; trial < 3; ++trial) {
      // The third trial with other "occupied" orbitals (their columns mixed): the kept products are made again.
      const Matrix occ = trial < 2 ? c_occ : Matrix(c_occ * Matrix::Identity(c_occ.cols(), c_occ.cols()).reverse());
      const Matrix z = Matrix::Random(nbf - rhf.scf.nocc, rhf.scf.nocc);
      const Matrix half = c_vir * z * occ.transpose();
      const Matrix m = 0.5 * (half + half.transpose());
      Matrix j, k, j1, kc1;
      rhf.jk->compute_symmetric(m, j, k);
      rhf.jk->compute_response(m, occ, j1, kc1);
      EXPECT_LT((j1 - j).cwiseAbs().maxCoeff(), 1e-12);
      EXPECT_LT((kc1 - k * occ).cwiseAbs().maxCoeff(), 1e-12);
      const Matrix expected = c_vir.transpose() * (4.0 * j - 2.0 * k) * occ;
      // An unrelaxed density's response (the Z-vector's right-hand side), asked before rotation_hessian: with `mo`
      // it makes the products the Z-vector then uses.
      const Matrix p_oo_half = Matrix::Random(occ.cols(), occ.cols()), p_vv_half = Matrix::Random(z.rows(), z.rows());
      const Matrix p_oo = p_oo_half + p_oo_half.transpose(), p_vv = p_vv_half + p_vv_half.transpose();
      Matrix j_p, k_p;
      rhf.jk->compute_symmetric(occ * p_oo * occ.transpose() + c_vir * p_vv * c_vir.transpose(), j_p, k_p);
      Matrix orbitals(nbf, nbf);
      orbitals << occ, c_vir;
      const Matrix unrelaxed_expected = orbitals.transpose() * (4.0 * j_p - 2.0 * k_p) * occ;
      const Matrix unrelaxed = rhf.jk->unrelaxed_response(c_vir, occ, p_oo, p_vv, rhf.kernels);
      EXPECT_LT((unrelaxed - unrelaxed_expected).cwiseAbs().maxCoeff(),
                1e-11 * std::max(1.0, unrelaxed_expected.cwiseAbs().maxCoeff()));
      const Matrix hessian = rhf.jk->rotation_hessian(c_vir, occ, z, rhf.kernels);
      EXPECT_LT((hessian - expected).cwiseAbs().maxCoeff(), 1e-11 * std::max(1.0, expected.cwiseAbs().maxCoeff()));
      // The diagonal (the Z-vector's preconditioner), with b_vv kept: element (a, i) of the operator applied to
      // the unit rotation e_ai, for a few of them.
      const Matrix diagonal = rhf.jk->rotation_hessian_diagonal();
      ASSERT_EQ(diagonal.size() > 0, kept == chem::RotationProducts::mo);
      for (const auto& [a, i] : {std::pair<Eigen::Index, Eigen::Index>{0, 0}, {3, 1}, {z.rows() - 1, z.cols() - 1}}) {
        if (diagonal.size() == 0) break;
        Matrix unit = Matrix::Zero(z.rows(), z.cols());
        unit(a, i) = 1.0;
        const Matrix applied = rhf.jk->rotation_hessian(c_vir, occ, unit, rhf.kernels);
        EXPECT_NEAR(diagonal(a, i), applied(a, i), 1e-12) << a << " " << i;
        EXPECT_GT(std::abs(diagonal(a, i)), 1e-3);  // not trivially zero
      }
      // The occupied block of a rotation's response (the energy-weighted density's), an occupied-virtual and a
      // symmetric occupied block, from the kept products where there are any.
      const Matrix r_vo = Matrix::Random(z.rows(), z.cols()), r_oo_half = Matrix::Random(z.cols(), z.cols());
      const Matrix r_oo = r_oo_half + r_oo_half.transpose();
      const Matrix m_vo = c_vir * r_vo * occ.transpose();
      const Matrix rotated = m_vo + m_vo.transpose() + occ * r_oo * occ.transpose();
      Matrix j_r, k_r;
      rhf.jk->compute_symmetric(rotated, j_r, k_r);
      const Matrix occupied_expected = occ.transpose() * (4.0 * j_r - 2.0 * k_r) * occ;
      const Matrix occupied = rhf.jk->occupied_rotation_response(c_vir, occ, r_vo, r_oo, rhf.kernels);
      EXPECT_LT((occupied - occupied_expected).cwiseAbs().maxCoeff(),
                1e-11 * std::max(1.0, occupied_expected.cwiseAbs().maxCoeff()));
    }
    rhf.jk->release_response();
  }
}

// The same on ammonia (frozen core) and a water dimer (all electrons), DF-SCF: 1e-6 Eh/bohr.
TEST(DfMp2Gradient, MatchesFiniteDifferencesOnAmmoniaAndAWaterDimer) {
  const std::pair<const char*, int> cases[] = {
      {"N 0.0 0.0 0.12\nH 0.0 0.95 -0.27\nH 0.82 -0.47 -0.29\nH -0.80 -0.48 -0.25\n", 1},
      {"O 0.0 0.05 0.117790\nH 0.0 0.755453 -0.471161\nH 0.03 -0.70 -0.50\n"
       "O 0.1 0.0 3.0\nH 0.0 0.76 2.45\nH 0.0 -0.74 2.40\n", 0}};
  for (const auto& [xyz, nfrozen] : cases) {
    SCOPED_TRACE(xyz);
    const Molecule mol = chem::parse_xyz_lines(xyz, "test");
    Rhf rhf(mol, true);
    const chem::DfMp2Gradient g = rhf.mp2_gradient(nfrozen);
    const Matrix numeric = finite_difference_gradient(mol, [&, nf = nfrozen](const Molecule& m) {
      Rhf displaced(m, true);
      return displaced.scf.energy + displaced.mp2_correlation(nf);
    });
    expect_gradient_near(g.gradient, numeric, 1e-6, "finite differences");
  }
}

// Scaled spin components: the gradients of SCS-MP2 (6/5, 1/3), SOS-MP2 (1.3, 0) and a user's pair (0.5, 0.8) of the
// scaled energy c_os E_os + c_ss E_ss, DF-SCF, all electrons and frozen core, against central finite differences of
// that energy from the energy's own kernel (1e-6 Eh/bohr); the components the gradient reports stay unscaled.
TEST(DfMp2Gradient, ScaledSpinComponentsMatchFiniteDifferencesOfTheScaledEnergy) {
  const Molecule mol = chem::parse_xyz_lines("O 0.0 0.05 0.117790\nH 0.0 0.755453 -0.471161\nH 0.03 -0.70 -0.50\n",
                                             "water");
  Rhf rhf(mol, true);
  const chem::SpinScales cases[] = {{chem::kScsOppositeSpinScale, chem::kScsSameSpinScale}, {1.3, 0.0}, {0.5, 0.8}};
  for (const int nfrozen : {0, 1}) {
    // The scaled energy is linear in the scales: one pass of finite differences per spin component.
    Matrix scf_part, opposite, same;
    const double h = 1e-3;
    scf_part = finite_difference_gradient(mol, [&](const Molecule& m) { return Rhf(m, true).scf.energy; }, h);
    opposite = finite_difference_gradient(mol, [&](const Molecule& m) {
      return Rhf(m, true).mp2_energy(nfrozen).opposite_spin; }, h);
    same = finite_difference_gradient(mol, [&](const Molecule& m) {
      return Rhf(m, true).mp2_energy(nfrozen).same_spin; }, h);
    const chem::DfMp2Result energy = rhf.mp2_energy(nfrozen);
    for (const chem::SpinScales& c : cases) {
      SCOPED_TRACE(testing::Message() << "frozen " << nfrozen << ", scales " << c.opposite_spin << ", " << c.same_spin);
      const chem::DfMp2Gradient g = rhf.mp2_gradient(nfrozen, {}, Rhf::kDConvergence, c);
      expect_gradient_near(g.gradient, scf_part + c.opposite_spin * opposite + c.same_spin * same, 1e-6,
                           "finite differences");
      EXPECT_NEAR(g.opposite_spin, energy.opposite_spin, 1e-10);
      EXPECT_NEAR(g.same_spin, energy.same_spin, 1e-10);
    }
    // And differs from MP2's by the scaled components' own derivatives (not a test that cannot fail: SOS drops
    // the same-spin part whole).
    const Matrix mp2 = rhf.mp2_gradient(nfrozen).gradient, sos = rhf.mp2_gradient(nfrozen, {}, Rhf::kDConvergence,
                                                                                 {1.3, 0.0}).gradient;
    EXPECT_GT((mp2 - sos).cwiseAbs().maxCoeff(), 1e-4);
  }
}

// The gradient's three-index tensors (and the separable part's half-transformed integrals) cut into blocks of 1, 2
// or 3 orbitals (uneven), with AO blocks of one shell, in memory and on scratch, the Z-vector's DF products kept in
// the orbitals' basis, their occupied blocks only, or rebuilt, the pair integrals kept for their mirror pairs or
// computed twice, the amplitudes of 3, 2 and 1 rows at once: the gradient and energy of one block in memory
// (nothing kept), to 1e-12. The Z-vector converged to 1e-12 here: its preconditioner differs with the kept products
// (the exact diagonal with `mo`), and with it the iterations' path, by what the gradient's convergence allows.
TEST(DfMp2Gradient, BlocksAndScratchGiveTheSameGradient) {
  constexpr double kZvectorConvergence = 1e-12;
  const Molecule dimer = chem::parse_xyz_lines("O 0.0 0.05 0.117790\nH 0.0 0.755453 -0.471161\nH 0.03 -0.70 -0.50\n"
                                               "O 0.1 0.0 3.0\nH 0.0 0.76 2.45\nH 0.0 -0.74 2.40\n", "dimer");
  Rhf rhf(dimer, true);
  for (const int nfrozen : {0, 2}) {
    const chem::DfMp2Gradient whole = rhf.mp2_gradient(nfrozen, {}, kZvectorConvergence);
    for (const bool scratch : {false, true}) {
      for (const int block : {1, 2, 3}) {
        SCOPED_TRACE(testing::Message() << "frozen " << nfrozen << ", block " << block << (scratch ? ", scratch" : ""));
        chem::DfMp2GradientPlan plan;
        plan.occupied_block = block;
        plan.aux_block = 1;  // one shell at a time
        plan.on_scratch = scratch;
        plan.zvector_products = block == 1   ? chem::RotationProducts::occupied
                                : block == 2 ? chem::RotationProducts::none
                                             : chem::RotationProducts::mo;
        plan.keep_pair_integrals = block != 2;
        plan.amplitude_rows = 4 - block;  // 3 with blocks of 1: as many as there are
        const chem::DfMp2Gradient g = rhf.mp2_gradient(nfrozen, plan, kZvectorConvergence);
        expect_gradient_near(g.gradient, whole.gradient, 1e-12, "one block in memory");
        EXPECT_NEAR(g.correlation(), whole.correlation(), 1e-13);
        EXPECT_NEAR(g.relaxed_dipole[2], whole.relaxed_dipole[2], 1e-12);
      }
    }
  }
}

// An open shell's plan (UHF, issue 45): both spins' three-index tensors (scratch: twice the closed shell's of the
// alpha count) and both spins' Z-vector products, given up for the occupied ones as the closed shell's are.
TEST(DfMp2Gradient, OpenShellPlanHoldsBothSpins) {
  chem::DfMp2GradientSizes closed{384, 80, 16, 1344, 1900, 7, 2};
  chem::DfMp2GradientSizes open = closed;
  open.nocc_beta = 79;
  const auto rhf = chem::plan_dfmp2_gradient(closed, 64e9, chem::Mp2Storage::scratch);
  const auto uhf = chem::plan_dfmp2_gradient(open, 64e9, chem::Mp2Storage::scratch);
  EXPECT_NEAR(uhf.scratch_bytes, 2.0 * rhf.scratch_bytes, 1.0);
  const auto kept = chem::plan_dfmp2_gradient(open, 64e9, chem::Mp2Storage::automatic);
  EXPECT_EQ(kept.zvector_products, chem::RotationProducts::mo);
  const double both = chem::rotation_products_bytes(chem::RotationProducts::mo, 384, 80, 304, 1900) +
                      chem::rotation_products_bytes(chem::RotationProducts::mo, 384, 79, 305, 1900);
  EXPECT_GE(kept.memory_bytes, both);
  const double occupied = chem::rotation_products_bytes(chem::RotationProducts::occupied, 384, 80, 304, 1900) +
                          chem::rotation_products_bytes(chem::RotationProducts::occupied, 384, 79, 305, 1900);
  const auto fewer = chem::plan_dfmp2_gradient(open, kept.memory_bytes - 0.5 * (both - occupied),
                                               chem::Mp2Storage::automatic);
  EXPECT_EQ(fewer.zvector_products, chem::RotationProducts::occupied);
  EXPECT_GT(kept.memory_bytes, chem::plan_dfmp2_gradient(closed, 64e9, chem::Mp2Storage::automatic).memory_bytes);
}

// The relaxed density without the derivative integrals (derivatives false, for MP2 properties): every reference's
// relaxed density and dipoles as the gradient's own, to rounding, and no gradient.
TEST(DfMp2Gradient, RelaxedDensityWithoutDerivativeIntegrals) {
  Molecule cation = distorted_water();
  cation.charge = 1;
  cation.multiplicity = 2;
  for (const auto& [reference, frozen] : {std::pair{chem::ScfReference::rhf, 1}, std::pair{chem::ScfReference::uhf, 1},
                                          std::pair{chem::ScfReference::rohf, 0}}) {
    SCOPED_TRACE(chem::reference_label(reference));
    Rhf r(reference == chem::ScfReference::rhf ? distorted_water() : cation, true, nullptr, reference);
    const chem::DfMp2Gradient full = r.mp2_gradient(frozen);
    const chem::DfMp2Gradient density = r.mp2_gradient(frozen, {}, Rhf::kDConvergence, {}, false);
    EXPECT_EQ(density.gradient.size(), 0);
    EXPECT_EQ(density.scf_gradient.size(), 0);
    EXPECT_GT(full.gradient.size(), 0);
    EXPECT_NEAR(density.correlation(), full.correlation(), 1e-12);
    EXPECT_LT((density.relaxed_density - full.relaxed_density).cwiseAbs().maxCoeff(), 1e-10);
    for (int x = 0; x < 3; ++x) EXPECT_NEAR(density.relaxed_dipole[x], full.relaxed_dipole[x], 1e-10);
    EXPECT_GT(std::abs(density.relaxed_dipole[2] - density.scf_dipole[2]), 1e-3);  // the correlation moves it
  }
}

// The plan: in memory with one block when it fits; fewer orbitals per block, then scratch, as `memory` shrinks; the
// least memory named when nothing fits; mp2_storage obeyed. (An exact SCF: no DF two-electron derivative, which is
// held whole, to dominate the peak.)
TEST(DfMp2Gradient, PlanFitsItsBlocksToMemory) {
  const chem::DfMp2GradientSizes sizes{384, 80, 16, 1344, 0, 7, 2};
  const auto kept_pairs = chem::plan_dfmp2_gradient(sizes, 64e9, chem::Mp2Storage::automatic);
  EXPECT_TRUE(kept_pairs.keep_pair_integrals);
  EXPECT_EQ(kept_pairs.occupied_block, 64);
  // The pair integrals (ka|ib), k < i (64 active, 304 virtual), held beside the rest, are given up (after smaller
  // blocks) before anything goes to scratch.
  EXPECT_GT(kept_pairs.memory_bytes, 8.0 * 64 * 63 / 2 * 304.0 * 304.0);
  double budget = kept_pairs.memory_bytes;
  while (chem::plan_dfmp2_gradient(sizes, budget, chem::Mp2Storage::automatic).keep_pair_integrals) budget *= 0.95;
  const auto all = chem::plan_dfmp2_gradient(sizes, budget, chem::Mp2Storage::automatic);
  EXPECT_LT(all.memory_bytes, 0.5 * kept_pairs.memory_bytes);
  EXPECT_FALSE(all.on_scratch);
  EXPECT_EQ(all.occupied_block, 64);
  EXPECT_EQ(all.aux_block, 64);
  EXPECT_EQ(all.scratch_bytes, 0.0);
  const auto scratch = chem::plan_dfmp2_gradient(sizes, 64e9, chem::Mp2Storage::scratch);
  EXPECT_TRUE(scratch.on_scratch);
  EXPECT_NEAR(scratch.scratch_bytes, 8.0 * 1344 * 64 * (2 * 304 + 80), 1.0);  // B, B_oo and Gamma
  for (const double fraction : {0.5, 0.25}) {
    const auto tight = chem::plan_dfmp2_gradient(sizes, fraction * all.memory_bytes, chem::Mp2Storage::automatic);
    EXPECT_LE(tight.memory_bytes, fraction * all.memory_bytes);
    EXPECT_TRUE(tight.on_scratch);
  }
  try {
    chem::plan_dfmp2_gradient(sizes, 1e6, chem::Mp2Storage::automatic);
    ADD_FAILURE() << "1 MB fits";
  } catch (const dfmp2::PhaseTooLarge& e) {
    EXPECT_GT(e.needed(), 1e6);
    EXPECT_LT(e.needed(), 0.25 * all.memory_bytes);
    const auto least = chem::plan_dfmp2_gradient(sizes, e.needed(), chem::Mp2Storage::automatic);
    EXPECT_EQ(least.occupied_block, 1);
  }
  EXPECT_THROW(chem::plan_dfmp2_gradient(sizes, 0.5 * all.memory_bytes, chem::Mp2Storage::memory),
               dfmp2::PhaseTooLarge);
  // With a DF-SCF, its two-electron derivative's half-transformed integrals (2 naux_jk nbf nocc) are a floor.
  const chem::DfMp2GradientSizes df{384, 80, 16, 1344, 1900, 7, 2};
  EXPECT_GE(chem::plan_dfmp2_gradient(df, 64e9, chem::Mp2Storage::scratch).memory_bytes, 8.0 * 2 * 1900 * 384 * 80);
  // Its Z-vector keeps the MO-basis products when they fit, the occupied ones when only they do.
  const auto kept = chem::plan_dfmp2_gradient(df, 64e9, chem::Mp2Storage::automatic);
  EXPECT_EQ(kept.zvector_products, chem::RotationProducts::mo);
  const double mo = chem::rotation_products_bytes(chem::RotationProducts::mo, 384, 80, 304, 1900);
  const double occupied = chem::rotation_products_bytes(chem::RotationProducts::occupied, 384, 80, 304, 1900);
  const auto fewer =
      chem::plan_dfmp2_gradient(df, kept.memory_bytes - 0.5 * (mo - occupied), chem::Mp2Storage::automatic);
  EXPECT_EQ(fewer.zvector_products, chem::RotationProducts::occupied);
  // Over three ranks, a block of orbitals for each at least (64 active: blocks of 22).
  chem::DfMp2GradientSizes ranks = sizes;
  ranks.ranks = 3;
  const auto over_ranks = chem::plan_dfmp2_gradient(ranks, 64e9, chem::Mp2Storage::automatic);
  EXPECT_EQ(over_ranks.occupied_block, 22);
  // Each rank keeps the pair integrals of its own rows only, with every other rank's row and its own later ones: the
  // most, the last rank's 22 rows (blocks of 21, 21 and 22 orbitals, one per rank); well under the whole triangle.
  EXPECT_TRUE(over_ranks.keep_pair_integrals);
  const double whole = 64.0 * 63 / 2 * 304.0 * 304.0, most = (22.0 * 42 + 22.0 * 21 / 2) * 304.0 * 304.0;
  EXPECT_EQ(chem::gradient_detail::kept_pair_doubles(64, 304, 22, 3), most);
  EXPECT_EQ(chem::gradient_detail::kept_pair_doubles(64, 304, 22, 1), whole);
  EXPECT_LT(most, 0.6 * whole);
}

// Over ranks, each holds its share of the three-index tensors (its blocks of orbitals, its auxiliary functions), not
// the whole: the least memory that holds them in memory falls with the rank count, to about a quarter of the
// tensors on four ranks (with the shapes they take side by side while they change hands).
TEST(DfMp2Gradient, PlanHoldsEachRanksShareOfTheTensors) {
  auto least_in_memory = [](int ranks) {
    chem::DfMp2GradientSizes sizes{384, 80, 16, 1344, 1900, 7, 2, ranks};
    try {
      chem::plan_dfmp2_gradient(sizes, 1e6, chem::Mp2Storage::memory);
    } catch (const dfmp2::PhaseTooLarge& e) {
      return e.needed();
    }
    ADD_FAILURE() << "1 MB fits";
    return 0.0;
  };
  const double one = least_in_memory(1), two = least_in_memory(2), four = least_in_memory(4);
  // One rank: at least H (nbf nocc naux_jk) whole in memory.
  EXPECT_GE(one, 8.0 * 384 * 80 * 1900);
  EXPECT_LT(two, 0.8 * one);
  EXPECT_LT(four, 0.5 * one);
  EXPECT_LT(four, 0.75 * two);
}

// Against Psi4 1.3.2 (gradient('mp2') and properties('mp2', properties=['dipole']), scf_type df, mp2_type df,
// cc-pVDZ with its default JKFIT and RI bases, e_convergence 1e-11, d_convergence 1e-10, angstrom, c1, no_reorient,
// no_com), all electrons and frozen core: the gradient within 1e-8 Eh/bohr, the relaxed dipole (Psi4 prints
// Debye: 2.541746451895025 D per a.u., CODATA 2014) within 1e-6 a.u. Psi4 1.3 has no DF-MP2 gradient on an exact
// SCF ("DF-MP2 gradients need DF-SCF reference"): that case has the finite differences above.
TEST(DfMp2Gradient, MatchesPsi4WithAndWithoutFrozenCore) {
  const Molecule mol = distorted_water();
  constexpr double kDebye = 2.541746451895025;
  Matrix psi4_all(3, 3), psi4_fc(3, 3);
  psi4_all << -0.00037634624114657304, 0.04934273240301727, -0.025589067207670277, 0.00011387341625021305,
      -0.04545865695307467, 0.03322969917165369, 0.0002624728248958071, -0.003884075449973965, -0.007640631963855931;
  psi4_fc << -0.0003597419159051035, 0.049417075898337055, -0.026339621239448753, 0.00011355006199908048,
      -0.04593242101972063, 0.033638631177902764, 0.0002461918539079139, -0.003484654878639838, -0.007299009938503909;
  const double dipole_all[3] = {0.04910730124438952, -0.03500488603027583, -2.006979610238492};
  const double dipole_fc[3] = {0.04908592104068402, -0.03490766013893268, -2.0061742629538193};
  Rhf rhf(mol, true);
  for (const int nfrozen : {0, 1}) {
    SCOPED_TRACE(nfrozen ? "frozen core" : "all electrons");
    const chem::DfMp2Gradient g = rhf.mp2_gradient(nfrozen);
    expect_gradient_near(g.gradient, nfrozen ? psi4_fc : psi4_all, 1e-8, "Psi4");
    for (int x = 0; x < 3; ++x)
      EXPECT_NEAR(g.relaxed_dipole[std::size_t(x)], (nfrozen ? dipole_fc : dipole_all)[x] / kDebye, 1e-6);
  }
}

// Central differences of a gradient that is exactly linear in the coordinates give back its Hessian; a diatomic
// with a bond force constant k (Eh/bohr^2) has one vibration, sqrt(k / mu) in cm^-1 with the two-body mass mu, and
// five rigid motions projected out (a linear molecule); a triatomic six.
// The Hessian's displaced SCFs start from the undisplaced orbitals (orthonormalised in the displaced overlap): the
// same energy and orbitals' density as from SAD, in fewer iterations; with DF and exact J/K.
TEST(Vibrations, DisplacedScfFromTheUndisplacedOrbitals) {
  const Molecule water = distorted_water();
  Molecule displaced = water;
  displaced.atoms[1].y += 0.005 / chem::kBohrPerAngstrom;  // the Hessian's step
  for (const bool df : {true, false}) {
    const Rhf undisplaced(water, df);
    const Rhf from_sad(displaced, df), from_orbitals(displaced, df, &undisplaced.scf);
    EXPECT_NEAR(from_orbitals.scf.energy, from_sad.scf.energy, 1e-10) << (df ? "DF" : "exact");
    const Eigen::Index nocc = from_sad.scf.nocc;
    const Matrix d_sad = from_sad.scf.mo_coefficients.leftCols(nocc) * from_sad.scf.mo_coefficients.leftCols(nocc).transpose();
    const Matrix d_orb =
        from_orbitals.scf.mo_coefficients.leftCols(nocc) * from_orbitals.scf.mo_coefficients.leftCols(nocc).transpose();
    EXPECT_LT((d_orb - d_sad).cwiseAbs().maxCoeff(), 1e-8) << (df ? "DF" : "exact");
    EXPECT_LT(from_orbitals.scf.iterations, from_sad.scf.iterations) << (df ? "DF" : "exact");
  }
}

TEST(Vibrations, FiniteDifferencesAndHarmonicAnalysisOfAModelPotential) {
  const Molecule h2 = chem::parse_xyz_lines("H 0 0 0\nH 0 0 0.74\n", "h2");
  const double k = 0.37;
  Matrix bond = Matrix::Zero(6, 6);  // k (z2 - z1)^2 / 2
  bond(2, 2) = bond(5, 5) = k;
  bond(2, 5) = bond(5, 2) = -k;
  auto linear_gradient = [&](const Molecule& m, int) {
    Eigen::VectorXd x(6);
    for (int a = 0; a < 2; ++a) {
      x(3 * a) = m.atoms[std::size_t(a)].x * chem::kBohrPerAngstrom;
      x(3 * a + 1) = m.atoms[std::size_t(a)].y * chem::kBohrPerAngstrom;
      x(3 * a + 2) = m.atoms[std::size_t(a)].z * chem::kBohrPerAngstrom;
    }
    const Eigen::VectorXd g = bond * x;
    return Matrix(Eigen::Map<const Matrix>(g.data(), 3, 2).transpose());
  };
  const Matrix hessian = chem::finite_difference_hessian(h2, linear_gradient);
  EXPECT_LT((hessian - bond).cwiseAbs().maxCoeff(), 1e-9);
  const chem::Vibrations v = chem::harmonic_analysis(h2, hessian);
  EXPECT_EQ(v.projected, 5);
  ASSERT_EQ(v.frequencies.size(), 1);
  const double mu = chem::isotopic_mass(1) / 2.0;
  // sqrt(Eh / (amu bohr^2)) = 5140.4871446 cm^-1 (CODATA 2014 constants, as Psi4 1.3).
  EXPECT_NEAR(v.frequencies(0), std::sqrt(k / mu) * 5140.4871446, 1e-4);
  // The normal mode's reduced mass (1 / |Cartesian displacement|^2 of the unit mass-weighted mode, as Psi4 and
  // Gaussian print it): a hydrogen's mass for H2, not the two-body mu.
  EXPECT_NEAR(v.reduced_masses(0), chem::isotopic_mass(1), 1e-9);
  EXPECT_NEAR(std::abs(v.modes(2, 0)), std::sqrt(0.5), 1e-12);  // the two atoms move apart along z

  const Molecule water = distorted_water();
  EXPECT_EQ(chem::harmonic_analysis(water, Matrix::Identity(9, 9)).projected, 6);
  EXPECT_NEAR(chem::isotopic_mass(53), 126.9044719, 1e-9);  // iodine-127 (qcelemental's AME2016 value)
  EXPECT_NEAR(chem::isotopic_mass(86), 222.0175782, 1e-9);  // radon-222, the longest-lived
  EXPECT_THROW(chem::isotopic_mass(87), dfmp2::UnsupportedError);
}

}  // namespace
