#pragma once
// The analytic gradient of the closed-shell DF-MP2 energy (RHF reference with DF or exact J/K, frozen core allowed),
// in the Lagrangian form of Weigend and Haeser (Theor. Chem. Acc. 97, 331 (1997)).
//
// Notation: i, j active occupied; I frozen; a, b virtual; P, Q the RI basis with metric J = L L^T; B = L^-1 (P|ia)
// the fitted integrals; t_ij^ab = (ia|jb) / (e_i + e_j - e_a - e_b) and T_ij^ab = 2 t_ij^ab - t_ij^ba, so that
// E = sum_ijab (ia|jb) T_ij^ab.
//
//  1. Amplitudes, pair by pair, give the unrelaxed density P_ij = -2 sum_kab t_ik^ab T_jk^ab,
//     P_ab = 2 sum_ijc t_ij^ac T_ij^bc, and the three-index amplitudes G^Q_ia = sum_jb T_ij^ab B^Q_jb.
//  2. The energy's explicit dependence on the integrals: with Gamma = L^-T G (back in the RI basis),
//     4 sum d(P|mn)/dR (C_i Gamma^P_ia C_a)_mn - 2 sum d(P|Q)/dR V_PQ, V = L^-T (B G^T) L^-1.
//  3. Its dependence on the orbitals, X_pq = dE/dU_pq for the orbital change dC = C U: from the three-index
//     integrals (Y = 4 (P|pr) Gamma^P), from the Fock matrix's occupied and virtual blocks (2 P_pq e_p), and from the
//     Fock matrix's dependence on the density (C^T G[P] C_o, G[M] = 4 J[M] - 2 K[M] with the SCF's J and K).
//  4. The Z-vector equations (e_a - e_i) z_ai + [C_v^T G[Z] C_o]_ai = -(X_ai - X_ia) (frozen core: first the
//     frozen-active rotations, z_Ij = -(X_Ij - X_jI) / (e_I - e_j), which the Lagrangian couples in), solved by
//     preconditioned conjugate gradients; Z = (C_v z C_o^T + C_o z^T C_v^T) / 2.
//  5. The relaxed density P (unrelaxed blocks plus z/2 in the occupied-virtual and frozen-active blocks) and the
//     energy-weighted density W enter like the SCF's (chem::rhf_gradient's DensityCorrection); the rest is step 2.
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "chem/mp2/dfmp2.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/comm.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::chem {

struct DfMp2Gradient {
  // SCF + MP2, natoms x 3, Eh/bohr; among point charges (ScfResult::external_charges) a row for each after the
  // atoms': the derivative with respect to its position (scf_gradient's rows likewise).
  linalg::Matrix gradient;
  linalg::Matrix scf_gradient;  // the SCF's alone
  // The energy from the gradient's own amplitudes (equal to the energy run's): opposite- and same-spin parts.
  double opposite_spin = 0, same_spin = 0;
  double same_spin_alpha = 0, same_spin_beta = 0;  // same_spin's parts (closed shell: half each)
  double singles = 0;  // ROHF-MBPT(2)'s singles term (0 for RHF and UHF)
  double correlation() const { return singles + opposite_spin + same_spin; }
  // Dipole moments (a.u., origin 0): the SCF's and the MP2 relaxed density's (nuclei included).
  std::array<double, 3> scf_dipole{}, relaxed_dipole{};
  linalg::Matrix relaxed_density;  // AO: the SCF's density plus the MP2 relaxed correction
  // Each spin's AO density (alpha, beta; a closed shell's are the halves of its own): the SCF's; the unrelaxed, the
  // SCF's plus the amplitudes' occupied-occupied and virtual-virtual blocks (ROHF-MBPT(2): and its singles', in its
  // semicanonical orbitals); the relaxed, which adds the orbital response (relaxed_density is their sum).
  std::array<linalg::Matrix, 2> scf_densities, unrelaxed_densities, relaxed_densities;
  int zvector_iterations = 0;
  double zvector_residual = 0;     // largest |residual| of the Z-vector equations at the end
  std::vector<std::pair<std::string, double>> seconds;  // per step, in order
};

