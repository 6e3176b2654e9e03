#pragma once
// Orbitals in the Molden format (G. Schaftenaar's; read by Molden, Jmol, Avogadro, Open Babel, Multiwfn, ...):
// [Atoms] in bohr, [GTO] with the basis set's contraction coefficients of normalised primitives, [5D7F] and [9G] for
// spherical shells, and [MO] with each orbital's energy, spin and occupation. Spherical functions are written in
// Molden's order (m = 0, +1, -1, +2, -2, ...), not libint2's (m = -l..l). Cartesian shells of l >= 2 (whose
// normalisation Molden takes otherwise than libint2) and shells above g are an UnsupportedError.
#include <string>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// One set of orbitals: AO coefficients (nbf x n, libint2's order), their energies (Eh; natural orbitals: none, 0)
// and occupations, and the spin Molden labels them with.
struct MoldenOrbitals {
  linalg::Matrix coefficients;
  linalg::Vector energies, occupations;
  bool beta = false;
};

std::string molden_text(const Molecule& molecule, const BasisSet& basis, const std::vector<MoldenOrbitals>& sets);

}  // namespace dfmp2::chem
