#pragma once
// Analytic RHF gradients (Eh/bohr, one row per atom, columns x, y, z), and the part of a correlated gradient that
// has the same form: a one-particle density and an energy-weighted density added to the SCF's.
//
// With D = 2 C_o C_o^T and W = 2 C_o e_o C_o^T, an energy functional of the form
//   E = sum P_mn h_mn + sum_mn P_mn [J(D) - 1/2 K(D)]_mn + V_nn         (RHF: P = D/2 in the two-electron term)
// differentiated with the densities held fixed (the orbital response is in W and in the relaxed P) gives
//   dE/dR = sum P d(T + V)/dR - sum W dS/dR + dV_nn/dR                  (chem::one_electron_gradient)
//         + d/dR of the two-electron term                               (chem::two_electron_gradient)
// The two-electron term with DF J and K (the JK fitting basis; J the metric (P|Q), c^P = J^-1 (Q|mn) fitted):
//   sum_P sum_mn d(P|mn)/dR [P d_D^P + D d_P^P - (P H^P C_o^T + C_o H^PT P)]_mn
//   + sum_PQ d(P|Q)/dR [H^P . (P H^Q) - 1/2 (d_P^P d_D^Q + d_D^P d_P^Q)]
// with d_X = J^-1 (Q|mn) X_mn the fitted densities and H^P = c^P C_o the fitted half-transformed integrals: the
// derivative of sum P_mn (mn|P)[J^-1]_PQ (Q|ls) [D_ls - 1/2 ...] through the three-index integrals and the metric.
// With exact J and K, libint2's four-centre first derivatives (chem::four_center_gradients).
#include <array>
#include <string>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/comm.hpp"
#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// Where the DF two-electron derivative keeps its fitted half-transformed integrals H^P = c^P C_o (nbf x nocc for
// each fitting function): by blocks of `occupied_block` occupied orbitals (0: one block), in memory, or in a scratch
// file in `scratch_folder` when `on_scratch` (the DF-MP2 gradient's plan decides, chem/gradient/dfmp2_gradient.hpp).
struct HalfTransformedStorage {
  linalg::Index occupied_block = 0;
  linalg::Index aux_block = 64;  // fitting functions whose (Q|mn) are computed at once
  bool on_scratch = false;
  std::string scratch_folder;
  // The ranks sharing the work and H (each its fitting functions and its blocks of orbitals, gradient_detail.hpp),
  // the sums summed; none: this process alone.
  linalg::Comm* comm = nullptr;
};

// d/dR of sum_mn P_mn [J(D) - 1/2 K(D)]_mn, D = 2 C_o C_o^T (`c_occ`: the SCF's occupied orbitals) held fixed,
// for P = D/2 (the SCF's) and then for P = D/2 + each of `corrections` (symmetric): one gradient each, in one pass
// over the derivative integrals. J and K fitted with `jk_basis` (its dense algebra on `kernels`), or exact when it is
// null. The DF form keeps H as `storage` says, and one block's products beside it.
std::vector<linalg::Matrix> two_electron_gradients(const BasisSet& basis, const BasisSet* jk_basis,
                                                   linalg::Index natoms, const linalg::Matrix& c_occ,
                                                   const std::vector<linalg::Matrix>& corrections,
                                                   linalg::Kernels& kernels,
                                                   const HalfTransformedStorage& storage = {});

// A correlated method's additions to the RHF densities: its relaxed one-particle density and energy-weighted
// density (AO, symmetric).
struct DensityCorrection {
  linalg::Matrix density, energy_weighted;
};

// The gradient of a converged RHF `scf` of `molecule` in `basis`, J and K fitted with `jk_basis` (null: exact).
linalg::Matrix rhf_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                            const ScfResult& scf, linalg::Kernels& kernels);
// The same first, then the gradient with each of `corrections` added to its densities (the DF-MP2 gradient's
// separable part), all in one pass over the derivative integrals.
std::vector<linalg::Matrix> rhf_gradients(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                                          const ScfResult& scf, const std::vector<DensityCorrection>& corrections,
                                          linalg::Kernels& kernels, const HalfTransformedStorage& storage = {});

// The dipole moment (a.u., origin at 0) of the nuclei of `molecule` and the electrons of density `density`.
std::array<double, 3> dipole_moment(const Molecule& molecule, const BasisSet& basis, const linalg::Matrix& density);

}  // namespace dfmp2::chem
