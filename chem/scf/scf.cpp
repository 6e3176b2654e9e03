// The SCF iterations: one loop for RHF, UHF and ROHF (iterate), each reference an OrbitalUpdate of its own.
#include "chem/scf/scf.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "chem/scf/scf_detail.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using namespace scf_detail;

namespace {

// An overflow anywhere upstream (integrals, J/K) shows in the energy or the gradient first; diagonalising NaNs
// would fail less clearly.
void require_finite(int iteration, double energy, double rms) {
  if (!std::isfinite(energy) || !std::isfinite(rms)) {
    throw NumericalError(fmt::format("SCF iteration {}: the energy ({}) or the orbital gradient ({}) is not finite",
                                     iteration, energy, rms));
  }
}

[[noreturn]] void not_converged(const ScfOptions& options, const ScfResult& result) {
  const auto& last = result.history.back();
  throw NumericalError(fmt::format("SCF did not converge in {} iterations (last energy change {:.3e}, gradient RMS "
                                   "{:.3e}); raise scf.max_iterations or loosen scf.e_convergence/d_convergence",
                                   options.max_iterations, last.delta_energy, last.gradient_rms));
}

// J[D] and K[D] of D = c_occ c_occ^T. A spin without electrons (the beta spin of H, H2+ or Li2+) has nothing to
// build: both are zero, and the builders are not asked for products of empty matrices.
void coulomb_and_exchange(JkBuilder& jk, const Matrix& c_occ, Matrix& j, Matrix& k, bool fp32, int slot) {
  if (c_occ.cols() == 0) {
    j = Matrix::Zero(c_occ.rows(), c_occ.rows());
    k = j;
    return;
  }
  jk.compute(c_occ, j, k, fp32, slot);
}

// What every reference needs before its iterations: the one-electron matrices, the orthogonaliser and the guess
// (a factor c of the guessed density per spin, D_s = c c^T).
struct ScfStart {
  Matrix s, h, x, guess;
  Matrix guess_beta;  // an open shell's beta orbitals brought from a nearby geometry (ScfOptions::start_orbitals_beta)
  double nuclear_repulsion = 0;
};

// Occupied orbitals of a nearby geometry, orthonormal again in this geometry's overlap: C (C^T S C)^-1/2 (Loewdin),
// the orbitals closest to them that are; their density is the guess. The functions moved with their atoms, so the
// coefficients still describe nearly the same orbitals, and the SCF starts close to where it converges.
Matrix orbitals_moved_here(const Matrix* orbitals, const Matrix& s, int nocc) {
  if (orbitals == nullptr || orbitals->rows() != s.rows() || orbitals->cols() < nocc)
    throw std::logic_error("scf: the orbitals guess needs the occupied orbitals of the same basis");
  const Matrix c = orbitals->leftCols(nocc);
  return c * orthogonaliser(c.transpose() * s * c);
}

// Orbitals of another basis of the same molecule (ScfOptions::start_basis) in this one: S^-1 <this|start> C, S^-1 as
// x x^T through the orthogonaliser (which drops the near-dependent directions), then orthonormalised. A smaller
// basis's occupied orbitals have fewer columns than most_occupied only when that basis had fewer electrons' worth of
// functions: then the first ones the projection gives.
Matrix orbitals_projected_here(const Matrix& orbitals, const BasisSet& start, const BasisSet& here, const ScfStart& st,
                               int nocc) {
  if (orbitals.rows() != start.nbf() || orbitals.cols() < nocc)
    throw std::logic_error("scf: the projected guess needs the occupied orbitals of its basis");
  const Matrix projected = st.x * (st.x.transpose() * (overlap_matrix(here, start) * orbitals.leftCols(nocc)));
  return orbitals_moved_here(&projected, st.s, nocc);
}

// The field's terms (ScfOptions::electric_field): -F . <m|r|n> in h, F . sum_A Z_A R_A in the nuclei's energy.
void add_electric_field(const Molecule& molecule, const BasisSet& basis, const std::array<double, 3>& field,
                        Matrix& h, double& nuclear) {
  if (field == std::array<double, 3>{}) return;
  const std::array<Matrix, 3> r = dipole_matrices(basis, {0.0, 0.0, 0.0});
  for (std::size_t i = 0; i < 3; ++i) {
    h -= field[i] * r[i];
    for (const Atom& atom : molecule.atoms)
      nuclear += field[i] * atom.nuclear_charge() * (i == 0 ? atom.x : i == 1 ? atom.y : atom.z) * kBohrPerAngstrom;
  }
}

// The point charges' terms (ScfOptions::external_charges): their potential in h, their interaction with the nuclei.
void add_external_charges(const Molecule& molecule, const BasisSet& basis,
                          const std::vector<std::pair<double, std::array<double, 3>>>& charges, Matrix& h,
                          double& nuclear) {
  if (charges.empty()) return;
  h += point_charge_matrix(basis, charges);
  for (const Atom& atom : molecule.atoms)
    for (const auto& [q, r] : charges)
      nuclear += atom.nuclear_charge() * q /
                 std::hypot(atom.x * kBohrPerAngstrom - r[0], atom.y * kBohrPerAngstrom - r[1],
                            atom.z * kBohrPerAngstrom - r[2]);
}

ScfStart start_scf(const Molecule& molecule, const BasisSet& basis, int most_occupied, const ScfOptions& options,
                   linalg::Kernels& kernels) {
  if (most_occupied > basis.nbf()) {
    throw InputError(fmt::format("molecule: {} occupied orbitals but only {} basis functions", most_occupied,
                                 basis.nbf()));
  }
  ScfStart st;
  st.nuclear_repulsion = nuclear_repulsion_energy(molecule);
  Stopwatch one_clock;
  st.s = overlap_matrix(basis);
  st.h = kinetic_matrix(basis) + nuclear_attraction_matrix(basis, molecule) + core_potential_matrix(basis, molecule);
  add_electric_field(molecule, basis, options.electric_field, st.h, st.nuclear_repulsion);
  add_external_charges(molecule, basis, options.external_charges, st.h, st.nuclear_repulsion);
  kernels.record_host(step_name(ScfStep::integrals), "one_electron", one_clock.seconds(), {0, 24.0 * double(st.s.size())});
  st.x = orthogonaliser(st.s, &kernels, &options);
  Stopwatch guess_clock;
  // The core guess occupies the most occupied spin's count; each spin takes its own columns of it below.
  switch (options.guess) {
    case ScfGuess::core: st.guess = diagonalise(st.h, st.x, kernels, &options).c.leftCols(most_occupied); break;
    case ScfGuess::sad: st.guess = sad_guess(molecule, basis, kernels); break;
    case ScfGuess::orbitals:
      if (options.start_basis != nullptr) {
        st.guess = orbitals_projected_here(*options.start_orbitals, *options.start_basis, basis, st, most_occupied);
        if (options.start_orbitals_beta != nullptr)
          st.guess_beta =
              orbitals_projected_here(*options.start_orbitals_beta, *options.start_basis, basis, st, most_occupied);
        break;
      }
      st.guess = orbitals_moved_here(options.start_orbitals, st.s, most_occupied);
      if (options.start_orbitals_beta != nullptr)
        st.guess_beta = orbitals_moved_here(options.start_orbitals_beta, st.s, most_occupied);
      break;
  }
  kernels.record_host(step_name(ScfStep::guess), scf_guess_name(options.guess), guess_clock.seconds(), {0, 0});
  return st;
}

// A spin's guess: the SAD factor as it is (every spin starts from half the atoms' density), or the first nocc
// orbitals of the core guess or of the orbitals brought from a nearby geometry (the beta spin's own where they were
// brought: an open shell's two spins may hole different orbitals, and alpha's for both can land in another state).
Matrix spin_guess(const ScfStart& st, const ScfOptions& options, int nocc, bool beta = false) {
  if (options.guess == ScfGuess::sad) return st.guess;
  const Matrix& c = beta && st.guess_beta.size() > 0 ? st.guess_beta : st.guess;
  return c.leftCols(nocc);
}

// <S^2> = Sz (Sz + 1) + n_beta - sum_ij |<i alpha | j beta>|^2 (Szabo and Ostlund, eq. 2.271).
double s_squared(const ScfResult& r, const Matrix& s) {
  const Matrix overlap = r.mo_coefficients.leftCols(r.nocc).transpose() * s * r.mo_coefficients_beta.leftCols(r.nocc_beta);
  const double sz = 0.5 * double(r.nocc - r.nocc_beta);
  return sz * (sz + 1.0) + double(r.nocc_beta) - overlap.squaredNorm();
}

// One spin's semicanonical orbitals from orbitals `c` (AO, nbf x nmo) whose first `nocc` are that spin's occupied
// ones: `fock` (AO) diagonalised within the occupied and within the virtual orbitals, and the spin's singles term
// of each occupied orbital i, -sum_a |f_ia|^2 / (e_a - e_i).
struct Semicanonical {
  Matrix c;
  Vector eps;
  Vector singles;
};
Semicanonical semicanonical(const Matrix& c, int nocc, const Matrix& fock) {
  const Index nmo = c.cols(), nvir = nmo - nocc;
  Semicanonical out{Matrix(c.rows(), nmo), Vector(nmo), Vector::Zero(nocc)};
  auto diagonal_block = [&](Index first, Index count) {
    if (count == 0) return;
    const Matrix part = c.middleCols(first, count);
    const Eigen::SelfAdjointEigenSolver<Matrix> eig(part.transpose() * fock * part);
    out.c.middleCols(first, count) = part * eig.eigenvectors();
    out.eps.segment(first, count) = eig.eigenvalues();
  };
  diagonal_block(0, nocc);
  diagonal_block(nocc, nvir);
  const Matrix f_ov = out.c.leftCols(nocc).transpose() * fock * out.c.rightCols(nvir);
  for (Index i = 0; i < nocc; ++i)
    for (Index a = 0; a < nvir; ++a) out.singles[i] -= f_ov(i, a) * f_ov(i, a) / (out.eps[nocc + a] - out.eps[i]);
  return out;
}


// One spin of the SCF: its occupied count, the electrons each of its orbitals holds (2 in RHF, where one set of
// orbitals serves both spins; 1 in UHF and ROHF), and its occupied orbitals as the iterations go (D_s = c_occ c_occ^T).
struct Spin {
  int nocc = 0;
  double electrons_per_orbital = 2.0;
  Matrix c_occ;
};

// What makes RHF, UHF and ROHF differ inside the iterations: how the spins' Fock matrices become the matrix DIIS
// extrapolates, with the orbital gradient beside it, and how the extrapolated matrix becomes each spin's occupied
// orbitals. iterate() does the rest, the same for all three: J/K, Fock matrices, energy, DIIS, convergence.
class OrbitalUpdate {
 public:
  struct FockStep {
    Matrix extrapolated;  // what DIIS extrapolates
    Matrix gradient;      // the orbital gradient beside it, zero at convergence
    bool has_gradient = true;  // false while there are no orbitals to take a gradient in (a density guess)
  };
  virtual ~OrbitalUpdate() = default;
  // From each spin's Fock matrix and density (AO).
  virtual FockStep fock_step(const std::vector<Matrix>& fock, const std::vector<Matrix>& density) = 0;
  // Each spin's occupied orbitals (spins[s].c_occ) from the (extrapolated) matrix.
  virtual void occupy(const Matrix& extrapolated, std::vector<Spin>& spins) = 0;
  // At convergence, from the converged (not extrapolated) Fock matrices: the orbitals that go on to MP2.
  virtual void finish(const std::vector<Matrix>& fock) = 0;
};

// RHF and UHF: each spin's orbitals diagonalise its own Fock matrix; the spins' Fock matrices and orbital gradients
// X^T (F_s D_s S - S D_s F_s) X side by side in one DIIS (extrapolated with the same coefficients).
class SpinFockUpdate final : public OrbitalUpdate {
 public:
  SpinFockUpdate(const Matrix& s, const Matrix& x, const ScfOptions& options, linalg::Kernels& kernels)
      : s_(s), x_(x), options_(options), kernels_(kernels) {}
  FockStep fock_step(const std::vector<Matrix>& fock, const std::vector<Matrix>& density) override {
    const Index nbf = s_.rows(), nspin = static_cast<Index>(fock.size());
    FockStep out{Matrix(nbf, nbf * nspin), Matrix(nbf, nbf * nspin)};
    for (Index i = 0; i < nspin; ++i) {
      out.extrapolated.middleCols(i * nbf, nbf) = fock[std::size_t(i)];
      out.gradient.middleCols(i * nbf, nbf) = orbital_gradient(fock[std::size_t(i)], density[std::size_t(i)], s_, x_,
                                                               kernels_, options_);
    }
    return out;
  }
  void occupy(const Matrix& extrapolated, std::vector<Spin>& spins) override {
    const Index nbf = s_.rows();
    orbitals_.resize(spins.size());
    for (std::size_t i = 0; i < spins.size(); ++i) {
      orbitals_[i] = diagonalise(extrapolated.middleCols(Index(i) * nbf, nbf), x_, kernels_, &options_);
      spins[i].c_occ = orbitals_[i].c.leftCols(spins[i].nocc);
    }
  }
  void finish(const std::vector<Matrix>& fock) override {
    for (std::size_t i = 0; i < fock.size(); ++i) orbitals_[i] = diagonalise(fock[i], x_, kernels_, &options_);
  }
  const Orbitals& orbitals(std::size_t spin) const { return orbitals_.at(spin); }