// How the gradient holds its three-index tensors (the fitted (P|ia) and (P|ji) of the active orbitals, then the
// three-index amplitudes Gamma): in blocks of active occupied orbitals, in memory or in a scratch file, as the energy
// holds its own, and the separable part's half-transformed integrals by the same blocks; how many auxiliary
// functions' AO integrals (P|mn) its AO passes compute at once; whether the Z-vector keeps its DF products.
struct DfMp2GradientPlan {
  linalg::Index occupied_block = 0;  // active occupied orbitals per block; 0: all in one
  linalg::Index aux_block = 64;
  bool on_scratch = false;
  // What the Z-vector's DF J/K keeps across its iterations (chem/scf/rotation_response.hpp): its fitting basis's
  // integrals in the orbitals' basis (mo), their occupied blocks only (occupied), or nothing (none).
  RotationProducts zvector_products = RotationProducts::mo;
  // The amplitude pass keeps each pair's integrals (ka|ib), k < i, from row k for row i, so that the first product
  // runs over half of the pairs (na (na - 1) / 2 nv^2 doubles; with ranks, each rank its own rows', shared).
  bool keep_pair_integrals = false;
  // The rows k of a block whose pair amplitudes are made together (each na nv^2): each block of B read from scratch
  // or fetched from another rank once for all of them.
  linalg::Index amplitude_rows = 1;
  double memory_bytes = 0;   // the gradient's peak, beside the SCF's J/K and matrices
  double scratch_bytes = 0;  // its scratch file at its largest
  std::string reason;        // why this storage and these blocks
};

struct DfMp2GradientSizes {
  linalg::Index nbf = 0, nocc = 0, nfrozen = 0, naux = 0;
  linalg::Index naux_jk = 0;            // the SCF's J/K fitting basis (0: exact SCF)
  linalg::Index largest_aux_shell = 0;  // functions of the largest shell of the RI and J/K fitting bases
  int threads = 1;
  int ranks = 1;  // the MPI ranks sharing the work: at least one block of orbitals each, where there are orbitals
  // An open shell (UHF): the beta occupied orbitals (nocc the alpha ones, at least as many); 0: a closed shell.
  linalg::Index nocc_beta = 0;
};

// The plan within `budget` bytes: in memory with the largest blocks that fit, else on scratch (`storage` may ask for
// either); PhaseTooLarge with the least `budget` that would do when even one orbital per block does not fit.
DfMp2GradientPlan plan_dfmp2_gradient(const DfMp2GradientSizes& sizes, double budget, Mp2Storage storage);

struct DfMp2GradientInput {
  const Molecule* molecule = nullptr;
  const BasisSet* basis = nullptr;
  const BasisSet* ri_basis = nullptr;  // the DF-MP2 fitting basis
  const BasisSet* jk_basis = nullptr;  // the SCF's J/K fitting basis; null for an exact SCF
  const ScfResult* scf = nullptr;      // converged RHF
  int nfrozen = 0;
  // The energy differentiated: c_os E_os + c_ss E_ss (SCS-MP2, SOS-MP2, ...); the result's opposite_spin and
  // same_spin stay the components unscaled.
  SpinScales scales;
  JkBuilder* jk = nullptr;             // the SCF's J/K (its compute_symmetric builds the orbital response's G[M])
  DfMp2GradientPlan plan;              // made by plan_dfmp2_gradient
  // The Z-vector's largest residual at convergence: the SCF's d_convergence (rhf_dfmp2_gradient's step 4).
  double zvector_convergence = 1e-8;
  std::string scratch_folder;          // where its tensors go when the plan puts them on scratch
  // false: the relaxed density and the dipoles only (MP2 properties, issue 46): the same amplitudes and orbital
  // response, none of the derivative integrals (the three-index, metric and separable terms); `gradient` and
  // `scf_gradient` are left empty.
  bool derivatives = true;
  // The ranks sharing its work and its three-index stores (the same call on each, with `jk` shared among them too):
  // each its blocks of orbitals (the fits, the pair amplitudes of their rows) and its auxiliary functions (the AO
  // passes, the derivative integrals), the sums summed (gradient_detail.hpp); every rank ends with the same
  // gradient. None: this process alone.
  linalg::Comm* comm = nullptr;
};

// Throws std::logic_error for an open-shell SCF; NumericalError when the Z-vector equations do not converge.
DfMp2Gradient rhf_dfmp2_gradient(const DfMp2GradientInput& input, linalg::Kernels& kernels);
// The same for a UHF reference (chem/gradient/uhf_dfmp2_gradient.cpp): each spin's orbitals, both in the plan's
// blocks; the result's same_spin_alpha and same_spin_beta its spins' parts. std::logic_error for another reference.
DfMp2Gradient uhf_dfmp2_gradient(const DfMp2GradientInput& input, linalg::Kernels& kernels);
// The same for ROHF-MBPT(2) (chem/gradient/rohf_dfmp2_gradient.cpp), all electrons (a frozen core: std::logic_error;
// the input refuses it); the result's singles its singles term.
DfMp2Gradient rohf_dfmp2_gradient(const DfMp2GradientInput& input, linalg::Kernels& kernels);
// The gradient of the SCF's reference: RHF, UHF or ROHF-MBPT(2).
DfMp2Gradient dfmp2_gradient(const DfMp2GradientInput& input, linalg::Kernels& kernels);


}  // namespace dfmp2::chem
