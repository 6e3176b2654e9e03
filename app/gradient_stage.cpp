// The derivative stages: the DF-MP2 gradient (driver: gradient, and at the input geometry of a Hessian), after the
// energy runs; and the Hessian, from gradients at displaced geometries (README "Gradients and Hessians").
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "app/stage.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/comm.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::app {

namespace {

// driver: gradient. Its phase comes after DF-MP2 and holds the SCF's J/K for the orbital response beside the SCF's
// matrices and its own blocks (chem::plan_dfmp2_gradient), in memory or on scratch. The J/K is the SCF's as planned
// when the gradient's blocks fit beside it (kept from the SCF when it also fits beside DF-MP2's blocks, else set up
// again); otherwise, with a DF-SCF, it is planned again within what the gradient's smallest blocks leave (on scratch
// or recomputed, say) before the gradient takes the rest.
void plan_gradient(const Input& input, linalg::Comm& comm, Calculation& calc) {
  MemoryPlan& plan = calc.memory;
  const Reference& r = calc.reference;
  MoleculeRun& m = *calc.reference.molecule();
  const bool df = input.scf.type == chem::ScfType::df;
  const double base = plan.baseline + scf_matrix_bytes(r.nbf, input.scf.diis_vectors, false);
  chem::DfMp2GradientSizes sizes{r.nbf, r.nocc, r.nfrozen, r.naux, df ? m.jk_basis.nbf() : 0, 0, input.threads,
                                 comm.size(), r.open_shell() ? r.nocc_beta : 0};
  for (const chem::BasisSet* fitting : {&m.aux_basis, &m.jk_basis})
    for (const chem::Shell& shell : fitting->shells)
      sizes.largest_aux_shell = std::max<linalg::Index>(sizes.largest_aux_shell, shell.size());
  auto gradient_beside = [&](double jk) {
    return chem::plan_dfmp2_gradient(sizes, plan.budget - base - jk, input.mp2_storage);
  };
  m.gradient_jk_plan = m.jk_plan;
  double jk = df ? m.jk_plan.memory_bytes : m.exact_plan.memory_bytes;
  try {
    plan.gradient = gradient_beside(jk);
  } catch (const PhaseTooLarge& e) {
    const double jk_budget = plan.budget - base - e.needed();
    if (!df || jk_budget <= 0) throw ResourceError(too_small_message(plan, base + jk, e));
    const chem::ThreeCenterEngine engine(m.jk_basis, m.basis);
    try {
      m.gradient_jk_plan = chem::plan_df_jk(engine, m.jk_basis, r.nocc,
                                            df_jk_options(input, jk_budget, m.jk_basis.nbf(), comm));
    } catch (const PhaseTooLarge&) {
      throw ResourceError(too_small_message(plan, base + jk, e));
    }
    jk = m.gradient_jk_plan.memory_bytes;
    plan.gradient = within_memory(plan, base + jk, [&] { return gradient_beside(jk); });
  }
  // A J/K that recomputes its integrals has no tensor to make the Z-vector's kept products from: it builds each
  // iteration's products in full, and the plan says so rather than promise products it cannot keep.
  if (df && m.gradient_jk_plan.storage == chem::JkStorage::recompute &&
      plan.gradient.zvector_products != chem::RotationProducts::none) {
    plan.gradient.zvector_products = chem::RotationProducts::none;
    plan.gradient.reason += "; the Z-vector's J/K rebuilt each iteration (its J/K recomputes its integrals)";
  }
  const chem::DfMp2GradientPlan& g = plan.gradient;
  const bool replanned = df && m.gradient_jk_plan.memory_bytes != m.jk_plan.memory_bytes;
  m.keep_scf_jk = !replanned && keep_scf_jk_through_dfmp2(plan, jk, df ? m.jk_plan.scratch_bytes : 0.0);
  const std::string jk_note =
      m.keep_scf_jk ? ", beside the SCF's J/K kept from the SCF"
      : !replanned  ? ", beside the SCF's J/K set up again"
                    : fmt::format(", beside the SCF's J/K planned again within {} ({}, aux block {})",
                                  linalg::format_bytes(jk), chem::jk_storage_name(m.gradient_jk_plan.storage),
                                  m.gradient_jk_plan.aux_block);
  plan.phases.push_back({Phase::mp2_gradient, g.on_scratch ? "scratch" : "memory",
                         fmt::format("occupied block {}, aux block {}", g.occupied_block, g.aux_block),
                         g.memory_bytes + jk, g.scratch_bytes + (df ? m.gradient_jk_plan.scratch_bytes : 0.0),
                         g.reason + jk_note});
}

// The DF-MP2 energy the gradient differentiates, computed once: its amplitude pass's (energy_from_gradient), in the
// run DF-MP2 left for it, as the energy's own kernels would give it (within the order of their sums).
void give_energy(const GradientRun& g, const Reference& r, const Input& input, BackendRun& run) {
  chem::DfMp2Result& e = run.result;
  e.opposite_spin = g.result.opposite_spin;
  e.same_spin = g.result.same_spin;
  e.same_spin_alpha = g.result.same_spin_alpha;
  e.same_spin_beta = g.result.same_spin_beta;
  e.singles = g.result.singles;
  e.nfrozen = r.nfrozen;
  e.nact = r.nocc - r.nfrozen;
  e.nvir = r.nmo - r.nocc;
  e.unrestricted = r.open_shell();
  if (e.unrestricted) {
    e.nact_beta = r.nocc_beta - r.nfrozen;
    e.nvir_beta = r.nmo - r.nocc_beta;
  }
  e.naux = r.naux;
  e.precision = chem::Precision::fp64;
  e.metric = chem::MetricMethod::cholesky;
  e.step_modes = chem::step_matmul_modes(chem::Precision::fp64, input.step_modes);
  run.wall_seconds = g.seconds;
}

// driver: gradient, after the energy runs: the SCF's J/K kept from the SCF or set up again as planned, its products
// logged in the gradient's table, then chem::dfmp2_gradient on
// every rank alike: its work shared among them (chem::DfMp2GradientInput::comm; the J/K builds as in the SCF), the
// same gradient on each.
void run_gradient(const Input& input, linalg::Backend& backend, linalg::Comm& comm, Calculation& calc,
                  const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  MoleculeRun& m = *calc.reference.molecule();
  comm.set_phase(phase_name(Phase::mp2_gradient));
  GradientRun& g = calc.gradient.emplace();
  g.backend = backend.name();
  linalg::Kernels kernels(backend, g.log);
  linalg::Stopwatch clock;
  std::unique_ptr<chem::JkBuilder> jk;
  if (m.scf_jk) {
    jk = std::move(m.scf_jk);
    jk->use_kernels(kernels);
  } else if (input.scf.type == chem::ScfType::df) {
    jk = chem::make_df_jk(std::make_unique<chem::ThreeCenterEngine>(m.jk_basis, m.basis), m.jk_basis,
                          calc.reference.nocc, kernels,
                          df_jk_options(input, m.gradient_jk_plan.memory_bytes, m.jk_basis.nbf(), comm),
                          m.gradient_jk_plan);
  } else {
    chem::ExactJkPlan plan;
    jk = chem::make_exact_jk(m.basis, m.exact_plan.memory_bytes, kernels, plan, &comm);
  }
  const char* what = input.driver == Driver::properties ? "relaxed density" : "gradient";
  say(fmt::format("  {} {}: {} frozen core orbitals, on backend {} (fp64)", input.mp2_model.label(), what,
                  calc.reference.nfrozen, g.backend));
  chem::DfMp2GradientInput in;
  in.molecule = &*input.molecule;
  in.basis = &m.basis;
  in.ri_basis = &m.aux_basis;
  in.jk_basis = input.scf.type == chem::ScfType::df ? &m.jk_basis : nullptr;
  in.scf = &m.scf;
  in.nfrozen = calc.reference.nfrozen;
  in.scales = input.mp2_model.scales();  // the method's energy (method: scs-mp2, sos-mp2)
  in.jk = jk.get();
  in.plan = calc.memory.gradient;
  in.zvector_convergence = input.scf.d_convergence;
  in.scratch_folder = calc.memory.scratch_folder;
  in.comm = &comm;
  in.derivatives = input.driver != Driver::properties;  // properties: the relaxed density alone
  g.result = chem::dfmp2_gradient(in, kernels);
  if (const auto charges = static_cast<linalg::Index>(input.scf.external_charges.size()); charges > 0 && in.derivatives) {
    const auto natoms = static_cast<linalg::Index>(input.molecule->atoms.size());  // the charges' rows follow
    g.charge_gradient = g.result.gradient.bottomRows(charges);
    g.result.gradient.conservativeResize(natoms, 3);
    g.result.scf_gradient.conservativeResize(natoms, 3);
  }
  g.seconds = clock.seconds();
  for (BackendRun& run : calc.runs)
    if (run.energy_from_gradient) give_energy(g, calc.reference, input, run);
  say(fmt::format("  MP2 {} done ({:.2f} s; Z-vector {} iterations, largest residual {:.1e})", what, g.seconds,
                  g.result.zvector_iterations, g.result.zvector_residual));
}

// driver: hessian, after the gradient at the input geometry: a gradient calculation at each of the 6 natoms
// displaced geometries (the same input, nothing written), then the harmonic analysis.
void run_hessian(const Input& input, linalg::Comm& comm, Calculation& calc,
                 const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  HessianRun& h = calc.hessian.emplace();
  h.step = chem::kHessianStep;
  h.displacements = static_cast<int>(6 * input.molecule->atoms.size());
  say(fmt::format("  Hessian: central differences of analytic gradients, {} displaced geometries of {} bohr",
                  h.displacements, h.step));
  // Each displaced calculation runs what its gradient needs and no more: the SCF's backend in fp64 (the energy the
  // gradient differentiates; another backend or precision named for the energy runs at the input geometry only), no
  // file written, and its SCF starts from the undisplaced orbitals (orthonormalised in the displaced overlap), which
  // are a few iterations from its own.
  const MoleculeRun& undisplaced = *calc.reference.molecule();
  Input displaced_input = input;
  displaced_input.driver = Driver::gradient;
  displaced_input.output.reset();
  displaced_input.save_integrals.reset();
  displaced_input.backends = {calc.gradient->backend};
  displaced_input.precisions = {chem::Precision::fp64};
  displaced_input.backend_precisions.clear();
  displaced_input.screening_compare = false;
  displaced_input.scf.guess = chem::ScfGuess::orbitals;
  displaced_input.scf.start_orbitals = &chem::start_orbitals(undisplaced.scf);
  if (undisplaced.scf.reference == chem::ScfReference::uhf)
    displaced_input.scf.start_orbitals_beta = &undisplaced.scf.mo_coefficients_beta;
  linalg::Stopwatch clock;
  // The displaced geometries spread over the ranks, each a calculation of its own on one rank, and their gradients
  // summed: every displaced gradient is the one a single process computes, whatever the rank count.
  const std::vector<chem::Molecule> displaced = chem::hessian_displacements(*input.molecule, h.step);
  const auto natoms = static_cast<linalg::Index>(input.molecule->atoms.size());
  const std::size_t per = static_cast<std::size_t>(3 * natoms) + 2;  // a gradient, its energy, its SCF iterations
  std::vector<double> shared(displaced.size() * per, 0.0);
  linalg::SerialComm alone("one displaced geometry per rank");
  linalg::Comm& each = comm.size() > 1 ? static_cast<linalg::Comm&>(alone) : comm;
  comm.checked([&] {
    for (std::size_t k = std::size_t(comm.rank()); k < displaced.size(); k += std::size_t(comm.size())) {
      displaced_input.molecule = displaced[k];
      const Calculation c = run_calculation(displaced_input, each);
      double* out = shared.data() + k * per;
      Eigen::Map<linalg::Matrix>(out, natoms, 3) = c.returned_gradient();
      out[per - 2] = c.counterpoise ? c.counterpoise->energy
                                    : *c.reference.scf_energy + c.runs.front().result.correlation(input.mp2_model.scales());
      out[per - 1] = c.reference.molecule()->scf.iterations;
    }
  });
  comm.sum(shared.data(), shared.size());
  std::vector<linalg::Matrix> gradients;
  for (std::size_t k = 0; k < displaced.size(); ++k) {
    gradients.emplace_back(Eigen::Map<const linalg::Matrix>(shared.data() + k * per, natoms, 3));
    h.scf_iterations.push_back(static_cast<int>(shared[k * per + per - 1]));
    say(fmt::format("  displacement {:3} of {}: E = {:.12f} Eh ({} SCF iterations)", k + 1, h.displacements,
                    shared[k * per + per - 2], h.scf_iterations.back()));
  }
  h.hessian = chem::hessian_from_gradients(gradients, h.step);
  h.vibrations = chem::harmonic_analysis(*input.molecule, h.hessian);
  h.seconds = clock.seconds();
}

class GradientStage final : public Stage {
 public:
  void plan(StageContext& c) override { c.comm.checked([&] { plan_gradient(c.input, c.comm, c.calc); }); }
  void run(StageContext& c) override {
    run_gradient(c.input, *c.backends.scf, c.comm, c.calc, c.progress);
  }
};

// Its displaced calculations plan themselves, each as a gradient calculation of its own.
class HessianStage final : public Stage {
 public:
  void plan(StageContext&) override {}
  void run(StageContext& c) override { run_hessian(c.input, c.comm, c.calc, c.progress); }
};

}  // namespace

