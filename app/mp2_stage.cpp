// The DF-MP2 stage: the blocking of every run (backend and precision) planned together, then one DF-MP2 run per
// backend and precision over the reference and the fragments in its basis, each DF-MP2 phase's peak measured.
#include <fmt/format.h>

#include "app/stage.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::app {

// The gradient (chem::rhf_dfmp2_gradient) fits with the Cholesky factor and screens nothing: an energy asked for
// otherwise is a different number and runs as asked.
bool energy_from_gradient(const Input& input, const Reference& r, const std::string& backend,
                          chem::Precision precision, const std::string& gradient_backend) {
  return input.driver != Driver::energy && backend == gradient_backend && precision == chem::Precision::fp64 &&
         input.metric == chem::MetricMethod::cholesky && !input.screening.enabled && r.ghosted.empty();
}

// DF-MP2's part of the plan: the blocking of every run (backend and precision), each in the storage the largest of
// them needs, and its phases as the largest needs them. `mp2_budget` is what DF-MP2 may hold beside the orbitals,
// the metric and the integral engine.
void plan_dfmp2(const Input& input, const Reference& r, const std::vector<linalg::Backend*>& backends,
                MemoryPlan& plan, int ranks, const std::string& gradient_backend) {
  // The orbitals C (nbf x nmo) and the MP2 metric stay for all of DF-MP2: read from the integral file or generated
  // now (after the start was measured), or computed after the SCF; molecule input also holds the MP2 integral engine.
  // Every space's orbitals: alpha and beta ones of an open shell, and those of the ghosted fragments.
  const double spins = double(r.mp2_spaces().size());
  // (The whole metric only when some run is not factored on the ranks' grid, or the integral file needs it.)
  const bool whole_metric = !r.molecule() || !every_mp2_metric_on_grid(input, r.naux, ranks) || input.save_integrals;
  const double later = 8.0 * (spins * (double(r.nbf) * double(r.nmo) + double(r.nmo)) +
                              (whole_metric ? double(r.naux) * double(r.naux) : 0.0)) +
                       (r.molecule() ? chem::ThreeCenterEngine::bytes(r.molecule()->aux_basis, r.molecule()->basis) : 0.0);
  plan.mp2_budget = plan.budget - plan.baseline - later;
  // The largest block of auxiliary functions that cannot be cut (a shell), for the ranks' shares of the columns.
  linalg::Index aux_unit = 1;
  if (r.molecule())
    for (const auto& sh : r.molecule()->aux_basis.shells) aux_unit = std::max<linalg::Index>(aux_unit, sh.size());
  auto blocks = [&](const linalg::Backend& backend, chem::Precision precision, chem::Mp2Storage storage) {
    return within_memory(plan, plan.baseline + later, [&] {
      return chem::plan_blocks(r.form, r.form == chem::ThreeIndexForm::ao ? r.nbf : 0, r.mp2_spaces(), r.naux,
                               plan.mp2_budget, precision, input.metric, input.screening.enabled, storage,
                               chem::working_copies_of(backend, precision, input.step_modes), ranks, aux_unit,
                               metric_on_grid(input, r.naux, precision, ranks));
    });
  };
  chem::BlockPlan largest;
  std::vector<const linalg::Backend*> run_backends;  // of plan.mp2_runs, in order
  for (const linalg::Backend* backend : backends) {
    for (const chem::Precision precision : input.precisions_of(backend->name())) {
      if (energy_from_gradient(input, r, backend->name(), precision, gradient_backend)) continue;
      plan.mp2_runs.push_back({backend->name(), precision, blocks(*backend, precision, input.mp2_storage)});
      run_backends.push_back(backend);
      if (plan.mp2_runs.back().blocks.peak_bytes > largest.peak_bytes) largest = plan.mp2_runs.back().blocks;
    }
  }
  if (plan.mp2_runs.empty()) return;  // the gradient's energy only: its row holds it
  // One storage for all runs: a run whose tensor would fit in memory keeps it on scratch when another's does not.
  for (std::size_t i = 0; i < plan.mp2_runs.size(); ++i) {
    chem::BlockPlan& run = plan.mp2_runs[i].blocks;
    if (run.storage != largest.storage) run = blocks(*run_backends[i], plan.mp2_runs[i].precision, largest.storage);
  }
  const std::string storage = chem::mp2_storage_name(largest.storage);
  const std::string why = input.mp2_storage != chem::Mp2Storage::automatic ? "asked for (mp2_storage)"
                          : largest.storage == chem::Mp2Storage::scratch
                              ? "the fitted tensor does not fit in memory beside the blocks"
                              : "the fitted tensor fits in memory";
  using chem::Mp2Step;
  plan.phases.push_back({mp2_phase(Mp2Step::metric), "", "", largest.metric_bytes, 0, ""});
  plan.phases.push_back({mp2_phase(Mp2Step::transform), storage,
                         fmt::format("aux block {}", largest.aux_block), largest.transform_bytes,
                         largest.scratch_bytes, why});
  plan.phases.push_back({mp2_phase(Mp2Step::fitting), storage, fmt::format("rows {}", largest.fit_rows),
                         largest.fitting_bytes, largest.scratch_bytes, ""});
  plan.phases.push_back({mp2_phase(Mp2Step::pair_energy), storage,
                         fmt::format("occupied block {}", largest.occupied_block), largest.pair_bytes,
                         largest.scratch_bytes, ""});
  if (!r.ghosted.empty()) {
    plan.shared = fmt::format("the complex and its {} fragments in its basis: one SCF J/K (its three-index integrals "
                              "and fitting) for their SCFs in turn; one DF-MP2 run per backend and precision for "
                              "their {} sets of orbitals at once (metric factored once, each (P|mn) block computed "
                              "once), its tensors holding them all", r.ghosted.size(), r.mp2_spaces().size());
  }
}

