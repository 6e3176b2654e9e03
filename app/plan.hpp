#pragma once
// The memory plan of a run (README "Memory plan"): one row per phase, in the order the phases run, each made by the
// stage that runs the phase (app/stage.hpp) before any three-index integral is computed, and each given the
// measured peak resident memory of its phase once it has run.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "chem/gradient/gradient.hpp"
#include "chem/mp2/mp2.hpp"
#include "linalg/errors.hpp"
#include "linalg/bytes.hpp"

namespace dfmp2::app {

// The phases a plan can hold, in run order. Their names (phase_name) are what the report and the results file print.
enum class Phase { scf, scf_jk, mp2_metric, mp2_transform, mp2_fitting, mp2_pair_energy, mp2_gradient, mp2_properties };
const std::string& phase_name(Phase phase);
Phase mp2_phase(chem::Mp2Step step);

// One phase of the memory plan: what it holds in memory at its peak and what it keeps on scratch.
struct PhasePlan {
  Phase phase = Phase::scf;
  std::string storage;    // "memory", "scratch", "recompute", or "" where there is no choice
  std::string blocks;     // how it is cut, e.g. "aux block 512" or "occupied block 20"
  double memory_bytes = 0;   // held by the phase at its peak, besides what is in use at the start
  double scratch_bytes = 0;  // its scratch files
  std::string reason;     // why this storage
  double measured_bytes = 0;  // the process's measured peak resident memory during the phase (0: not measured)
};

// The plan for the whole run, made before any three-index integral is computed.
struct MemoryPlan {
  double budget = 0;      // `memory`
  double baseline = 0;    // resident when the run starts (the program, its libraries, the input) + memory_allowance
  std::string scratch_folder;
  std::vector<PhasePlan> phases;
  double mp2_budget = 0;  // what DF-MP2's blocks may hold (beside the orbitals, the metric, the integral engine)
  // The blocking of each DF-MP2 run (backend and precision), made once for all ranks: run_dfmp2 reads it.
  struct Mp2Run {
    std::string backend;
    chem::Precision precision;
    chem::BlockPlan blocks;
  };
  std::vector<Mp2Run> mp2_runs;
  chem::DfMp2GradientPlan gradient;  // driver: gradient: the DF-MP2 gradient's blocks and storage
  // An interaction energy's counterpoise calculations: what the complex and the fragments in its basis share (the
  // phases above plan them together); empty otherwise.
  std::string shared;
  const chem::BlockPlan& mp2_blocks(const std::string& backend, chem::Precision precision) const;
  double peak_resident = 0;  // measured at the end (getrusage), for the report
  // Measured peak resident memory of parts of the run that are not one phase (the SCF with the MP2 integral set-up).
  std::vector<std::pair<std::string, double>> measured;
  double planned_peak() const;
  // The row of `phase`, or nullptr when the run has no such phase.
  PhasePlan* row(Phase phase);
};

// The plan's frame before any stage adds its rows: `memory`, what is in use at the start (the largest of any rank)
// with memory_allowance, and the scratch folder.
MemoryPlan start_plan(double budget, double resident_at_start, int threads, const std::string& scratch_folder);

// What the plan sets aside for memory no phase accounts for: the libraries' own buffers (OpenBLAS, libint2
// engines, HDF5 caches), thread stacks, the integral file's header datasets: 64 MiB + 64 MiB per thread.
double memory_allowance(int threads);

// The one line of a phase that does not fit: the phase and the `memory` the whole run would need.
std::string too_small_message(const MemoryPlan& plan, double held, const PhaseTooLarge& e);

// Runs `plan_phase`, which is given `memory` minus `held` bytes; when its smallest blocks do not fit (PhaseTooLarge),
// the one line names the phase and the `memory` the whole run would need.
template <class PlanPhase>
auto within_memory(const MemoryPlan& plan, double held, const PlanPhase& plan_phase) {
  try {
    return plan_phase();
  } catch (const PhaseTooLarge& e) {
    throw ResourceError(too_small_message(plan, held, e));
  }
}

// The scratch folder, checked once for the whole plan: it exists, is writable, and has room for the largest phase on
// scratch (ResourceError naming the phase otherwise). Nothing to check when no phase is on scratch.
void check_scratch(const MemoryPlan& plan);

// The plan as progress lines (molecule input prints it before the SCF).
void print_plan(const MemoryPlan& plan, const std::function<void(const std::string&)>& progress);

}  // namespace dfmp2::app
