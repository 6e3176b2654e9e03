// Basis-set extrapolation (README "Basis-set extrapolation"): each basis of the series a calculation of its own,
// smallest first, each SCF starting from the orbitals of the basis before it projected into its own (the largest
// basis's is the run's own calculation, which the report and the results describe), then the energies, gradients and
// interaction energies taken to the limit by the input's schemes (chem/cbs), as Psi4's cbs() does: the SCF stage's
// scheme over the SCF series' SCF energies, the correlation stage's over the correlation series' correlation energies.
#include <fmt/format.h>

#include "app/cbs_options.hpp"
#include "app/run.hpp"
#include "app/stage.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

namespace {

// Before any work: every basis's calculation can run (its basis sets, frozen core and memory plan on these backends).
void check_every_basis(const Input& input, linalg::Comm& comm) {
  for (const std::string& name : input.cbs->all.names) {
    try {
      plan_calculation(name == input.basis ? input : cbs_basis_input(input, name), comm);
    } catch (const InputError& e) {
      throw InputError(e.where(), e.key(), fmt::format("the extrapolation's {}: {}", name, e.text()));
    } catch (const ResourceError& e) {
      throw ResourceError(fmt::format("the extrapolation's {}: {}", name, e.what()));
    }
  }
}

// The SCF of `in` starts from the occupied orbitals of `previous` (a smaller basis of the same molecule), projected.
void start_from(const Calculation* previous, Input& in) {
  if (previous == nullptr) return;
  const MoleculeRun& m = *previous->reference.molecule();
  in.scf.guess = chem::ScfGuess::orbitals;
  in.scf.start_basis = &m.basis;
  in.scf.start_orbitals = &chem::start_orbitals(m.scf);
  in.scf.start_orbitals_beta = m.scf.reference == chem::ScfReference::uhf ? &m.scf.mo_coefficients_beta : nullptr;
}

const Calculation& calculation_of(const Calculation& own, const CbsRun& cbs, const std::string& name) {
  for (const CbsRun::Basis& b : cbs.bases)
    if (b.name == name) return b.calc ? *b.calc : own;
  throw std::logic_error("cbs: no calculation in " + name);
}

// The limit of `value(calculation)` over `series` by `scheme`.
template <class T, class F>
T limit_of(const Calculation& own, const CbsRun& cbs, const chem::BasisSeries& series, chem::CbsScheme scheme,
           std::optional<double> alpha, F value) {
  std::vector<T> values;
  for (const std::string& name : series.names) values.push_back(value(calculation_of(own, cbs, name)));
  return chem::extrapolate(scheme, series.zetas, values, alpha);
}

void extrapolate_run(Calculation& calc) {
  const CbsOptions& o = *calc.input.cbs;
  CbsRun& cbs = *calc.cbs;
  const chem::SpinScales scales = calc.input.mp2_model.scales();
  for (CbsRun::Basis& b : cbs.bases) {
    const Calculation& c = b.calc ? *b.calc : calc;
    b.scf = *c.reference.scf_energy;
    b.correlation = c.runs.front().result.correlation(scales);
  }
  cbs.scf = limit_of<double>(calc, cbs, o.scf, o.scf_scheme, o.scf_alpha,
                             [](const Calculation& c) { return *c.reference.scf_energy; });
  cbs.correlation = limit_of<double>(calc, cbs, o.corl, o.corl_scheme, o.corl_alpha, [&](const Calculation& c) {
    return c.runs.front().result.correlation(scales);
  });
  if (calc.gradient && calc.input.driver == Driver::gradient) {
    cbs.scf_gradient = limit_of<linalg::Matrix>(calc, cbs, o.scf, o.scf_scheme, o.scf_alpha, [](const Calculation& c) {
      return c.gradient->result.scf_gradient;
    });
    const linalg::Matrix correlation = limit_of<linalg::Matrix>(
        calc, cbs, o.corl, o.corl_scheme, o.corl_alpha,
        [](const Calculation& c) -> linalg::Matrix { return c.gradient->result.gradient - c.gradient->result.scf_gradient; });
    cbs.gradient = *cbs.scf_gradient + correlation;
  }
  // Interaction energies: each part of each scheme (linear schemes only, read_cbs_options checks).
  const std::vector<InteractionEnergy> own = interaction_energies(calc, 0);
  for (std::size_t s = 0; s < own.size(); ++s) {
    InteractionEnergy e;
    e.scheme = own[s].scheme;
    auto part = [&](const chem::BasisSeries& series, chem::CbsScheme scheme, std::optional<double> alpha,
                    double InteractionEnergy::*field) {
      return limit_of<double>(calc, cbs, series, scheme, alpha,
                              [&](const Calculation& c) { return interaction_energies(c, 0).at(s).*field; });
    };
    e.scf = part(o.scf, o.scf_scheme, o.scf_alpha, &InteractionEnergy::scf);
    e.singles = part(o.corl, o.corl_scheme, o.corl_alpha, &InteractionEnergy::singles);
    e.opposite_spin = part(o.corl, o.corl_scheme, o.corl_alpha, &InteractionEnergy::opposite_spin);
    e.same_spin = part(o.corl, o.corl_scheme, o.corl_alpha, &InteractionEnergy::same_spin);
    e.correlation = part(o.corl, o.corl_scheme, o.corl_alpha, &InteractionEnergy::correlation);
    cbs.interaction.push_back(e);
  }
}

// A smaller basis's calculation once it has run: what the limit and the next basis's guess read stays (energies,
// gradients, orbitals, interaction parts); its SCF's J/K, the metric and the three-index engine go, so that the next
// basis runs within `memory` as its own plan counts it.
void release_working_data(Calculation& calc) {
  if (MoleculeRun* m = calc.reference.molecule()) {
    m->scf_jk.reset();
    m->ao_3index.reset();
    m->metric = linalg::Matrix();
  }
}

}  // namespace

