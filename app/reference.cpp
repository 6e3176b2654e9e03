// The reference state DF-MP2 starts from (app/run.hpp Reference): an integral file, a synthetic problem, or a
// molecule's basis sets with its occupation (its SCF runs later, in the SCF stage); and the frozen core.
#include <fmt/format.h>

#include <algorithm>

#include "app/stage.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {

int resolve_frozen_core(const Input& input, const Reference& problem) {
  int n = 0;
  switch (input.frozen_core.kind) {
    case FrozenCore::Kind::none: return 0;
    case FrozenCore::Kind::count: n = input.frozen_core.count; break;
    case FrozenCore::Kind::psi4_rule:
      if (!problem.metadata.molecule) {
        throw InputError(input.path, "frozen_core", fmt::format("{{key}}: true needs the molecule, and {} has none (integral files: metadata attribute "
            "'molecule'); give the number of frozen orbitals instead", problem.description));
      }
      n = chem::frozen_core_orbitals(*problem.metadata.molecule);
      break;
  }
  if (n >= problem.nocc) {
    throw InputError(input.path, "frozen_core", fmt::format("{{key}}: freezing {} orbitals leaves none of the {} occupied orbitals "
                                 "of {} to correlate", n, problem.nocc, problem.description));
  }
  // Both spins freeze the same orbitals: the beta electrons must fill them.
  if (problem.open_shell() && n > problem.nocc_beta) {
    throw InputError(input.path, "frozen_core", fmt::format("{{key}}: freezing {} orbitals of each spin needs as many beta "
                                 "electrons, and {} has {}", n, problem.description, problem.nocc_beta));
  }
  return n;
}

namespace {

Reference reference_from_file(std::unique_ptr<chem::IntegralFile> file) {
  const chem::IntegralFile& f = *file;
  Reference p;
  p.kind = "integrals";
  const auto& md = f.metadata();
  p.description = fmt::format("{} ({} form", f.path(), f.form() == chem::ThreeIndexForm::ao ? "AO" : "MO");
  if (!md.basis.empty()) p.description += fmt::format("; {} / {}", md.basis, md.aux_basis);
  if (!md.generator.empty()) p.description += fmt::format("; from {}", md.generator);
  p.description += ")";
  p.form = f.form();
  p.nbf = f.form() == chem::ThreeIndexForm::ao ? f.nbf() : 0;
  p.nmo = f.nmo();
  p.nocc = f.nocc();
  p.scf_reference = f.reference();
  p.nocc_beta = f.nocc_beta();
  if (p.open_shell()) {
    p.description += fmt::format(", {}: {} alpha and {} beta occupied", chem::reference_label(f.reference()), p.nocc,
                                 p.nocc_beta);
  }
  p.naux = f.naux();
  p.scf_energy = f.scf_energy();
  p.nuclear_repulsion_energy = f.nuclear_repulsion_energy();
  p.metadata = md;
  p.source = std::move(file);
  return p;
}

Reference synthetic_reference(std::unique_ptr<chem::SyntheticProblem> problem, const std::string& name) {
  const chem::SyntheticProblem& s = *problem;
  Reference p;
  p.kind = "synthetic";
  const auto& shape = s.shape();
  p.description = fmt::format("synthetic {}(nbasis {}, nocc {}, naux {}, seed {})",
                              name.empty() ? "" : "'" + name + "' ", shape.nbasis, shape.nocc, shape.naux, shape.seed);
  p.form = chem::ThreeIndexForm::ao;
  p.nbf = p.nmo = s.nbasis();
  p.nocc = s.nocc();
  p.naux = s.naux();
  p.source = std::move(problem);
  return p;
}

// The reference and its occupied orbitals of each spin, from the molecule's charge and multiplicity.
void set_occupation(const chem::Molecule& mol, chem::ScfReference reference, Reference& r) {
  const auto [nalpha, nbeta] = chem::spin_occupied(mol, mol.multiplicity);
  r.scf_reference = reference;
  r.nocc = nalpha;
  r.nocc_beta = reference == chem::ScfReference::rhf ? 0 : nbeta;
}

}  // namespace

