// driver: properties (README "Properties"): after the gradient stage has made DF-MP2's unrelaxed and relaxed
// densities without any derivative integral (chem::DfMp2GradientInput::derivatives false), what they and the SCF's
// density give: multipoles, Mulliken and Loewdin charges, natural orbitals (chem/properties).
#include <fmt/format.h>

#include "app/stage.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

namespace {

// The electrostatic potential of the SCF and the relaxed density at the points asked for, and the charges fitted to
// each on the Merz-Kollman shells (with the density's dipole held when asked).
void electrostatics(const Input::PropertiesOptions& options, const chem::Molecule& molecule, const chem::BasisSet& basis,
                    PropertiesRun& p) {
  const linalg::Matrix scf = p.scf.density.total(), relaxed = p.relaxed.density.total();
  if (!options.esp_points.empty()) {
    p.esp_scf = chem::electrostatic_potential(molecule, basis, scf, options.esp_points);
    p.esp_relaxed = chem::electrostatic_potential(molecule, basis, relaxed, options.esp_points);
  }
  if (!options.esp_charges) return;
  chem::EspGridOptions grid;
  grid.density = options.esp_density;
  p.fit_points = chem::merz_kollman_points(molecule, grid);
  auto fit = [&](const linalg::Matrix& density, std::vector<double>& potential) {
    const std::array<double, 3> dipole = chem::multipoles(molecule, basis, density).dipole;  // about 0, as the fit's
    potential = chem::electrostatic_potential(molecule, basis, density, p.fit_points);
    return chem::fit_charges(molecule, p.fit_points, potential, options.esp_charges_dipole ? &dipole : nullptr);
  };
  p.fitted_scf = fit(scf, p.fit_potential_scf);
  p.fitted_relaxed = fit(relaxed, p.fit_potential_relaxed);
}

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
    p.origin = c.input.properties.origin;
    const linalg::Matrix overlap = chem::overlap_matrix(m.basis);
    // The natural orbitals are found in the space of the SCF's (alpha) orbitals: orthonormal, and every density's.
    auto properties_of = [&](const std::array<linalg::Matrix, 2>& d) {
      return chem::density_properties(molecule, m.basis, {d[0], d[1]}, overlap, m.scf.mo_coefficients, p.origin);
    };
    p.scf = properties_of(g.scf_densities);
    p.unrelaxed = properties_of(g.unrelaxed_densities);
    p.relaxed = properties_of(g.relaxed_densities);
    electrostatics(c.input.properties, molecule, m.basis, p);
    p.seconds = clock.seconds();
    c.say(fmt::format("  properties of the SCF, unrelaxed and relaxed densities ({:.2f} s)", p.seconds));
  }
};

}  // namespace

std::unique_ptr<Stage> make_properties_stage() { return std::make_unique<PropertiesStage>(); }

}  // namespace dfmp2::app