 private:
  const Matrix &s_, &x_;
  const ScfOptions& options_;
  linalg::Kernels& kernels_;
  std::vector<Orbitals> orbitals_;
};

// ROHF: one set of orbitals, the first n_beta doubly occupied and the next n_alpha - n_beta singly. The effective
// Fock matrix in the orthonormal basis is the spin average everywhere, except the coupling of doubly to singly
// occupied orbitals (F beta) and of singly occupied to virtual ones (F alpha); its blocks between the three spaces
// are the orbital gradient, zero at convergence (Roothaan's coupling; the converged energy does not depend on the
// choice of the diagonal blocks). At convergence each spin's Fock matrix is made semicanonical for ROHF-MBPT(2).
class RohfUpdate final : public OrbitalUpdate {
 public:
  RohfUpdate(const Matrix& x, Index nalpha, Index nbeta, const ScfOptions& options, linalg::Kernels& kernels)
      : x_(x), nalpha_(nalpha), nbeta_(nbeta), options_(options), kernels_(kernels) {}
  FockStep fock_step(const std::vector<Matrix>& fock, const std::vector<Matrix>& /*density*/) override {
    const Matrix fa = transformed(x_, fock[0]), fb = transformed(x_, fock[1]);
    const Index nbf = fa.rows();
    // The guess gives densities, not orbitals: the first iteration diagonalises the spin-averaged Fock matrix.
    if (v_.size() == 0) return {0.5 * (fa + fb), Matrix::Zero(nbf, nbf), false};
    const Matrix fa_mo = transformed(v_, fa), fb_mo = transformed(v_, fb);
    Matrix eff_mo = 0.5 * (fa_mo + fb_mo), gradient = Matrix::Zero(nbf, nbf);
    const Index ns = nalpha_ - nbeta_, nv = nbf - nalpha_;
    eff_mo.block(0, nbeta_, nbeta_, ns) = fb_mo.block(0, nbeta_, nbeta_, ns);
    eff_mo.block(nbeta_, 0, ns, nbeta_) = fb_mo.block(nbeta_, 0, ns, nbeta_);
    eff_mo.block(nbeta_, nalpha_, ns, nv) = fa_mo.block(nbeta_, nalpha_, ns, nv);
    eff_mo.block(nalpha_, nbeta_, nv, ns) = fa_mo.block(nalpha_, nbeta_, nv, ns);
    // The gradient: the blocks above the diagonal of the three spaces, antisymmetric.
    gradient.block(0, nbeta_, nbeta_, nbf - nbeta_) = eff_mo.block(0, nbeta_, nbeta_, nbf - nbeta_);
    gradient.block(nbeta_, nalpha_, ns, nv) = eff_mo.block(nbeta_, nalpha_, ns, nv);
    gradient -= Matrix(gradient.transpose());
    return {back_transformed(eff_mo), back_transformed(gradient), true};
  }
  void occupy(const Matrix& extrapolated, std::vector<Spin>& spins) override {
    v_ = extrapolated;
    symmetric_eigen(v_, eps_, kernels_, &options_, step());
    c_ = product(kernels_, step(), x_, Trans::no, v_, Trans::no);
    spins[0].c_occ = c_.leftCols(nalpha_);
    spins[1].c_occ = c_.leftCols(nbeta_);
  }
  void finish(const std::vector<Matrix>& fock) override {
    alpha = semicanonical(c_, nalpha_, fock[0]);
    beta = semicanonical(c_, nbeta_, fock[1]);
    fock_ = fock;
  }
  const Vector& effective_orbital_energies() const { return eps_; }
  const Matrix& orbitals() const { return c_; }
  const std::vector<Matrix>& fock() const { return fock_; }
  Semicanonical alpha, beta;