// A fragment's reference: RHF for a singlet (what UHF and ROHF give it too), else the complex's open-shell one, and
// UHF (the default for an open shell) for the open-shell fragments of a closed-shell complex.
chem::ScfReference fragment_reference(const Input& input, const chem::Molecule& fragment) {
  if (fragment.multiplicity == 1) return chem::ScfReference::rhf;
  return input.reference == chem::ScfReference::rhf ? chem::ScfReference::uhf : input.reference;
}


namespace {

// The occupation and frozen core of `mol` (no basis set yet), checked as the complex's are: `description` names it
// in the errors.
Reference occupation_of(const Input& input, const chem::Molecule& mol, chem::ScfReference reference,
                        const std::string& description) {
  Reference r;
  set_occupation(mol, reference, r);
  r.metadata.molecule = mol;
  r.description = description;
  r.nfrozen = resolve_frozen_core(input, r);
  return r;
}

// The fragments in the complex's basis (interaction.bsse cp or both), their occupations and frozen cores known.
std::vector<GhostedFragment> ghosted_fragments(const Input& input) {
  std::vector<GhostedFragment> out;
  if (!input.interaction || !input.interaction->counterpoise) return out;
  const chem::Molecule& mol = *input.molecule;
  for (std::size_t k = 0; k < mol.fragments.size(); ++k) {
    GhostedFragment g;
    g.fragment = k;
    g.molecule = chem::fragment_in_complex_basis(mol, mol.fragments[k]);
    g.scf_reference = fragment_reference(input, g.molecule);
    const Reference r = occupation_of(input, g.molecule, g.scf_reference, fmt::format("fragment {}", k + 1));
    g.nocc = r.nocc;
    g.nocc_beta = r.nocc_beta;
    g.nfrozen = r.nfrozen;
    out.push_back(std::move(g));
  }
  return out;
}

// The basis sets of `molecule:` input (no integral yet): what the memory plan needs to know. The SCF comes later
// (run_molecule), into the reference's MoleculeRun.
Reference molecule_reference(const Input& input) {
  auto m = std::make_unique<MoleculeRun>();
  const chem::Molecule& mol = *input.molecule;
  const int orbital_l = chem::max_orbital_angular_momentum(), fitting_l = chem::max_fitting_angular_momentum();
  m->basis = chem::load_basis(input.basis, mol, input.basis_dir, "basis", orbital_l);
  m->aux_basis = chem::load_basis(input.aux_basis, mol, input.basis_dir, "aux_basis", fitting_l);
  if (input.scf.type == chem::ScfType::df) {
    // The default JK fitting set is blended with the universal one for elements it lacks, as Psi4 does; a set named
    // in scf.jk_basis is taken as it is.
    m->jk_basis = chem::load_basis(input.jk_basis, mol, input.basis_dir, "scf.jk_basis", fitting_l,
                                   input.jk_basis_given ? "" : chem::kUniversalJkFit);
  }
  // As Psi4 1.3.2 does, the JK fitting set takes the orbital basis's form (cartesian d and higher for a cartesian
  // basis such as 6-31G*), while the MP2 fitting set keeps its file's form. Measured: with 6-31G* water, either
  // other choice moves the MP2 energy 1e-6 to 4e-5 Eh away from Psi4's.
  bool orbital_pure = true;
  for (const auto& sh : m->basis.shells) orbital_pure &= (sh.l < 2 || sh.pure);
  for (auto& sh : m->jk_basis.shells) {
    if (sh.l >= 2) sh.pure = orbital_pure;
  }
  Reference p;
  p.kind = "molecule";
  const auto ghosts = std::count_if(mol.atoms.begin(), mol.atoms.end(), [](const chem::Atom& a) { return a.ghost; });
  p.description = fmt::format("{} atoms{} from {}; {} / {}{}", mol.atoms.size(),
                              ghosts > 0 ? fmt::format(" ({} ghost{})", ghosts, ghosts == 1 ? "" : "s") : std::string(),
                              input.molecule_source, m->basis.name,
                              m->aux_basis.name,
                              input.scf.type == chem::ScfType::df ? fmt::format("; DF-SCF with {}", m->jk_basis.name)
                                                                  : std::string("; exact SCF"));
  p.form = chem::ThreeIndexForm::ao;
  p.nbf = p.nmo = m->basis.nbf();
  set_occupation(mol, input.reference, p);
  p.naux = m->aux_basis.nbf();
  // MP2 correlates occupied with virtual orbitals: without a virtual one there is nothing to compute (He in STO-3G).
  if (p.nocc >= p.nbf) {
    throw InputError(input.path, "basis", fmt::format("{{key}}: {} gives this molecule {} basis function{} for {} occupied "
                                 "orbital{}, so no virtual orbital to correlate; choose a larger basis", m->basis.name, p.nbf, p.nbf == 1 ? "" : "s", p.nocc, p.nocc == 1 ? "" : "s"));
  }
  p.metadata.molecule = mol;
  p.metadata.basis = m->basis.name;
  p.metadata.aux_basis = m->aux_basis.name;
  p.metadata.scf_type = input.scf.type == chem::ScfType::df ? "df" : "exact";
  p.metadata.generator = fmt::format("dfmp2 {}", DFMP2_VERSION);
  p.source = std::move(m);
  return p;
}

}  // namespace

