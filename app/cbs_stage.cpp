// Basis-set extrapolation (README "Basis-set extrapolation"): the stage that runs each smaller basis of the series as
// a calculation of its own, after the largest basis's (the run's own calculation), and takes the energies, gradients
// and interaction energies to the limit by the input's schemes (chem/cbs), as Psi4's cbs() does: the SCF stage's
// scheme over the SCF series' SCF energies, the correlation stage's over the correlation series' correlation energies.
#include <fmt/format.h>

#include "app/cbs_options.hpp"
#include "app/stage.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

namespace {

// Before any work: each smaller basis's calculation can run (its basis sets, frozen core and memory plan on these
// backends from the memory in use at the start). Smaller than the run's own, it fits where that does.
void check_smaller_bases(const Input& input, const std::vector<linalg::Backend*>& backends, int ranks,
                         double resident_at_start) {
  for (const std::string& name : input.cbs->all.names) {
    if (name == input.basis) continue;
    try {
      const Input in = cbs_basis_input(input, name);
      make_memory_plan(in, make_reference(in), backends, ranks, resident_at_start);
    } catch (const InputError& e) {
      throw InputError(e.where(), e.key(), fmt::format("the extrapolation's {}: {}", name, e.text()));
    } catch (const ResourceError& e) {
      throw ResourceError(fmt::format("the extrapolation's {}: {}", name, e.what()));
    }
  }
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

class CbsStage final : public Stage {
 public:
  void plan(StageContext& c) override {
    c.comm.checked([&] {
      check_smaller_bases(c.input, c.backends.named_list(), c.comm.size(), c.resident_at_start);
    });
  }
  void run(StageContext& c) override {
    linalg::Stopwatch clock;
    CbsRun& cbs = c.calc.cbs.emplace();
    const chem::BasisSeries& all = c.input.cbs->all;
    for (std::size_t k = 0; k < all.names.size(); ++k) {
      CbsRun::Basis b{all.names[k], all.zetas[k], nullptr, 0, 0};
      if (all.names[k] != c.input.basis) {
        Input in = cbs_basis_input(c.input, all.names[k]);
        in.resident_at_start = resident_bytes();
        c.say(fmt::format("  {} for the extrapolation:", all.names[k]));
        auto indented = [&](const std::string& line) { c.say("  " + line); };
        b.calc = std::make_unique<Calculation>(run_calculation(in, c.comm, indented, c.phase_progress));
      }
      cbs.bases.push_back(std::move(b));
    }
    cbs.seconds = clock.seconds();
    extrapolate_run(c.calc);
  }
};

}  // namespace

std::unique_ptr<Stage> make_cbs_stage() { return std::make_unique<CbsStage>(); }

}  // namespace dfmp2::app