 private:
  static const std::string& step() { return step_name(ScfStep::iterations); }
  // U^T M U on the backend.
  Matrix transformed(const Matrix& u, const Matrix& m) const {
    return product(kernels_, step(), u, Trans::yes, product(kernels_, step(), m, Trans::no, u, Trans::no), Trans::no);
  }
  // V M V^T: from the current orbitals' basis back to the orthonormal one.
  Matrix back_transformed(const Matrix& m) const {
    return product(kernels_, step(), v_, Trans::no, product(kernels_, step(), m, Trans::no, v_, Trans::yes), Trans::no);
  }
  const Matrix& x_;
  Index nalpha_, nbeta_;
  const ScfOptions& options_;
  linalg::Kernels& kernels_;
  Matrix v_;  // the orbitals in the orthonormal basis of X (C = X V), once there are some
  Matrix c_;  // C = X V
  Vector eps_;  // the effective Fock matrix's eigenvalues
  std::vector<Matrix> fock_;  // each spin's, of the converged densities
};

// The SCF iterations over `spins` (one for RHF, alpha and beta for UHF and ROHF), from their c_occ (the guess):
// F_s = h + J[D] - K[D_s] with D = sum_s n_s D_s (n_s electrons per orbital), E = 1/2 sum_s n_s tr D_s (h + F_s);
// `update` turns the Fock matrices into what DIIS extrapolates and the extrapolated matrix into new orbitals.
// Converged when the energy change between two fp64 iterations is below e_convergence and the RMS of the orbital
// gradient below d_convergence; then update.finish() makes the orbitals that go on to MP2.
ScfResult iterate(const ScfStart& st, std::vector<Spin>& spins, OrbitalUpdate& update, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration) {
  if (options.precision == ScfPrecision::mixed && !jk.has_fp32_exchange()) {
    throw UnsupportedError("scf.precision: mixed needs the density-fitted K of the memory or scratch storage (scf.type "
                           "df); this J/K builder has no fp32 exchange");
  }
  const std::string& step = step_name(ScfStep::iterations);
  const Index nbf = st.h.rows();
  ScfResult result;
  result.nuclear_repulsion = st.nuclear_repulsion;
  result.external_charges = options.external_charges;
  Diis diis(options.diis_vectors);
  std::vector<Matrix> j(spins.size()), k(spins.size()), fock(spins.size()), density(spins.size());
  double previous = 0;
  bool fp32 = options.precision == ScfPrecision::mixed;  // until the gradient falls below mixed_switch
  bool previous_fp32 = false;  // the energy change is judged between two fp64 iterations only
  for (int it = 1; it <= options.max_iterations; ++it) {
    Stopwatch clock;
    for (std::size_t i = 0; i < spins.size(); ++i) coulomb_and_exchange(jk, spins[i].c_occ, j[i], k[i], fp32, int(i));
    Matrix coulomb = spins[0].electrons_per_orbital * j[0];
    for (std::size_t i = 1; i < spins.size(); ++i) coulomb += spins[i].electrons_per_orbital * j[i];
    double energy = st.nuclear_repulsion;
    for (std::size_t i = 0; i < spins.size(); ++i) {
      fock[i] = st.h + coulomb - k[i];
      // D = C_occ C_occ^T (one triangle, then mirrored), on the backend.
      density[i].resize(nbf, nbf);
      kernels.syrk<double>(step, linalg::Uplo::lower, Trans::no, 1.0, linalg::view(spins[i].c_occ), 0.0,
                           linalg::view(density[i]));
      density[i].triangularView<Eigen::StrictlyUpper>() = density[i].transpose();
      energy += 0.5 * spins[i].electrons_per_orbital * density[i].cwiseProduct(st.h + fock[i]).sum();
    }
    const OrbitalUpdate::FockStep fs = update.fock_step(fock, density);
    const double rms = std::sqrt(fs.gradient.squaredNorm() / double(fs.gradient.size()));
    require_finite(it, energy, rms);
    // The SAD guess is a density, not a determinant: fractional and the same for both spins, and for an atom a fixed
    // point of its own Fock matrix (its orbital gradient nearly zero). In the DIIS subspace it would carry the most
    // weight from then on and hold the iterations near the guess (the O atom's triplet and the Li atom's doublet
    // stalled so, and the H atom converged to the spin-averaged energy); its Fock matrix is diagonalised as it is,
    // as Psi4 does with its SAD iteration.
    const bool density_guess = (it == 1 && options.guess == ScfGuess::sad) || !fs.has_gradient;
    update.occupy(density_guess ? fs.extrapolated : diis.extrapolate(fs.extrapolated, fs.gradient), spins);

    ScfIteration line{it, energy, it == 1 ? energy : energy - previous, rms, clock.seconds(), fp32};
    result.history.push_back(line);
    if (on_iteration) on_iteration(line);
    previous = energy;
    if (fp32) {
      ++result.fp32_iterations;
      // An fp32 K is never the last word: from here on K is fp64, and convergence is judged on fp64 iterations only.
      if (rms < options.mixed_switch) fp32 = false;
      previous_fp32 = true;
      continue;
    }
    const bool energy_comparable = it > 1 && !previous_fp32 && fs.has_gradient;
    previous_fp32 = false;
    if (energy_comparable && std::abs(line.delta_energy) < options.e_convergence && rms < options.d_convergence) {
      update.finish(fock);
      result.energy = energy;
      result.iterations = it;
      return result;
    }
  }
  not_converged(options, result);
}

}  // namespace

