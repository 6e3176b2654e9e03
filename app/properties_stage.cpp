// driver: properties (README "Properties"): after the gradient stage has made DF-MP2's unrelaxed and relaxed
// densities without any derivative integral (chem::DfMp2GradientInput::derivatives false), what they and the SCF's
// density give: multipoles, Mulliken and Loewdin charges, natural orbitals (chem/properties).
#include <fmt/format.h>

#include "app/stage.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

namespace {

class PropertiesStage final : public Stage {
 public:
  // A few nbf^2 matrices per density, within what the gradient phase's SCF matrices already counted.
  void plan(StageContext&) override {}
  void run(StageContext& c) override {
    const MoleculeRun& m = *c.calc.reference.molecule();
    const chem::DfMp2Gradient& g = c.calc.gradient->result;
    const chem::Molecule& molecule = *c.input.molecule;
    linalg::Stopwatch clock;
    PropertiesRun& p = c.calc.properties.emplace();
    const linalg::Matrix overlap = chem::overlap_matrix(m.basis);
    // The natural orbitals are found in the space of the SCF's (alpha) orbitals: orthonormal, and every density's.
    auto properties_of = [&](const std::array<linalg::Matrix, 2>& d) {
      return chem::density_properties(molecule, m.basis, {d[0], d[1]}, overlap, m.scf.mo_coefficients, p.origin);
    };
    p.scf = properties_of(g.scf_densities);
    p.unrelaxed = properties_of(g.unrelaxed_densities);
    p.relaxed = properties_of(g.relaxed_densities);
    p.seconds = clock.seconds();
    c.say(fmt::format("  properties of the SCF, unrelaxed and relaxed densities ({:.2f} s)", p.seconds));
  }
};

}  // namespace

std::unique_ptr<Stage> make_properties_stage() { return std::make_unique<PropertiesStage>(); }

}  // namespace dfmp2::app
