#pragma once
// Interaction energies: the complex's energies minus its fragments', with the fragments in the complex's basis
// (the counterpoise correction, Psi4's "CP") or each in its own ("NOCP").
#include <string>
#include <vector>

#include "chem/mp2/dfmp2.hpp"
#include "chem/scf/scf.hpp"

namespace dfmp2::chem {

// An interaction energy (Eh): SCF, the MP2 correlation and its parts, and the totals of any spin scaling.
struct InteractionEnergy {
  std::string scheme;  // "CP" (fragments in the complex's basis) or "NOCP" (each in its own), Psi4's prefixes
  double scf = 0, singles = 0, opposite_spin = 0, same_spin = 0, correlation = 0;
  double mp2_total() const { return scf + correlation; }
  double correlation_with(SpinScales s) const {
    return singles + s.opposite_spin * opposite_spin + s.same_spin * same_spin;
  }
  // MP2's (1, 1) is mp2_total() itself, to the last bit: the correlation summed as each calculation's.
  double total_with(SpinScales s) const {
    return s.opposite_spin == 1.0 && s.same_spin == 1.0 ? mp2_total() : scf + correlation_with(s);
  }
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