ScfResult run_rhf(const Molecule& molecule, const BasisSet& basis, JkBuilder& jk, const ScfOptions& options,
                  linalg::Kernels& kernels, const std::function<void(const ScfIteration&)>& on_iteration) {
  const int nocc = closed_shell_occupied(molecule);
  const ScfStart st = start_scf(molecule, basis, nocc, options, kernels);
  std::vector<Spin> spins{{nocc, 2.0, spin_guess(st, options, nocc)}};
  SpinFockUpdate update(st.s, st.x, options, kernels);
  ScfResult result = iterate(st, spins, update, jk, options, kernels, on_iteration);
  result.nocc = nocc;
  result.mo_coefficients = update.orbitals(0).c;
  result.orbital_energies = update.orbitals(0).eps;
  return result;
}

ScfResult run_uhf(const Molecule& molecule, int multiplicity, const BasisSet& basis, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration) {
  const auto [nalpha, nbeta] = spin_occupied(molecule, multiplicity);
  const ScfStart st = start_scf(molecule, basis, nalpha, options, kernels);
  std::vector<Spin> spins{{nalpha, 1.0, spin_guess(st, options, nalpha)},
                          {nbeta, 1.0, spin_guess(st, options, nbeta, true)}};
  SpinFockUpdate update(st.s, st.x, options, kernels);
  ScfResult result = iterate(st, spins, update, jk, options, kernels, on_iteration);
  result.reference = ScfReference::uhf;
  result.nocc = nalpha;
  result.mo_coefficients = update.orbitals(0).c;
  result.orbital_energies = update.orbitals(0).eps;
  result.nocc_beta = nbeta;
  result.mo_coefficients_beta = update.orbitals(1).c;
  result.orbital_energies_beta = update.orbitals(1).eps;
  result.s_squared = s_squared(result, st.s);
  return result;
}

