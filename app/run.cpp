#include "app/run.hpp"

#include <fmt/format.h>
#include <omp.h>

#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::app {

int resolve_frozen_core(const Input& input, const chem::IntegralFile& file) {
  int n = 0;
  switch (input.frozen_core.kind) {
    case FrozenCore::Kind::none: return 0;
    case FrozenCore::Kind::count: n = input.frozen_core.count; break;
    case FrozenCore::Kind::psi4_rule:
      if (!file.metadata().molecule) {
        throw InputError(fmt::format(
            "{}: key 'frozen_core': true needs the molecule, and integral file '{}' has no metadata attribute "
            "'molecule'; give the number of frozen orbitals instead",
            input.path, file.path()));
      }
      n = chem::frozen_core_orbitals(*file.metadata().molecule);
      break;
  }
  if (n >= file.nocc()) {
    throw InputError(fmt::format("{}: key 'frozen_core': freezing {} orbitals leaves none of the {} occupied orbitals "
                                 "of '{}' to correlate",
                                 input.path, n, file.nocc(), file.path()));
  }
  return n;
}

Calculation run_calculation(const Input& input) {
  Calculation calc;
  calc.input = input;
  calc.integrals = chem::IntegralFile::open(input.integrals);
  calc.nfrozen = resolve_frozen_core(input, *calc.integrals);

  // Make every backend before running any, so a backend that cannot be had stops the run before work is done.
  std::vector<std::unique_ptr<linalg::Backend>> backends;
  for (const auto& name : input.backends) backends.push_back(devices::make_backend(name));

  omp_set_num_threads(input.threads);
  const chem::IntegralFile& f = *calc.integrals;
  chem::DfMp2Input dfmp2_input;
  dfmp2_input.orbital_energies = &f.orbital_energies();
  dfmp2_input.nocc = f.nocc();
  dfmp2_input.mo_coefficients = f.form() == chem::ThreeIndexForm::ao ? &f.mo_coefficients() : nullptr;
  dfmp2_input.metric = &f.metric();
  dfmp2_input.three_index = &f;
  chem::DfMp2Options options;
  options.nfrozen = calc.nfrozen;
  options.memory_bytes = input.memory_bytes;

  for (auto& backend : backends) {
    backend->set_threads(input.threads);
    BackendRun run;
    run.backend = backend->name();
    run.details = backend->details();
    linalg::Kernels kernels(*backend, run.log);
    linalg::Stopwatch wall;
    run.result = chem::run_dfmp2(dfmp2_input, options, kernels);
    run.wall_seconds = wall.seconds();
    calc.runs.push_back(std::move(run));
  }
  return calc;
}

}  // namespace dfmp2::app
