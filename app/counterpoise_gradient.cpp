// Counterpoise-corrected gradients (README "Counterpoise-corrected gradients"). With `interaction` (bsse cp or both)
// and driver gradient or hessian, the run returns the gradient of the CP-corrected total energy, as Psi4's
// bsse_type='cp' defines it:
//   E_CP = E_AB(AB) - sum_k E_k(AB) + sum_k E_k(k)
// the complex in its basis, less each fragment k in the complex's basis (its partners' atoms ghosts: their basis
// functions move with them, so the ghosts feel forces too), plus each fragment in its own basis. The complex's
// gradient is the gradient stage's; each fragment's is a gradient calculation of its own after it, its SCF started
// from the orbitals the energy stages converged for it (the same basis), a few iterations from its own.
#include "app/counterpoise_gradient.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "app/stage.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {

void check_counterpoise_gradient(const YAML::Node& node, const YamlReader& ctx, const Input& in) {
  const std::string driver = linalg::name_in(driver_names(), in.driver);
  if (!in.interaction->counterpoise) {
    ctx.fail_key(node, "driver", fmt::format("{{key}}: {} with 'interaction: {{bsse: nocp}}': the uncorrected total "
                                             "energy is the complex's own, so run the complex without 'interaction' "
                                             "(bsse cp or both gives the counterpoise-corrected {})", driver, driver));
  }
}