Calculation run_cbs_calculation(const Input& input, linalg::Comm& comm, const Progress& progress,
                                const PhaseProgress& phase_progress) {
  check_every_basis(input, comm);
  linalg::Stopwatch clock;
  std::vector<CbsRun::Basis> bases;
  const Calculation* previous = nullptr;
  const chem::BasisSeries& all = input.cbs->all;
  for (std::size_t k = 0; k + 1 < all.names.size(); ++k) {
    Input in = cbs_basis_input(input, all.names[k]);
    start_from(previous, in);
    in.resident_at_start = resident_bytes();
    if (progress) progress(fmt::format("  {} for the extrapolation:", all.names[k]));
    auto indented = [&](const std::string& line) {
      if (progress) progress("  " + line);
    };
    bases.push_back({all.names[k], all.zetas[k],
                     std::make_unique<Calculation>(run_calculation(in, comm, indented, phase_progress)), 0, 0});
    release_working_data(*bases.back().calc);
    previous = bases.back().calc.get();
  }
  const double smaller_seconds = clock.seconds();
  // The run's own basis, its SCF from the largest smaller basis's orbitals.
  Input own = input;
  own.cbs.reset();  // run_calculation would come back here
  start_from(previous, own);
  own.resident_at_start = std::max(input.resident_at_start, resident_bytes());
  if (progress) progress(fmt::format("  {} (the run's own basis):", input.basis));
  Calculation calc = run_calculation(own, comm, progress, phase_progress);
  calc.input.cbs = input.cbs;
  bases.push_back({all.names.back(), all.zetas.back(), nullptr, 0, 0});
  CbsRun& cbs = calc.cbs.emplace();
  cbs.bases = std::move(bases);
  cbs.seconds = smaller_seconds;
  extrapolate_run(calc);
  return calc;
}

}  // namespace dfmp2::app
