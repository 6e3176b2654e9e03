// The stage table: each capability's stage, when the input asks for it, in the order the stages plan and run. A new
// capability is a stage file (app/stage.hpp) and a row here.
#include "app/stage.hpp"

namespace dfmp2::app {

namespace {

struct StageRow {
  bool (*asked_for)(const Input& input, const Reference& reference);
  std::unique_ptr<Stage> (*make)();
};

const StageRow kStages[] = {
    // The SCF with its J/K, for molecule input (integral files and synthetic problems come with their orbitals).
    {[](const Input&, const Reference& r) { return r.molecule() != nullptr; }, make_scf_stage},
    // DF-MP2 on every backend and precision named, always.
    {[](const Input&, const Reference&) { return true; }, make_mp2_stage},
    // interaction.bsse nocp or both: each fragment in its own basis, after the complex.
    {[](const Input& in, const Reference&) { return in.interaction && in.interaction->uncorrected; },
     make_own_basis_stage},
    // driver: gradient, the gradient at the input geometry of driver: hessian, and the relaxed density of driver:
    // properties (without derivative integrals).
    {[](const Input& in, const Reference&) { return in.driver != Driver::energy; }, make_gradient_stage},
    // With `interaction`: each fragment's gradient, for the counterpoise-corrected one.
    {[](const Input& in, const Reference&) { return in.driver != Driver::energy && in.interaction.has_value(); },
     make_counterpoise_gradient_stage},
    {[](const Input& in, const Reference&) { return in.driver == Driver::hessian; }, make_hessian_stage},
    // driver: properties, after the gradient stage's densities.
    {[](const Input& in, const Reference&) { return in.driver == Driver::properties; }, make_properties_stage},
};

}  // namespace

std::vector<std::unique_ptr<Stage>> stages_for(const Input& input, const Reference& reference) {
  std::vector<std::unique_ptr<Stage>> stages;
  for (const StageRow& row : kStages)
    if (row.asked_for(input, reference)) stages.push_back(row.make());
  return stages;
}

MemoryPlan make_memory_plan(const Input& input, const Reference& r, const std::vector<linalg::Backend*>& backends,
                            int ranks, double resident_at_start) {
  MemoryPlan plan = start_plan(input.memory_bytes, resident_at_start, input.threads, input.scratch);
  if (r.molecule()) plan_scf_matrices(input, r, plan);
  plan_dfmp2(input, r, backends, plan, ranks);
  return plan;
}

}  // namespace dfmp2::app