// Kept, the SCF's J/K's integrals are neither computed nor fitted again after DF-MP2 ((H2O)8 cc-pVDZ: about 1 s
// of a 19 s gradient step).
bool keep_scf_jk_through_dfmp2(MemoryPlan& plan, double jk_bytes, double jk_scratch_bytes) {
  for (const MemoryPlan::Mp2Run& run : plan.mp2_runs)
    if (run.blocks.peak_bytes + jk_bytes > plan.mp2_budget) return false;
  for (PhasePlan& row : plan.phases) {
    if (row.phase != Phase::mp2_metric && row.phase != Phase::mp2_transform && row.phase != Phase::mp2_fitting &&
        row.phase != Phase::mp2_pair_energy)
      continue;
    row.memory_bytes += jk_bytes;
    row.scratch_bytes += jk_scratch_bytes;
    row.reason += fmt::format("{}beside the SCF's J/K kept for the gradient ({})", row.reason.empty() ? "" : "; ",
                              linalg::format_bytes(jk_bytes));
  }
  return true;
}

std::unique_ptr<Stage> make_gradient_stage() { return std::make_unique<GradientStage>(); }
std::unique_ptr<Stage> make_hessian_stage() { return std::make_unique<HessianStage>(); }

}  // namespace dfmp2::app
