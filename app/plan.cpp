#include "app/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "chem/io/io.hpp"
#include "linalg/name_table.hpp"

namespace dfmp2::app {

const std::string& phase_name(Phase phase) {
  using chem::Mp2Step;
  static const linalg::NameTable<Phase> names = {{Phase::scf, "SCF"},
                                                  {Phase::scf_jk, "SCF J/K"},
                                                  {Phase::mp2_metric, chem::mp2_phase_name(Mp2Step::metric)},
                                                  {Phase::mp2_transform, chem::mp2_phase_name(Mp2Step::transform)},
                                                  {Phase::mp2_fitting, chem::mp2_phase_name(Mp2Step::fitting)},
                                                  {Phase::mp2_pair_energy, chem::mp2_phase_name(Mp2Step::pair_energy)},
                                                  {Phase::mp2_gradient, "MP2 gradient"},
                                                  {Phase::mp2_properties, "MP2 properties"}};
  for (const auto& [p, name] : names)
    if (p == phase) return name;
  throw std::logic_error("phase_name: unknown phase");
}

Phase mp2_phase(chem::Mp2Step step) {
  switch (step) {
    case chem::Mp2Step::metric: return Phase::mp2_metric;
    case chem::Mp2Step::transform: return Phase::mp2_transform;
    case chem::Mp2Step::fitting: return Phase::mp2_fitting;
    case chem::Mp2Step::pair_energy: return Phase::mp2_pair_energy;
  }
  throw std::logic_error("mp2_phase: unknown step");
}

const chem::BlockPlan& MemoryPlan::mp2_blocks(const std::string& backend, chem::Precision precision) const {
  for (const auto& run : mp2_runs)
    if (run.backend == backend && run.precision == precision) return run.blocks;
  throw std::logic_error(fmt::format("memory plan: no DF-MP2 run planned for {} in {}", backend,
                                     chem::precision_name(precision)));
}

double MemoryPlan::planned_peak() const {
  double peak = 0;
  for (const auto& ph : phases) peak = std::max(peak, ph.memory_bytes);
  return baseline + peak;
}

PhasePlan* MemoryPlan::row(Phase phase) {
  for (auto& ph : phases)
    if (ph.phase == phase) return &ph;
  return nullptr;
}

MemoryPlan start_plan(double budget, double resident_at_start, int threads, const std::string& scratch_folder) {
  MemoryPlan plan;
  plan.budget = budget;
  plan.baseline = resident_at_start + memory_allowance(threads);
  plan.scratch_folder = scratch_folder;
  return plan;
}

// Measured on this project's machines: Eigen's GEMM and SYRK pack their operands into blocks sized for the caches,
// up to about 70 MiB per thread for the pair step of 32 waters (it grows with the product's k, up to the L3 size);
// OpenBLAS keeps a 32 MiB buffer per thread; libint2, HDF5 and the thread stacks add a few MiB.
double memory_allowance(int threads) { return double(64 << 20) + double(threads) * double(64 << 20); }

std::string too_small_message(const MemoryPlan& plan, double held, const PhaseTooLarge& e) {
  return fmt::format("memory: {} is too small for the {}; the run needs at least {} ({} for the phase, {} held beside "
                     "it, {} of it in use at the start), raise 'memory'",
                     linalg::format_bytes(plan.budget), e.phase(), linalg::format_bytes(held + e.needed()),
                     linalg::format_bytes(e.needed()), linalg::format_bytes(held), linalg::format_bytes(plan.baseline));
}

void check_scratch(const MemoryPlan& plan) {
  // The phases run one after another, and each frees its scratch files before the next: the largest counts.
  const PhasePlan* largest = nullptr;
  for (const auto& ph : plan.phases)
    if (ph.scratch_bytes > 0 && (largest == nullptr || ph.scratch_bytes > largest->scratch_bytes)) largest = &ph;
  if (largest == nullptr) return;
  chem::check_scratch_folder(plan.scratch_folder);
  const double free = chem::free_bytes(plan.scratch_folder);
  // 5 % beside the files: the file system's own blocks.
  if (free >= 0 && free < 1.05 * largest->scratch_bytes) {
    throw ResourceError(fmt::format("scratch: the {} needs {} in '{}', which has {} free; use another folder (key "
                                    "'scratch') or more 'memory'",
                                    phase_name(largest->phase), linalg::format_bytes(largest->scratch_bytes),
                                    plan.scratch_folder, linalg::format_bytes(free)));
  }
}

void print_plan(const MemoryPlan& plan, const std::function<void(const std::string&)>& progress) {
  if (!progress) return;
  progress(fmt::format("  memory plan: {} ({} in use at the start or allowed for libraries); scratch in {}",
                       linalg::format_bytes(plan.budget), linalg::format_bytes(plan.baseline), plan.scratch_folder));
  if (!plan.shared.empty()) progress("    shared: " + plan.shared);
  for (const auto& ph : plan.phases) {
    progress(fmt::format("    {:<18} {:<9} {:<28} holds {:>10}{}", phase_name(ph.phase), ph.storage, ph.blocks,
                         linalg::format_bytes(ph.memory_bytes),
                         ph.scratch_bytes > 0 ? "  scratch " + linalg::format_bytes(ph.scratch_bytes) : ""));
  }
}

}  // namespace dfmp2::app
