#pragma once
// Analytic RHF and UHF gradients (Eh/bohr, one row per atom, columns x, y, z), and the part of a correlated gradient
// that has the same form: a one-particle density and an energy-weighted density added to the SCF's.
//
// With D = sum_c 2 w_c C_c C_c^T over the exchange channels c (RHF: the doubly occupied orbitals C_o, w = 1; UHF: the
// alpha and the beta occupied orbitals, w = 1/2 each) and W the energy-weighted density, an energy functional
//   E = sum P_mn h_mn + sum_mn P_mn J(D)_mn - sum_c sum_mn P_c,mn K(C_c C_c^T)_mn + V_nn
// (the SCF: P = D/2, P_c = w_c C_c C_c^T; a correlated method adds its relaxed density to P, each spin's part to its
// channel's P_c) differentiated with the densities held fixed (the orbital response is in W and in the relaxed P)
// gives
//   dE/dR = sum P d(T + V)/dR - sum W dS/dR + dV_nn/dR                  (chem::one_electron_gradient)
//         + d/dR of the two-electron terms                              (chem::two_electron_gradients)
// The two-electron terms with DF J and K (the JK fitting basis; J the metric (P|Q), c^P = J^-1 (Q|mn) fitted):
//   sum_P sum_mn d(P|mn)/dR [P d_D^P + D d_P^P - sum_c (P_c H_c^P C_c^T + C_c H_c^PT P_c)]_mn
//   + sum_PQ d(P|Q)/dR [sum_c H_c^P . (P_c H_c^Q) - 1/2 (d_P^P d_D^Q + d_D^P d_P^Q)]
// with d_X = J^-1 (Q|mn) X_mn the fitted densities and H_c^P = c^P C_c the fitted half-transformed integrals: the
// derivative of sum P_mn (mn|P)[J^-1]_PQ (Q|ls) D_ls and of the exchange through the three-index integrals and the
// metric. With exact J and K, libint2's four-centre first derivatives (chem::four_center_gradients).
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

// The orbitals one exchange term pairs (the header's channel c), its weight w_c in the SCF's density, and each
// correction's density P_c for it (the spin's part of a correlated method's relaxed density).
struct ExchangeChannel {
  linalg::Matrix c_occ;
  double weight = 1.0;
  std::vector<linalg::Matrix> corrections;
};

// d/dR of the two-electron terms for the SCF's P and then for P plus each of the channels' corrections (symmetric):
// one gradient each, in one pass over the derivative integrals. J and K fitted with `jk_basis` (its dense algebra on
// `kernels`), or exact when it is null. The DF form keeps each channel's H as `storage` says, and one block's
// products beside it.
std::vector<linalg::Matrix> two_electron_gradients(const BasisSet& basis, const BasisSet* jk_basis,
                                                   linalg::Index natoms, const std::vector<ExchangeChannel>& channels,
                                                   linalg::Kernels& kernels,
                                                   const HalfTransformedStorage& storage = {});

// A correlated method's additions to the SCF's densities: its relaxed one-particle density and energy-weighted
// density (AO, symmetric, spin-summed), and for a UHF reference the alpha part of the density (the beta part is the
// rest).
struct DensityCorrection {
  linalg::Matrix density, energy_weighted;
  linalg::Matrix alpha;
};

// The gradient of a converged RHF, UHF or ROHF `scf` of `molecule` in `basis`, J and K fitted with `jk_basis` (null:
// exact). (ROHF: over its semicanonical orbitals, whose densities are its own, with its Fock matrices for W.) Among
// point charges (scf.external_charges), one more row per charge after the atoms': dE/dR of its position.
linalg::Matrix scf_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                            const ScfResult& scf, linalg::Kernels& kernels);
// The same first, then the gradient with each of `corrections` added to its densities (the DF-MP2 gradient's
// separable part), all in one pass over the derivative integrals.
std::vector<linalg::Matrix> scf_gradients(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                                          const ScfResult& scf, const std::vector<DensityCorrection>& corrections,
                                          linalg::Kernels& kernels, const HalfTransformedStorage& storage = {});

// The dipole moment (a.u., origin at 0) of the nuclei of `molecule` and the electrons of density `density`.
std::array<double, 3> dipole_moment(const Molecule& molecule, const BasisSet& basis, const linalg::Matrix& density);

}  // namespace dfmp2::chem