chem::DfMp2Options dfmp2_options(const Input& input, const Reference& reference, linalg::Comm& comm) {
  chem::DfMp2Options options;
  options.nfrozen = reference.nfrozen;
  options.metric = input.metric;
  options.eigh_threshold = input.eigh_threshold;
  options.newton_schulz = input.newton_schulz;
  options.screening = input.screening;
  options.scratch_folder = input.scratch;
  options.step_modes = input.step_modes;
  options.comm = &comm;
  // The ranks' grid, made (collectively) only when some run of this input factors its metric on it.
  options.distributed_min_order = input.distributed_min_order;
  for (const std::string& backend : input.backends)
    for (const chem::Precision precision : input.precisions_of(backend))
      if (metric_on_grid(input, reference.naux, precision, comm.size())) options.dense = &comm.dense_grid(input.dense);
  return options;
}

BackendRun run_dfmp2_on(linalg::Backend& backend, linalg::Backend* fallback, chem::Precision precision,
                        const Input& input, const Reference& reference, const MemoryPlan& plan,
                        chem::DfMp2Options options) {
  BackendRun run;
  run.backend = backend.name();
  run.details = backend.details();
  // The peak of the mode where the flops are (the pair energies); checked before: the backend has the mode.
  run.peak_flops = backend.peak_flops(
      chem::step_matmul_modes(precision, input.step_modes).at(chem::step_name(chem::Mp2Step::pair_energy)));
  run.precision = precision;
  options.precision = precision;
  linalg::Kernels kernels(backend, run.log);
  kernels.set_fallback(fallback);
  linalg::Stopwatch wall;
  const chem::BlockPlan& blocks = plan.mp2_blocks(backend.name(), precision);
  // The reference and the fragments in its basis (counterpoise), in one run over the same integrals.
  std::vector<chem::DfMp2Result> results = chem::run_dfmp2(reference.mp2_systems(), blocks, options, kernels);
  run.result = std::move(results.front());
  run.ghosted.assign(std::make_move_iterator(results.begin() + 1), std::make_move_iterator(results.end()));
  run.wall_seconds = wall.seconds();
  // The device-native prediction, where the device's policy gives one (devices/neuron/native_pipeline.hpp).
  const bool device_model = devices::is_device_model(run.backend);
  run.native_absent = devices::neuron::why_no_native_prediction(
      {.device_model = device_model,
       .ranks = options.comm == nullptr ? 1 : options.comm->size(),
       .open_shell = reference.open_shell(),
       .systems = 1 + run.ghosted.size(),
       .device_arithmetic = precision == chem::Precision::fp32 || precision == chem::Precision::bf16 ||
                            precision == chem::Precision::bf16x3,
       .precision = chem::precision_name(precision)});
  if (device_model && run.native_absent.empty()) {
    const devices::neuron::Mp2Shape shape{.nbf = reference.form == chem::ThreeIndexForm::ao ? reference.nbf : 0,
                                          .nocc = reference.nocc - reference.nfrozen,
                                          .nvir = reference.nmo - reference.nocc,
                                          .naux = reference.naux};
    run.native = devices::neuron::native_dfmp2(devices::neuron::load_neuron_params(run.backend, input.device), shape,
                                               chem::step_matmul_modes(precision, input.step_modes));
  }
  if (input.screening.enabled && input.screening_compare) {
    linalg::KernelLog reference_log;
    linalg::Kernels reference_kernels(backend, reference_log);
    reference_kernels.set_fallback(fallback);
    options.screening.enabled = false;
    run.unscreened_correlation =
        chem::run_dfmp2(reference.dfmp2_input(), blocks, options, reference_kernels).correlation();
  }
  return run;
}