namespace {

// Fragment k's calculation for the gradient: in the complex's basis (the ghosted molecule the energy stages ran) or in
// its own, with the complex's settings, its SCF from `orbitals` when there are some.
Input fragment_gradient_input(const Input& input, const chem::Molecule& molecule, const std::string& source,
                              const std::string& backend, const chem::ScfResult* orbitals) {
  Input in = input;
  in.molecule = molecule;
  in.reference = fragment_reference(input, molecule);
  in.molecule_source = source;
  in.driver = Driver::gradient;
  in.interaction.reset();
  in.output.reset();
  in.save_integrals.reset();
  in.qcschema.reset();
  // What its gradient needs and no more: the gradient's backend in fp64 (the energy it differentiates).
  in.backends = {backend};
  in.precisions = {chem::Precision::fp64};
  in.backend_precisions.clear();
  in.screening_compare = false;
  in.scf.start_orbitals_beta = nullptr;
  if (orbitals != nullptr) {
    in.scf.guess = chem::ScfGuess::orbitals;
    in.scf.start_orbitals = &chem::start_orbitals(*orbitals);
    if (orbitals->reference == chem::ScfReference::uhf) in.scf.start_orbitals_beta = &orbitals->mo_coefficients_beta;
  } else if (in.scf.guess == chem::ScfGuess::orbitals) {
    // The complex's own start (a displaced geometry of a Hessian starts from the undisplaced complex's orbitals):
    // not in this basis, so the default guess.
    in.scf.guess = chem::ScfOptions{}.guess;
    in.scf.start_orbitals = nullptr;
  }
  return in;
}

// The fragment's gradient in the complex's atoms (its own basis: its atoms' rows, the others' zero).
linalg::Matrix in_complex_atoms(const linalg::Matrix& gradient, const chem::Molecule& complex, std::size_t k,
                                bool own_basis) {
  if (!own_basis) return gradient;
  linalg::Matrix out = linalg::Matrix::Zero(static_cast<linalg::Index>(complex.atoms.size()), 3);
  const chem::Fragment& f = complex.fragments[k];
  out.middleRows(static_cast<linalg::Index>(f.first), static_cast<linalg::Index>(f.count)) = gradient;
  return out;
}

// Fragment k in the complex's basis or in its own, and its name.
std::pair<chem::Molecule, std::string> fragment_system(const chem::Molecule& complex, std::size_t k, bool own_basis) {
  return {own_basis ? chem::fragment_molecule(complex, complex.fragments[k])
                    : chem::fragment_in_complex_basis(complex, complex.fragments[k]),
          fmt::format("fragment {} in {} basis", k + 1, own_basis ? "its own" : "the complex's")};
}

// Before any work: each fragment's gradient calculation fits (its memory plan from the memory in use now), else the
// one line of its plan, naming the fragment.
void check_fragment_plans(StageContext& c) {
  const chem::Molecule& complex = *c.input.molecule;
  const std::string backend = c.backends.scf->name();
  for (std::size_t k = 0; k < complex.fragments.size(); ++k) {
    for (const bool own_basis : {false, true}) {
      const auto [molecule, name] = fragment_system(complex, k, own_basis);
      Input in = fragment_gradient_input(c.input, molecule, name, backend, nullptr);
      in.resident_at_start = resident_bytes();
      try {
        plan_calculation(in, c.comm);
      } catch (const ResourceError& e) {
        throw ResourceError(fmt::format("counterpoise-corrected gradient, {}: {}", name, e.what()));
      }
    }
  }
}

// The orbitals the energy stages converged for fragment k in this basis, if any: the complex-basis fragment's always
// (bsse cp or both), the own-basis fragment's with bsse both.
const chem::ScfResult* energy_orbitals(const Calculation& calc, std::size_t k, bool own_basis) {
  if (!own_basis) return &calc.reference.ghosted[k].scf;
  for (const OwnBasisFragment& f : calc.own_basis)
    if (f.fragment == k) return &f.calc->reference.molecule()->scf;
  return nullptr;
}

void run_counterpoise_gradient(StageContext& c) {
  const Input& input = c.input;
  Calculation& calc = c.calc;
  const chem::Molecule& complex = *input.molecule;
  const chem::SpinScales scales = input.mp2_model.scales();
  CounterpoiseGradient& cp = calc.counterpoise.emplace();
  cp.gradient = calc.gradient->result.gradient;
  cp.energy = *calc.reference.scf_energy + calc.runs.front().result.correlation(scales);
  linalg::Stopwatch clock;
  for (std::size_t k = 0; k < complex.fragments.size(); ++k) {
    for (const bool own_basis : {false, true}) {
      const auto [molecule, name] = fragment_system(complex, k, own_basis);
      const chem::ScfResult* orbitals = energy_orbitals(calc, k, own_basis);
      Input in = fragment_gradient_input(input, molecule, fmt::format("{} of {}", name, input.molecule_source),
                                         calc.gradient->backend, orbitals);
      in.resident_at_start = resident_bytes();
      c.say(fmt::format("  counterpoise-corrected gradient: {} ({} atoms):", name, molecule.atoms.size()));
      auto indented = [&](const std::string& line) { c.say("  " + line); };
      const Calculation part = run_calculation(in, c.comm, indented, c.phase_progress);
      const double sign = own_basis ? 1.0 : -1.0;
      CounterpoiseGradient::Part p;
      p.name = name;
      p.sign = sign;
      p.energy = *part.reference.scf_energy + part.runs.front().result.correlation(scales);
      p.gradient = in_complex_atoms(part.gradient->result.gradient, complex, k, own_basis);
      p.scf_iterations = part.reference.molecule()->scf.iterations;
      p.from_energy_orbitals = orbitals != nullptr;
      cp.gradient += sign * p.gradient;
      cp.energy += sign * p.energy;
      cp.parts.push_back(std::move(p));
    }
  }
  cp.seconds = clock.seconds();
  c.say(fmt::format("  counterpoise-corrected gradient done ({:.2f} s): E_CP = {:.12f} Eh", cp.seconds, cp.energy));
}

// Its calculations are planned before any work (each as a gradient calculation of its own), and plan themselves
// again when they start, on the memory then in use.
class CounterpoiseGradientStage final : public Stage {
 public:
  void plan(StageContext& c) override { check_fragment_plans(c); }
  void run(StageContext& c) override { run_counterpoise_gradient(c); }
};

}  // namespace

std::unique_ptr<Stage> make_counterpoise_gradient_stage() { return std::make_unique<CounterpoiseGradientStage>(); }

}  // namespace dfmp2::app