ScfResult run_rohf(const Molecule& molecule, int multiplicity, const BasisSet& basis, JkBuilder& jk,
                   const ScfOptions& options, linalg::Kernels& kernels,
                   const std::function<void(const ScfIteration&)>& on_iteration) {
  if (options.precision == ScfPrecision::mixed) {
    throw UnsupportedError("scf.precision: mixed is offered for RHF and UHF; ROHF runs in fp64");
  }
  const auto [nalpha, nbeta] = spin_occupied(molecule, multiplicity);
  const ScfStart st = start_scf(molecule, basis, nalpha, options, kernels);
  std::vector<Spin> spins{{nalpha, 1.0, spin_guess(st, options, nalpha)}, {nbeta, 1.0, spin_guess(st, options, nbeta)}};
  RohfUpdate update(st.x, nalpha, nbeta, options, kernels);
  ScfResult result = iterate(st, spins, update, jk, options, kernels, on_iteration);
  result.reference = ScfReference::rohf;
  result.nocc = nalpha;
  result.nocc_beta = nbeta;
  result.rohf_orbital_energies = update.effective_orbital_energies();
  result.rohf_coefficients = update.orbitals();
  result.fock_alpha = update.fock()[0];
  result.fock_beta = update.fock()[1];
  // ROHF-MBPT(2)'s orbitals: each spin's Fock matrix of the converged density, made semicanonical.
  result.singles_alpha = std::move(update.alpha.singles);
  result.singles_beta = std::move(update.beta.singles);
  result.mo_coefficients = std::move(update.alpha.c);
  result.orbital_energies = std::move(update.alpha.eps);
  result.mo_coefficients_beta = std::move(update.beta.c);
  result.orbital_energies_beta = std::move(update.beta.eps);
  result.s_squared = s_squared(result, st.s);
  return result;
}

