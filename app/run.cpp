#include "app/run.hpp"

#include <fmt/format.h>
#include <omp.h>

#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::app {

int resolve_frozen_core(const Input& input, const Problem& problem) {
  int n = 0;
  switch (input.frozen_core.kind) {
    case FrozenCore::Kind::none: return 0;
    case FrozenCore::Kind::count: n = input.frozen_core.count; break;
    case FrozenCore::Kind::psi4_rule:
      if (!problem.metadata.molecule) {
        throw InputError(fmt::format(
            "{}: key 'frozen_core': true needs the molecule, and {} has none (integral files: metadata attribute "
            "'molecule'); give the number of frozen orbitals instead",
            input.path, problem.description));
      }
      n = chem::frozen_core_orbitals(*problem.metadata.molecule);
      break;
  }
  if (n >= problem.nocc) {
    throw InputError(fmt::format("{}: key 'frozen_core': freezing {} orbitals leaves none of the {} occupied orbitals "
                                 "of {} to correlate",
                                 input.path, n, problem.nocc, problem.description));
  }
  return n;
}

namespace {

void describe_integral_file(const chem::IntegralFile& f, Problem& p) {
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
  p.naux = f.naux();
  p.scf_energy = f.scf_energy();
  p.nuclear_repulsion_energy = f.nuclear_repulsion_energy();
  p.metadata = md;
  p.dfmp2_input.orbital_energies = &f.orbital_energies();
  p.dfmp2_input.nocc = f.nocc();
  p.dfmp2_input.mo_coefficients = f.form() == chem::ThreeIndexForm::ao ? &f.mo_coefficients() : nullptr;
  p.dfmp2_input.metric = &f.metric();
  p.dfmp2_input.three_index = &f;
}

void describe_synthetic(const chem::SyntheticProblem& s, const std::string& name, Problem& p) {
  p.kind = "synthetic";
  const auto& shape = s.shape();
  p.description = fmt::format("synthetic {}(nbasis {}, nocc {}, naux {}, seed {})",
                              name.empty() ? "" : "'" + name + "' ", shape.nbasis, shape.nocc, shape.naux, shape.seed);
  p.form = chem::ThreeIndexForm::ao;
  p.nbf = p.nmo = s.nbasis();
  p.nocc = s.nocc();
  p.naux = s.naux();
  p.dfmp2_input.orbital_energies = &s.orbital_energies();
  p.dfmp2_input.nocc = s.nocc();
  p.dfmp2_input.mo_coefficients = &s.mo_coefficients();
  p.dfmp2_input.metric = &s.metric();
  p.dfmp2_input.three_index = &s.three_index();
}

}  // namespace

Calculation run_calculation(const Input& input) {
  Calculation calc;
  calc.input = input;
  omp_set_num_threads(input.threads);
  if (input.synthetic) {
    calc.synthetic = std::make_unique<chem::SyntheticProblem>(*input.synthetic);
    describe_synthetic(*calc.synthetic, input.synthetic_name, calc.problem);
  } else {
    calc.integrals = chem::IntegralFile::open(input.integrals);
    describe_integral_file(*calc.integrals, calc.problem);
  }
  calc.nfrozen = resolve_frozen_core(input, calc.problem);
  if (input.screening.enabled && calc.problem.form != chem::ThreeIndexForm::ao) {
    throw InputError(fmt::format("{}: key 'screening': screens AO integrals (P|mn), and {} holds MO-form (P|ia)",
                                 input.path, calc.problem.description));
  }

  // Make every backend before running any, so a backend that cannot be had stops the run before work is done.
  std::vector<std::unique_ptr<linalg::Backend>> backends;
  for (const auto& name : input.backends) backends.push_back(devices::make_backend(name));

  chem::DfMp2Options options;
  options.nfrozen = calc.nfrozen;
  options.memory_bytes = input.memory_bytes;
  options.metric = input.metric;
  options.eigh_threshold = input.eigh_threshold;
  options.newton_schulz = input.newton_schulz;
  options.screening = input.screening;

  for (auto& backend : backends) {
    backend->set_threads(input.threads);
    for (const chem::Precision precision : input.precisions) {
      BackendRun run;
      run.backend = backend->name();
      run.details = backend->details();
      run.precision = precision;
      options.precision = precision;
      linalg::Kernels kernels(*backend, run.log);
      linalg::Stopwatch wall;
      run.result = chem::run_dfmp2(calc.problem.dfmp2_input, options, kernels);
      run.wall_seconds = wall.seconds();
      if (input.screening.enabled && input.screening_compare) {
        // The unscreened reference is logged apart, so the run's kernel table stays the screened run's.
        linalg::KernelLog reference_log;
        linalg::Kernels reference_kernels(*backend, reference_log);
        chem::DfMp2Options unscreened = options;
        unscreened.screening.enabled = false;
        run.unscreened_correlation =
            chem::run_dfmp2(calc.problem.dfmp2_input, unscreened, reference_kernels).correlation();
      }
      calc.runs.push_back(std::move(run));
    }
    backend->release();
  }
  return calc;
}

}  // namespace dfmp2::app
