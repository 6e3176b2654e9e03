#pragma once
// Analytic SCF gradients (Eh/bohr, one row per atom, columns x, y, z): the first piece of the DF-MP2 gradient
// (issue 27), which adds the MP2 relaxed density and the non-separable three-index terms to these.
//
// RHF with density-fitted J and K (the JK fitting basis), with D = 2 C_o C_o^T and W = 2 C_o e_o C_o^T:
//   dE/dR = sum D d(T + V)/dR - sum W dS/dR + dV_nn/dR                          (chem::one_electron_gradient)
//         + sum_P sum_mn d(P|mn)/dR [c_P D_mn - 2 G^P_mn]                      (chem::three_center_gradient)
//         + sum_PQ d(P|Q)/dR [Y_PQ - 1/2 c_P c_Q]                               (chem::metric_gradient)
// where c = J^-1 (P|mn) D_mn fits the density (J the metric (P|Q)), B^P_ij = sum_Q [J^-1]_PQ (Q|ij) fits the
// occupied pairs, G^P_mn = sum_ij C_mi C_nj B^P_ij and Y_PQ = sum_ij B^P_ij B^Q_ij: the derivative of
// E = ... + 1/2 c^T J c - sum_ij (ij|P) [J^-1]_PQ (Q|ij), the fitted Coulomb and exchange energies.
#include "chem/basis_set.hpp"
#include "chem/molecule.hpp"
#include "chem/scf.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// The gradient of a converged RHF `scf` of `molecule` in `basis`, its J and K fitted with `jk_basis`. Holds the
// three-index integrals (naux nbf^2) in memory: a gradient within the memory plan comes with the DF-MP2 gradient.
linalg::Matrix rhf_df_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet& jk_basis,
                               const ScfResult& scf);
// The gradient of a converged RHF with exact J and K: the same one-electron and nuclear terms, and the four-centre
// derivative integrals contracted with the two-particle density (chem::rhf_four_center_gradient).
linalg::Matrix rhf_exact_gradient(const Molecule& molecule, const BasisSet& basis, const ScfResult& scf);

}  // namespace dfmp2::chem
