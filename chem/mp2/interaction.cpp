#include "chem/mp2/interaction.hpp"

namespace dfmp2::chem {

InteractionEnergy interaction_energy(const std::string& scheme, const InteractionTerm& complex,
                                     const std::vector<InteractionTerm>& fragments) {
  InteractionEnergy e;
  e.scheme = scheme;
  auto add = [&e](const InteractionTerm& t, double sign) {
    e.scf += sign * t.scf->energy;
    e.singles += sign * t.mp2->singles;
    e.opposite_spin += sign * t.mp2->opposite_spin;
    e.same_spin += sign * t.mp2->same_spin;
    e.correlation += sign * t.mp2->correlation();
  };
  add(complex, 1.0);
  for (const InteractionTerm& f : fragments) add(f, -1.0);
  return e;
}

}  // namespace dfmp2::chem
