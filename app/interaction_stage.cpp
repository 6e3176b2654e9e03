// Interaction energies (README "Interaction energies"): the stage of the fragments in their own basis (each a
// calculation of its own, after the complex), and the parts and schemes the report and the results file read. The
// fragments in the complex's basis need no stage: their SCFs run in the SCF stage, their DF-MP2 in the complex's
// runs.
#include <fmt/format.h>

#include "app/stage.hpp"
#include "chem/mp2/mp2.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {

namespace {

// A fragment in its own basis (interaction.bsse nocp or both): the input of a calculation of its own, with the
// complex's settings.
Input own_basis_input(const Input& input, std::size_t k) {
  Input in = input;
  const chem::Molecule& mol = *input.molecule;
  in.molecule = chem::fragment_molecule(mol, mol.fragments[k]);
  in.reference = fragment_reference(input, *in.molecule);
  in.molecule_source = fmt::format("fragment {} of {}", k + 1, input.molecule_source);
  in.interaction.reset();
  in.output.reset();
  in.save_integrals.reset();
  in.qcschema.reset();
  return in;
}

// Before any work: each fragment in its own basis can run (its basis sets, its frozen core, its memory plan on
// these backends from the memory in use at the start). Smaller than the complex, it fits where the complex does,
// unless the complex's fitting sets leave out a fragment's element.
void check_own_basis_fragments(const Input& input, const std::vector<linalg::Backend*>& backends, int ranks,
                               double resident_at_start) {
  if (!input.interaction || !input.interaction->uncorrected) return;
  for (std::size_t k = 0; k < input.molecule->fragments.size(); ++k) {
    const std::string which = fmt::format("fragment {} in its own basis (interaction.bsse nocp): ", k + 1);
    try {
      const Input fragment = own_basis_input(input, k);
      const Reference r = make_reference(fragment);
      make_memory_plan(fragment, r, backends, ranks, resident_at_start);
    } catch (const InputError& e) {
      throw InputError(e.where(), e.key(), which + e.text());
    } catch (const ResourceError& e) {
      throw ResourceError(which + e.what());
    }
  }
}

// Each fragment in its own basis (interaction.bsse nocp or both), after the complex: a calculation of its own, on the
// same ranks, its progress indented under a line that names it.
void run_own_basis_fragments(Calculation& calc, linalg::Comm& comm,
                             const std::function<void(const std::string&)>& progress,
                             const std::function<void(const std::string&, long long, long long)>& phase_progress) {
  const Input& input = calc.input;
  if (!input.interaction || !input.interaction->uncorrected) return;
  for (std::size_t k = 0; k < input.molecule->fragments.size(); ++k) {
    Input fragment = own_basis_input(input, k);
    fragment.resident_at_start = resident_bytes();
    if (progress) progress(fmt::format("  fragment {} in its own basis ({} atoms):", k + 1, fragment.molecule->atoms.size()));
    auto indented = [&](const std::string& line) {
      if (progress) progress("  " + line);
    };
    calc.own_basis.push_back(
        {k, std::make_unique<Calculation>(run_calculation(fragment, comm, indented, phase_progress))});
  }
}

class OwnBasisStage final : public Stage {
 public:
  void plan(StageContext& c) override {
    c.comm.checked([&] {
      check_own_basis_fragments(c.input, c.backends.named_list(), c.comm.size(), c.resident_at_start);
    });
  }
  void run(StageContext& c) override { run_own_basis_fragments(c.calc, c.comm, c.progress, c.phase_progress); }
};

}  // namespace

std::unique_ptr<Stage> make_own_basis_stage() { return std::make_unique<OwnBasisStage>(); }

std::vector<InteractionPart> interaction_parts(const Calculation& calc, std::size_t run) {
  const Reference& r = calc.reference;
  const MoleculeRun& m = *r.molecule();
  const BackendRun& complex = calc.runs.at(run);
  std::vector<InteractionPart> parts;
  parts.push_back({"complex", 0, false, r.nbf, r.nocc, r.beta_occupied(), r.nfrozen, &m.scf, &complex.result, m.scf_seconds});
  for (std::size_t k = 0; k < r.ghosted.size(); ++k) {
    const GhostedFragment& g = r.ghosted[k];
    parts.push_back({fmt::format("fragment {}", g.fragment + 1), g.fragment + 1, false, r.nbf, g.nocc,
                     g.scf_reference == chem::ScfReference::rhf ? g.nocc : g.nocc_beta, g.nfrozen, &g.scf,
                     &complex.ghosted.at(k), g.scf_seconds});
  }
  for (const OwnBasisFragment& o : calc.own_basis) {
    const Reference& f = o.calc->reference;
    const MoleculeRun& fm = *f.molecule();
    parts.push_back({fmt::format("fragment {}", o.fragment + 1), o.fragment + 1, true, f.nbf, f.nocc, f.beta_occupied(),
                     f.nfrozen, &fm.scf, &o.calc->runs.at(run).result, fm.scf_seconds + fm.integral_seconds,
                     o.calc->runs.at(run).wall_seconds});
  }
  return parts;
}


std::vector<InteractionEnergy> interaction_energies(const Calculation& calc, std::size_t run) {
  std::vector<InteractionEnergy> out;
  if (!calc.input.interaction) return out;
  const std::vector<InteractionPart> parts = interaction_parts(calc, run);
  // The complex's energies minus those of the fragments of one basis.
  auto scheme = [&](const char* name, bool own_basis) {
    std::vector<chem::InteractionTerm> fragments;
    for (const InteractionPart& p : parts)
      if (p.fragment != 0 && p.own_basis == own_basis) fragments.push_back({p.scf, p.mp2});
    out.push_back(chem::interaction_energy(name, {parts.front().scf, parts.front().mp2}, fragments));
  };
  if (calc.input.interaction->counterpoise) scheme("CP", false);
  if (calc.input.interaction->uncorrected) scheme("NOCP", true);
  return out;
}

}  // namespace dfmp2::app