namespace {

class Mp2Stage final : public Stage {
 public:
  void plan(StageContext& c) override {
    c.comm.checked([&] {
      plan_dfmp2(c.input, c.calc.reference, c.backends.named_list(), c.calc.memory, c.comm.size(),
                 gradient_backend(c));
    });
  }
  void run(StageContext& c) override {
    chem::DfMp2Options options = dfmp2_options(c.input, c.calc.reference, c.comm);
    options.progress = c.phase_progress;
    // Each DF-MP2 phase's measured peak resident memory, next to what the plan gave it (the largest over the runs).
    options.phase_done = [&](chem::Mp2Step step) {
      const double peak = c.sampler.take_peak();
      if (PhasePlan* row = c.calc.memory.row(mp2_phase(step))) row->measured_bytes = std::max(row->measured_bytes, peak);
    };
    for (auto& backend : c.backends.named) {
      backend->set_threads(c.input.threads);
      for (const chem::Precision precision : c.input.precisions_of(backend->name())) {
        if (energy_from_gradient(c.input, c.calc.reference, backend->name(), precision, gradient_backend(c))) {
          // Its place among the runs, its energies to come from the gradient stage.
          BackendRun& run = c.calc.runs.emplace_back();
          run.backend = backend->name();
          run.details = backend->details();
          run.precision = precision;
          run.energy_from_gradient = true;
          continue;
        }
        c.sampler.take_peak();  // each DF-MP2 phase measures its own peak (options.phase_done)
        c.calc.runs.push_back(run_dfmp2_on(*backend, c.backends.fallback.get(), precision, c.input, c.calc.reference,
                                           c.calc.memory, options));
      }
      backend->release();
    }
  }
  bool measures_its_rows() const override { return true; }

 private:
  static std::string gradient_backend(const StageContext& c) {
    return c.input.driver != Driver::energy && c.backends.scf != nullptr ? c.backends.scf->name() : "";
  }
};

}  // namespace

std::unique_ptr<Stage> make_mp2_stage() { return std::make_unique<Mp2Stage>(); }

}  // namespace dfmp2::app