Reference make_reference(const Input& input) {
  Reference reference;
  if (input.synthetic) {
    reference = synthetic_reference(std::make_unique<chem::SyntheticProblem>(*input.synthetic), input.synthetic_name);
  } else if (input.molecule) {
    // The frozen-core count is known from the molecule alone: checked before any basis set is loaded.
    occupation_of(input, *input.molecule, input.reference, "the molecule");
    std::vector<GhostedFragment> ghosted = ghosted_fragments(input);
    reference = molecule_reference(input);
    reference.ghosted = std::move(ghosted);
  } else {
    reference = reference_from_file(chem::IntegralFile::open(input.integrals));
  }
  reference.nfrozen = resolve_frozen_core(input, reference);
  if (input.screening.enabled && reference.form != chem::ThreeIndexForm::ao) {
    throw InputError(input.path, "screening", fmt::format("{{key}}: screens AO integrals (P|mn), and {} holds MO-form (P|ia)", reference.description));
  }
  return reference;
}

namespace {
template <class Source, class Variant>
Source* source_of(const Variant& v) {
  const auto* p = std::get_if<std::unique_ptr<Source>>(&v);
  return p != nullptr ? p->get() : nullptr;
}
}  // namespace

const chem::IntegralFile* Reference::integral_file() const { return source_of<chem::IntegralFile>(source); }
const chem::SyntheticProblem* Reference::synthetic() const { return source_of<chem::SyntheticProblem>(source); }
const MoleculeRun* Reference::molecule() const { return source_of<MoleculeRun>(source); }
MoleculeRun* Reference::molecule() { return source_of<MoleculeRun>(source); }

std::vector<chem::SpinSpace> Reference::mp2_spaces() const {
  std::vector<chem::SpinSpace> spaces = chem::system_spaces(0, open_shell(), nmo, nfrozen, nocc, nocc_beta);
  for (std::size_t k = 0; k < ghosted.size(); ++k) {
    for (const chem::SpinSpace& sp : ghosted[k].mp2_spaces(static_cast<int>(k + 1), nmo)) spaces.push_back(sp);
  }
  return spaces;
}

std::vector<chem::SpinSpace> GhostedFragment::mp2_spaces(int system, linalg::Index nmo) const {
  return chem::system_spaces(system, scf_reference != chem::ScfReference::rhf, nmo, nfrozen, nocc, nocc_beta);
}

std::vector<chem::Mp2System> Reference::mp2_systems() const {
  std::vector<chem::Mp2System> systems{{dfmp2_input(), nfrozen}};
  const MoleculeRun* m = molecule();
  for (const GhostedFragment& g : ghosted)
    systems.push_back({m->dfmp2_input_for(g.scf), g.nfrozen});
  return systems;
}

chem::DfMp2Input Reference::dfmp2_input() const {
  return std::visit(
      [](const auto& s) -> chem::DfMp2Input {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::monostate>) {
          throw std::logic_error("Reference::dfmp2_input: no source");
        } else {
          return s->dfmp2_input();
        }
      },
      source);
}

}  // namespace dfmp2::app
