#pragma once
// Closed-shell restricted Hartree-Fock.
//
//   F = H + 2J - K,  E = tr[D (H + F)] + E_nuc,  D = C_occ C_occ^T
//
// J and K come from a JkBuilder: density-fitted with a JK fitting basis, blocked within a memory budget (chem/scf/df_jk.hpp)
// or exact four-centre integrals (ExactJk, integral-direct; for small molecules).
// Iterations: Pulay DIIS on the orbital gradient X^T (F D S - S D F) X (X = S^-1/2, symmetric orthogonalisation),
// converged when the energy change is below e_convergence and the RMS of the gradient below d_convergence.
// Guesses: core (diagonalise H) or sad (superposition of atomic densities from fractional-occupation atomic RHF
// in each atom's own basis functions).
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "chem/integrals/three_index_source.hpp"
#include "chem/scf/jk_builder.hpp"
#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/kernels.hpp"
#include "linalg/name_table.hpp"

namespace dfmp2::chem {

enum class ScfType { df, exact };
// sad and core are the input's (`scf.guess`); orbitals is the program's own, for a geometry near one already
// converged (the Hessian's displaced geometries): ScfOptions::start_orbitals orthonormalised in this geometry's overlap.
enum class ScfGuess { core, sad, orbitals };
inline const char* scf_guess_name(ScfGuess guess) {
  return guess == ScfGuess::core ? "core" : guess == ScfGuess::sad ? "sad" : "orbitals";
}

// The arithmetic of the SCF's exchange build. mixed: the DF K build (its batched GEMM and SYRK, most of an
// iteration's flops) runs in fp32 while the orbital gradient is above `mixed_switch`, then in fp64 to convergence,
// so the converged energy is the fp64 SCF's (within the convergence criteria). J, the Fock matrix, DIIS and the
// diagonalisation are fp64 throughout.
enum class ScfPrecision { fp64, mixed };
inline const linalg::NameTable<ScfPrecision>& scf_precision_names() {
  static const linalg::NameTable<ScfPrecision> t = {{ScfPrecision::fp64, "fp64"}, {ScfPrecision::mixed, "mixed"}};
  return t;
}

// The SCF's steps, as its kernel log and timing table name them, and the phases of the per-rank table (README
// "MPI") each belongs to: the J/K set-up (three-centre integrals, the fitting), the J/K builds of the iterations
// (distributed), and the rest of the iterations (Fock matrix, DIIS, diagonalisation: the same on every rank).
enum class ScfStep { integrals, guess, fitting, jk, iterations };
enum class ScfPhase { jk_setup, jk_builds, other };
inline const linalg::NameTable<ScfStep>& scf_step_names() {
  static const linalg::NameTable<ScfStep> t = {{ScfStep::integrals, "scf_integrals"},
                                               {ScfStep::guess, "scf_guess"},
                                               {ScfStep::fitting, "scf_fitting"},
                                               {ScfStep::jk, "scf_jk"},
                                               {ScfStep::iterations, "scf"}};
  return t;
}
inline const linalg::NameTable<ScfPhase>& scf_phase_names() {
  static const linalg::NameTable<ScfPhase> t = {
      {ScfPhase::jk_setup, "SCF J/K setup"}, {ScfPhase::jk_builds, "SCF J/K"}, {ScfPhase::other, "SCF other"}};
  return t;
}
inline const std::string& step_name(ScfStep step) {
  for (const auto& [s, name] : scf_step_names())
    if (s == step) return name;
  throw std::logic_error("step_name: unknown SCF step");
}
inline const std::string& phase_name(ScfPhase phase) {
  for (const auto& [p, name] : scf_phase_names())
    if (p == phase) return name;
  throw std::logic_error("phase_name: unknown SCF phase");
}
// The phase a step's time and flops count under; the guess (one-off, before the iterations) counts as other.
inline ScfPhase phase_of(ScfStep step) {
  switch (step) {
    case ScfStep::integrals:
    case ScfStep::fitting: return ScfPhase::jk_setup;
    case ScfStep::jk: return ScfPhase::jk_builds;
    case ScfStep::guess:
    case ScfStep::iterations: return ScfPhase::other;
  }
  return ScfPhase::other;
}

struct ScfOptions {
  ScfType type = ScfType::df;
  ScfPrecision precision = ScfPrecision::fp64;
  double mixed_switch = 1e-4;  // mixed: RMS orbital gradient below which K is built in fp64
  double e_convergence = 1e-8;  // Eh, change of the energy between iterations
  double d_convergence = 1e-8;  // RMS of the orbital gradient
  int max_iterations = 100;
  ScfGuess guess = ScfGuess::sad;
  // ScfGuess::orbitals: the occupied orbitals (nbf x nocc, RHF) of the same basis at a nearby geometry; the pointer
  // must outlive the SCF.
  const linalg::Matrix* start_orbitals = nullptr;
  // UHF: the beta orbitals of that geometry (null: the alpha ones for both spins).
  const linalg::Matrix* start_orbitals_beta = nullptr;
  // When not null: the basis start_orbitals (and start_orbitals_beta) are in, another one of the same molecule (the
  // smaller basis of a basis-set extrapolation); they are projected into this basis, S^-1 <this|start> C, as Psi4's
  // basis_guess does. The pointer must outlive the SCF.
  const BasisSet* start_basis = nullptr;
  int diis_vectors = 10;
  // A uniform electric field F (a.u.; Psi4's perturb_dipole): F . (-r) in the one-electron Hamiltonian, dipole
  // integrals about the origin, and F . sum_A Z_A R_A in the nuclei's energy (nuclear_repulsion, as Psi4 counts it),
  // so that dE/dF is the dipole moment.
  std::array<double, 3> electric_field{};
  // Point charges around the molecule (Psi4's EXTERN, QM/MM embedding): (q_c, position in bohr). Their potential
  // -sum_c q_c / |r - R_c| in the one-electron Hamiltonian, and their interaction with the nuclei sum_A,c Z_A q_c /
  // |R_A - R_c| in nuclear_repulsion, as Psi4 counts it; not with each other.
  std::vector<std::pair<double, std::array<double, 3>>> external_charges;
  // (optional) The ranks' grid (linalg/dense_grid.hpp): the eigenproblems of order >= distributed_min_order (the
  // Fock matrix's, nbf) are solved on it, every rank then holding the same orbitals (README "MPI").
  linalg::DenseGrid* dense = nullptr;
  linalg::Index distributed_min_order = 0;
};

struct ScfIteration {
  int iteration = 0;
  double energy = 0;
  double delta_energy = 0;
  double gradient_rms = 0;
  double seconds = 0;
  bool fp32_exchange = false;  // this iteration's K was built in fp32 (ScfPrecision::mixed)
};

// RHF: one set of doubly occupied orbitals. UHF (Pople-Nesbet): alpha and beta orbitals of their own. ROHF: one
// set of orbitals, the first n_beta doubly occupied and the next n_alpha - n_beta singly (alpha).
enum class ScfReference { rhf, uhf, rohf };
inline const linalg::NameTable<ScfReference>& scf_reference_names() {
  static const linalg::NameTable<ScfReference> t = {
      {ScfReference::rhf, "rhf"}, {ScfReference::uhf, "uhf"}, {ScfReference::rohf, "rohf"}};
  return t;
}
// Upper case, as Psi4 prints it: "RHF", "UHF", "ROHF".
std::string reference_label(ScfReference reference);

struct ScfResult {
  ScfReference reference = ScfReference::rhf;
  double energy = 0;
  double nuclear_repulsion = 0;
  linalg::Matrix mo_coefficients;  // nbf x nmo (nmo = nbf); UHF: the alpha orbitals
  linalg::Vector orbital_energies;
  int nocc = 0;                    // UHF: alpha
  // UHF: the beta orbitals. ROHF: the semicanonical orbitals of each spin (alpha in the fields above), which
  // diagonalise that spin's Fock matrix within its occupied and within its virtual orbitals, as ROHF-MBPT(2)
  // takes them; `rohf_orbital_energies` keeps the eigenvalues of the effective Fock matrix.
  linalg::Matrix mo_coefficients_beta;
  linalg::Vector orbital_energies_beta;
  int nocc_beta = 0;
  linalg::Vector rohf_orbital_energies;
  // ROHF: its own orbitals (the effective Fock matrix's, doubly occupied, singly occupied, virtual) and each spin's
  // Fock matrix (AO) of the converged densities, which the ROHF-MBPT(2) gradient reads.
  linalg::Matrix rohf_coefficients, fock_alpha, fock_beta;
  // The point charges it was converged among (ScfOptions::external_charges), which its gradients differentiate too.
  std::vector<std::pair<double, std::array<double, 3>>> external_charges;
  // <S^2> of the determinant (RHF: 0 by construction; ROHF: S(S+1)).
  double s_squared = 0;
  // ROHF-MBPT(2)'s singles energy by occupied orbital i of each spin: -sum_a |f_ia|^2 / (e_a - e_i) over the
  // semicanonical orbitals (the Fock matrices' occupied-virtual blocks, zero for RHF and UHF, so empty there). The
  // energy sums the active orbitals' terms (Psi4 leaves the frozen core out).
  linalg::Vector singles_alpha, singles_beta;
  bool open_shell() const { return reference != ScfReference::rhf; }
  int iterations = 0;
  int fp32_iterations = 0;  // of which with an fp32 K (ScfPrecision::mixed)
  std::vector<ScfIteration> history;
};

// The orbitals a nearby geometry's SCF of the same reference starts from (ScfOptions::start_orbitals): the SCF's own,
// and ROHF's own orbitals rather than its alpha semicanonical ones (whose first n_beta are not its doubly occupied).
inline const linalg::Matrix& start_orbitals(const ScfResult& scf) {
  return scf.reference == ScfReference::rohf ? scf.rohf_coefficients : scf.mo_coefficients;
}

// What DF-MP2 reads of an SCF's orbitals (both spins of an open shell, ROHF's singles terms), over `metric` and the
// three-index integrals `three_index` of its basis. The pointers are into `scf`: it must outlive the input.
DfMp2Input dfmp2_input_of(const ScfResult& scf, const linalg::Matrix* metric, const ThreeIndexSource* three_index);

// Runs RHF; `on_iteration` (may be empty) sees each iteration as it finishes. Throws NumericalError when it does
// not converge within max_iterations.
ScfResult run_rhf(const Molecule& molecule, const BasisSet& basis, JkBuilder& jk, const ScfOptions& options,
                  linalg::Kernels& kernels, const std::function<void(const ScfIteration&)>& on_iteration = {});
// UHF for a molecule of spin multiplicity 2S + 1 (spin_occupied gives the alpha and beta counts): the same J/K
// builders, guesses, DIIS and mixed precision as RHF, each iteration building J and K from the alpha and the beta
// density. <S^2> is in the result.
ScfResult run_uhf(const Molecule& molecule, int multiplicity, const BasisSet& basis, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration = {});
// ROHF: Fock matrices of the alpha and beta densities coupled into one effective Fock matrix (Roothaan), DIIS on
// its gradient between the doubly occupied, singly occupied and virtual spaces. fp64 only (UnsupportedError for
// scf.precision mixed). The result holds each spin's semicanonical orbitals and singles terms (ScfResult).
ScfResult run_rohf(const Molecule& molecule, int multiplicity, const BasisSet& basis, JkBuilder& jk,
                   const ScfOptions& options, linalg::Kernels& kernels,
                   const std::function<void(const ScfIteration&)>& on_iteration = {});

// The SCF of `reference` (RHF for a singlet; UHF or ROHF in the molecule's multiplicity).
ScfResult run_scf(ScfReference reference, const Molecule& molecule, const BasisSet& basis, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration = {});

}  // namespace dfmp2::chem

// The SCF room's door (README "Layout"): its J/K builders come with it.
#include "chem/scf/df_jk.hpp"  // IWYU pragma: export