std::string reference_label(ScfReference reference) {
  std::string label = linalg::name_in(scf_reference_names(), reference);
  for (char& ch : label) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return label;
}

ScfResult run_scf(ScfReference reference, const Molecule& molecule, const BasisSet& basis, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration) {
  switch (reference) {
    case ScfReference::rhf: return run_rhf(molecule, basis, jk, options, kernels, on_iteration);
    case ScfReference::uhf: return run_uhf(molecule, molecule.multiplicity, basis, jk, options, kernels, on_iteration);
    case ScfReference::rohf: return run_rohf(molecule, molecule.multiplicity, basis, jk, options, kernels, on_iteration);
  }
  throw std::logic_error("run_scf: unknown reference");
}

DfMp2Input dfmp2_input_of(const ScfResult& scf, const linalg::Matrix* metric, const ThreeIndexSource* three_index) {
  DfMp2Input in{&scf.orbital_energies, scf.nocc, &scf.mo_coefficients, metric, three_index};
  if (scf.open_shell()) {
    in.orbital_energies_beta = &scf.orbital_energies_beta;
    in.nocc_beta = scf.nocc_beta;
    in.mo_coefficients_beta = &scf.mo_coefficients_beta;
    if (scf.reference == ScfReference::rohf) {
      in.singles_alpha = &scf.singles_alpha;
      in.singles_beta = &scf.singles_beta;
    }
  }
  return in;
}

}  // namespace dfmp2::chem
