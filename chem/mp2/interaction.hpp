#pragma once
// Interaction energies: the complex's energies minus its fragments', with the fragments in the complex's basis
// (the counterpoise correction, Psi4's "CP") or each in its own ("NOCP").
#include <string>
#include <vector>

#include "chem/mp2/dfmp2.hpp"
#include "chem/scf/scf.hpp"

namespace dfmp2::chem {

// An interaction energy (Eh): SCF, the MP2 correlation and its parts, SCS-MP2 and the totals.
struct InteractionEnergy {
  std::string scheme;  // "CP" (fragments in the complex's basis) or "NOCP" (each in its own), Psi4's prefixes
  double scf = 0, singles = 0, opposite_spin = 0, same_spin = 0, correlation = 0, scs_correlation = 0;
  double mp2_total() const { return scf + correlation; }
  double scs_total() const { return scf + scs_correlation; }
};

// One calculation of an interaction energy: its SCF and its DF-MP2 result.
struct InteractionTerm {
  const ScfResult* scf = nullptr;
  const DfMp2Result* mp2 = nullptr;
};

// The complex's energies minus the sum of the fragments' (all of one basis), as `scheme`.
InteractionEnergy interaction_energy(const std::string& scheme, const InteractionTerm& complex,
                                     const std::vector<InteractionTerm>& fragments);

}  // namespace dfmp2::chem
