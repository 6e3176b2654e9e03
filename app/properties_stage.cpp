// driver: properties (README "Properties"): after the gradient stage has made DF-MP2's unrelaxed and relaxed
// densities without any derivative integral (chem::DfMp2GradientInput::derivatives false), what they and the SCF's
// density give: multipoles, Mulliken and Loewdin charges, natural orbitals (chem/properties).
#include <fmt/format.h>

#include "app/stage.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

namespace {

// The Merz-Kollman fit's points, their potentials and inverse distances to the atoms (twice: the fit's product).
double fit_bytes(const Input& input) {
  chem::EspGridOptions grid;
  grid.density = input.properties.esp_density;
  const auto points = static_cast<double>(chem::merz_kollman_points(*input.molecule, grid).size());
  const auto atoms = static_cast<double>(input.molecule->atoms.size());
  return points * (2 * atoms + 8) * sizeof(double) + (atoms + 4) * (atoms + 4) * 3 * sizeof(double);
}

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
  // After the gradient phase has let its blocks and J/K go: beside the SCF's matrices, the three densities of each
  // spin and their natural orbitals, the overlap and the Loewdin charges' S^1/2 with its eigenvectors
  // (kMatrices nbf^2), the points and the potentials at them.
  void plan(StageContext& c) override {
    c.comm.checked([&] {
      MemoryPlan& plan = c.calc.memory;
      const Reference& r = c.calc.reference;
      const Input::PropertiesOptions& o = c.input.properties;
      constexpr double kMatrices = 32;
      const double nbf = static_cast<double>(r.nbf);
      const double points = static_cast<double>(o.esp_points.size()) * 5 * sizeof(double);
      // Molden files: each written whole at the end of the run, about 28 characters per coefficient (and a line per
      // orbital), both spins' sets.
      constexpr double kMoldenBytesPerCoefficient = 28;
      const double molden = ((o.molden ? 1 : 0) + (o.scf_molden ? 1 : 0)) * 2 * kMoldenBytesPerCoefficient * nbf * nbf;
      const double held = kMatrices * nbf * nbf * sizeof(double) + points + (o.esp_charges ? fit_bytes(c.input) : 0.0) +
                          molden;
      const double base = plan.baseline + scf_matrix_bytes(r.nbf, c.input.scf.diis_vectors, r.open_shell());
      within_memory(plan, base, [&] {
        if (base + held > plan.budget) {
          throw PhaseTooLarge(phase_name(Phase::mp2_properties), held,
                              "the densities, their natural orbitals and the potential's points do not fit");
        }
        return 0;
      });
      plan.phases.push_back({Phase::mp2_properties, "memory", "",  held, 0.0,
                             "the SCF, unrelaxed and relaxed densities by spin, their natural orbitals, the overlap"
                             + std::string(o.esp_points.empty() ? "" : ", the potential's points") +
                             (o.esp_charges ? ", the fit's shells of points" : "") +
                             (molden > 0 ? ", the Molden files' text" : "")});
    });
  }
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
