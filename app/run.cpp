// run_calculation: the stages the input asks for (app/stages.cpp), planned in order, then run, each measured.
#include "app/run.hpp"

#include <omp.h>

#include "app/stage.hpp"

namespace dfmp2::app {

bool BackendRun::modelled() const { return log.any_modelled(); }

double BackendRun::modelled_seconds() const { return log.wall_with_modelled_kernels(wall_seconds); }

namespace {

// Runs `stage`, its rows of the plan given the peak resident memory measured while it ran (unless it measures them
// itself, phase by phase).
void run_measured(Stage& stage, const std::vector<Phase>& rows, StageContext& c) {
  c.sampler.take_peak();
  stage.run(c);
  const double peak = c.sampler.take_peak();
  MemoryPlan& plan = c.calc.memory;
  if (!stage.measured_part().empty()) plan.measured.emplace_back(stage.measured_part(), peak);
  if (stage.measures_its_rows()) return;
  for (const Phase phase : rows)
    if (PhasePlan* row = plan.row(phase)) row->measured_bytes = peak;
}

// The run's peak resident memory (getrusage, and what the phases measured), and every rank's.
void record_peaks(Calculation& calc, linalg::Comm& comm) {
  MemoryPlan& plan = calc.memory;
  plan.peak_resident = peak_resident_bytes();
  for (const auto& [part, bytes] : plan.measured) plan.peak_resident = std::max(plan.peak_resident, bytes);
  for (const auto& ph : plan.phases) plan.peak_resident = std::max(plan.peak_resident, ph.measured_bytes);
  calc.rank_peak_resident.resize(static_cast<std::size_t>(comm.size()));
  comm.allgather(&plan.peak_resident, sizeof(double), calc.rank_peak_resident.data());
}

// A calculation up to its memory plan: its backends and reference made, every stage it asks for planned in order.
struct Planned {
  Calculation calc;
  Backends backends;
  ResidentSampler sampler;  // each phase's measured peak
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::vector<Phase>> rows;  // what each stage planned
  std::unique_ptr<StageContext> context;
};

std::unique_ptr<Planned> plan_stages(const Input& input, linalg::Comm& comm, const Progress& progress,
                                     const PhaseProgress& phase_progress) {
  auto p = std::make_unique<Planned>();
  Calculation& calc = p->calc;
  calc.input = input;
  calc.ranks = comm.size();
  calc.mpi = comm.description();
  omp_set_num_threads(input.threads);
  // Up to the memory plan everything is local to each rank: checked, so that a rank that cannot go on (a file it
  // cannot read, a budget too small for it) stops them all.
  comm.checked([&] {
    p->backends = make_backends(input);
    calc.reference = make_reference(input);
  });
  // One plan for all ranks, made on the largest resident memory at the start of any.
  p->context = std::make_unique<StageContext>(StageContext{input, comm, p->backends, calc, p->sampler, progress,
                                                           phase_progress, comm.max(input.resident_at_start)});
  calc.memory = start_plan(input.memory_bytes, p->context->resident_at_start, input.threads, input.scratch);
  p->stages = stages_for(input, calc.reference);
  for (const auto& stage : p->stages) {
    const std::size_t before = calc.memory.phases.size();
    stage->plan(*p->context);
    p->rows.emplace_back();
    for (std::size_t i = before; i < calc.memory.phases.size(); ++i) p->rows.back().push_back(calc.memory.phases[i].phase);
  }
  return p;
}

}  // namespace

MemoryPlan plan_calculation(const Input& input, linalg::Comm& comm) { return plan_stages(input, comm, {}, {})->calc.memory; }

Calculation run_calculation(const Input& input, linalg::Comm& comm, const Progress& progress,
                            const PhaseProgress& phase_progress) {
  if (input.cbs) return run_cbs_calculation(input, comm, progress, phase_progress);
  const std::unique_ptr<Planned> p = plan_stages(input, comm, progress, phase_progress);
  Calculation& calc = p->calc;
  comm.checked([&] { check_scratch(calc.memory); });  // each rank's own folder
  if (calc.reference.molecule()) print_plan(calc.memory, progress);  // the other inputs print nothing until the report
  for (std::size_t s = 0; s < p->stages.size(); ++s) run_measured(*p->stages[s], p->rows[s], *p->context);
  record_peaks(calc, comm);
  return std::move(calc);
}

}  // namespace dfmp2::app
