// The SCF stage (molecule input): the SCF's matrices and J/K planned, then the integrals, the SCF of the molecule
// (and of the fragments in its basis, on the same J/K), the MP2 fitting metric, and the integral file saved.
#include <fmt/format.h>

#include <filesystem>

#include "app/stage.hpp"
#include "chem/io/io.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::app {

// Bytes the SCF holds besides its J/K: H, S, X, F, D, C, the orbital gradient, J, K and their copies, and the DIIS
// history of Fock and error matrices.
// An open shell holds each spin's Fock, density and orbital matrices and DIIS vectors (and the exact J/K its last
// D, J and K per spin for the incremental builds: three of the matrices the doubling adds).
double scf_matrix_bytes(linalg::Index nbf, int diis_vectors, bool open_shell) {
  return 8.0 * double(nbf) * double(nbf) * (16.0 + 2.0 * double(diis_vectors)) * (open_shell ? 2.0 : 1.0);
}

chem::DfJkOptions df_jk_options(const Input& input, double memory_bytes, linalg::Index naux, linalg::Comm& comm) {
  chem::DfJkOptions options;
  options.storage = input.jk_storage;
  options.memory_bytes = memory_bytes;
  options.scratch_folder = input.scratch;
  options.comm = &comm;
  options.distributed_min_order = input.distributed_min_order;
  if (order_on_grid(input, naux, comm.size())) options.dense = &comm.dense_grid(input.dense);
  return options;
}

namespace {

// The J/K builds of the SCF, timed and their traffic counted apart from the rest of the iterations.
class TimedJk final : public chem::JkBuilder {
 public:
  TimedJk(chem::JkBuilder& inner, linalg::Comm& comm) : inner_(inner), comm_(comm) {}
  void compute(const linalg::Matrix& c_occ, linalg::Matrix& j, linalg::Matrix& k, bool fp32_exchange,
               int density) override {
    comm_.set_phase(chem::phase_name(chem::ScfPhase::jk_builds));
    linalg::Stopwatch clock;
    inner_.compute(c_occ, j, k, fp32_exchange, density);
    seconds += clock.seconds();
    comm_.set_phase(chem::phase_name(chem::ScfPhase::other));
  }
  bool has_fp32_exchange() const override { return inner_.has_fp32_exchange(); }
  linalg::Index max_columns() const override { return inner_.max_columns(); }
  void compute_symmetric(const linalg::Matrix& m, linalg::Matrix& j, linalg::Matrix& k) override {
    linalg::Stopwatch clock;
    inner_.compute_symmetric(m, j, k);
    seconds += clock.seconds();
  }
  void compute_response(const linalg::Matrix& m, const linalg::Matrix& c, linalg::Matrix& j,
                        linalg::Matrix& kc) override {
    linalg::Stopwatch clock;
    inner_.compute_response(m, c, j, kc);
    seconds += clock.seconds();
  }
  void release_response() override { inner_.release_response(); }
  linalg::Matrix rotation_hessian(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ, const linalg::Matrix& z,
                                  linalg::Kernels& kernels) override {
    linalg::Stopwatch clock;
    linalg::Matrix out = inner_.rotation_hessian(c_vir, c_occ, z, kernels);
    seconds += clock.seconds();
    return out;
  }
  linalg::Matrix rotation_hessian_diagonal() override { return inner_.rotation_hessian_diagonal(); }
  linalg::Matrix occupied_rotation_response(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ,
                                            const linalg::Matrix& r_vo, const linalg::Matrix& r_oo,
                                            linalg::Kernels& kernels) override {
    linalg::Stopwatch clock;
    linalg::Matrix out = inner_.occupied_rotation_response(c_vir, c_occ, r_vo, r_oo, kernels);
    seconds += clock.seconds();
    return out;
  }
  linalg::Matrix unrelaxed_response(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ, const linalg::Matrix& p_oo,
                                    const linalg::Matrix& p_vv, linalg::Kernels& kernels) override {
    linalg::Stopwatch clock;
    linalg::Matrix out = inner_.unrelaxed_response(c_vir, c_occ, p_oo, p_vv, kernels);
    seconds += clock.seconds();
    return out;
  }
  std::array<linalg::Matrix, 2> unrestricted_rotation_hessian(const std::array<const linalg::Matrix*, 2>& c_vir,
                                                              const std::array<const linalg::Matrix*, 2>& c_occ,
                                                              const std::array<linalg::Matrix, 2>& z,
                                                              linalg::Kernels& kernels) override {
    linalg::Stopwatch clock;
    std::array<linalg::Matrix, 2> out = inner_.unrestricted_rotation_hessian(c_vir, c_occ, z, kernels);
    seconds += clock.seconds();
    return out;
  }
  std::array<linalg::Matrix, 2> unrestricted_rotation_hessian_diagonal(
      const std::array<const linalg::Matrix*, 2>& c_vir, const std::array<const linalg::Matrix*, 2>& c_occ) override {
    return inner_.unrestricted_rotation_hessian_diagonal(c_vir, c_occ);
  }
  void keep_rotation_products(chem::RotationProducts kept, int sets) override {
    inner_.keep_rotation_products(kept, sets);
  }
  void use_kernels(linalg::Kernels& kernels) override { inner_.use_kernels(kernels); }
  double seconds = 0;

 private:
  chem::JkBuilder& inner_;
  linalg::Comm& comm_;
};

void add_traffic(linalg::PhaseStats& st, const linalg::CommTraffic& t) {
  st.bytes_sent += t.bytes_sent;
  st.bytes_received += t.bytes_received;
  st.messages += double(t.messages_sent + t.messages_received);
  st.wait_seconds += t.wait_seconds;
}

// The SCF's J/K as planned before any three-index or four-centre integral: DF keeps its integral engine for the
// build (plan_df_jk planned over it); exact is made with its plan (Schwarz bounds and what its cache holds: no
// integral is computed before the first build). Both log into the molecule run through the SCF backend's kernels.
struct ScfJk {
  std::unique_ptr<linalg::Kernels> kernels;
  std::unique_ptr<chem::ThreeCenterEngine> df_engine;
  std::unique_ptr<chem::JkBuilder> exact;
  double seconds = 0;  // planning, counted in the J/K set-up
};


// The SCF J/K's row of the memory plan, within what the plan leaves it beside the SCF's matrices (and the DF
// engine): the same budget on every rank, since the plan's baseline is the largest of any rank.
ScfJk plan_scf_jk(const Input& input, linalg::Backend& backend, linalg::Comm& comm, Calculation& calc) {
  MemoryPlan& plan = calc.memory;
  const Reference& r = calc.reference;
  MoleculeRun& m = *calc.reference.molecule();
  const bool df = input.scf.type == chem::ScfType::df;
  const double held = plan.baseline + scf_matrix_bytes(r.nbf, input.scf.diis_vectors, r.open_shell()) +
                      (df ? chem::ThreeCenterEngine::bytes(m.jk_basis, m.basis) : 0.0);
  ScfJk jk;
  jk.kernels = std::make_unique<linalg::Kernels>(backend, m.log);
  comm.set_phase(chem::phase_name(chem::ScfPhase::jk_setup));
  linalg::Stopwatch clock;
  const PhasePlan phase = within_memory(plan, held, [&] {
    if (df) {
      jk.df_engine = std::make_unique<chem::ThreeCenterEngine>(m.jk_basis, m.basis);
      m.jk_plan = chem::plan_df_jk(*jk.df_engine, m.jk_basis, r.nocc, df_jk_options(input, plan.budget - held, m.jk_basis.nbf(), comm));
      const auto& jp = m.jk_plan;
      return PhasePlan{Phase::scf_jk, chem::jk_storage_name(jp.storage),
                       fmt::format("aux block {}, {} packed pairs", jp.aux_block, jp.npacked), jp.memory_bytes,
                       jp.scratch_bytes, jp.reason};
    }
    jk.exact = chem::make_exact_jk(m.basis, plan.budget - held, *jk.kernels, m.exact_plan, &comm);
    const auto& ep = m.exact_plan;
    return PhasePlan{Phase::scf_jk, ep.storage, fmt::format("{:.3g} integrals", ep.integrals), ep.memory_bytes, 0,
                     ep.reason};
  });
  plan.phases.push_back(phase);
  jk.seconds = clock.seconds();
  return jk;
}

// The SCF's options as the input gives them, with the ranks' grid for eigenproblems of order nbf when they reach
// mpi.distributed_min_order over several ranks in a build with ScaLAPACK (README "MPI").
chem::ScfOptions scf_options(const Input& input, linalg::Index nbf, linalg::Comm& comm) {
  chem::ScfOptions options = input.scf;
  if (order_on_grid(input, nbf, comm.size())) {
    options.dense = &comm.dense_grid(input.dense);
    options.distributed_min_order = input.distributed_min_order;
  }
  return options;
}

// The progress line of an SCF iteration, `label` naming the SCF ("RHF", "UHF fragment 2").
std::function<void(const chem::ScfIteration&)> scf_iteration_line(const std::string& label,
                                                                  const std::function<void(const std::string&)>& say) {
  return [label, say](const chem::ScfIteration& it) {
    say(fmt::format("  @{} iter {:3}: {:20.12f}  dE {:10.3e}  gradient {:10.3e}  {:7.2f} s{}", label, it.iteration,
                    it.energy, it.delta_energy, it.gradient_rms, it.seconds, it.fp32_exchange ? "  (fp32 K)" : ""));
  };
}

// The SCFs of the fragments in the complex's basis (counterpoise), after the complex's, on its J/K: the J/K's
// integrals (and their fitting) serve them all.
void run_ghosted_scfs(const chem::BasisSet& basis, chem::JkBuilder& jk, linalg::Kernels& kernels,
                      const chem::ScfOptions& options, std::vector<GhostedFragment>& ghosted,
                      const std::function<void(const std::string&)>& say) {
  for (GhostedFragment& g : ghosted) {
    const std::string label = fmt::format("{} fragment {}", chem::reference_label(g.scf_reference), g.fragment + 1);
    say(fmt::format("  SCF of fragment {} in the complex's basis (the other fragments' atoms as ghosts): {}, {} alpha "
                    "and {} beta electrons, on the complex's J/K", g.fragment + 1,
                    chem::reference_label(g.scf_reference), g.nocc,
                    g.scf_reference == chem::ScfReference::rhf ? g.nocc : g.nocc_beta));
    linalg::Stopwatch clock;
    g.scf = chem::run_scf(g.scf_reference, g.molecule, basis, jk, options, kernels, scf_iteration_line(label, say));
    g.scf_seconds = clock.seconds();
    say(fmt::format("  SCF of fragment {} converged in {} iterations: E = {:.12f} Eh ({:.2f} s)", g.fragment + 1,
                    g.scf.iterations, g.scf.energy, g.scf_seconds));
  }
}

// The SCF's J/K made as planned, with the line that says what it is.
std::unique_ptr<chem::JkBuilder> make_planned_jk(const Input& input, ScfJk& planned, linalg::Comm& comm,
                                                 MoleculeRun& m, linalg::Index nocc, const Progress& say) {
  std::unique_ptr<chem::JkBuilder> jk;
  if (input.scf.type == chem::ScfType::df) {
    jk = chem::make_df_jk(std::move(planned.df_engine), m.jk_basis, nocc, *planned.kernels,
                          df_jk_options(input, m.jk_plan.memory_bytes, m.jk_basis.nbf(), comm), m.jk_plan);
    const auto& jp = m.jk_plan;
    say(fmt::format("  SCF J/K: {} ({}); holds {}{}", chem::jk_storage_name(jp.storage), jp.reason,
                    linalg::format_bytes(jp.memory_bytes),
                    jp.scratch_bytes > 0 ? fmt::format(", scratch {}", linalg::format_bytes(jp.scratch_bytes))
                                         : std::string()));
  } else {
    jk = std::move(planned.exact);
    const chem::ExactJkPlan& ep = m.exact_plan;
    say(fmt::format("  SCF J/K: exact, {} ({}); holds {}; incremental builds, rebuilt every {}", ep.storage,
                    ep.reason, linalg::format_bytes(ep.memory_bytes), chem::kExactFullBuildEvery));
  }
  return jk;
}

// Per rank: the J/K set-up (integrals, fitting), the J/K builds and the replicated rest, with their kernels' flops
// and their traffic.
void record_scf_ranks(MoleculeRun& m, linalg::Comm& comm, double setup_seconds, double jk_seconds,
                      double iteration_seconds) {
  using chem::ScfPhase;
  std::vector<linalg::PhaseStats> stats(chem::scf_phase_names().size());
  auto of = [&](ScfPhase phase) -> linalg::PhaseStats& { return stats[static_cast<std::size_t>(phase)]; };
  of(ScfPhase::jk_setup).seconds = setup_seconds;
  of(ScfPhase::jk_builds).seconds = jk_seconds;
  of(ScfPhase::other).seconds = iteration_seconds - jk_seconds;
  for (const auto& r : m.log.records()) {
    for (const auto& [step, name] : chem::scf_step_names())
      if (r.step == name) of(chem::phase_of(step)).flops += r.flops;
  }
  const auto traffic = comm.traffic();
  for (const auto& [phase, name] : chem::scf_phase_names()) {
    if (auto it = traffic.find(name); it != traffic.end()) add_traffic(of(phase), it->second);
  }
  m.ranks = comm.gather(stats);
}

// The MP2 integrals are computed block by block as DF-MP2 reads them (the transform's read_3index rows); here only
// the metric and the screening of the shell pairs.
void set_up_mp2_integrals(const Input& input, linalg::Comm& comm, MoleculeRun& m, linalg::Kernels& kernels) {
  linalg::Stopwatch integral_clock;
  // The whole metric only where some run or the integral file needs it: runs factored on the grid compute their tiles.
  if (!every_mp2_metric_on_grid(input, m.aux_basis.nbf(), comm.size()) || input.save_integrals)
    m.metric = chem::coulomb_metric(m.aux_basis);
  m.ao_3index = std::make_unique<chem::DirectThreeIndex>(m.aux_basis, m.basis);
  m.integral_seconds = integral_clock.seconds();
  kernels.record_host("mp2_integrals", "metric_and_screening", m.integral_seconds,
                      {0, 8.0 * double(m.metric.size())});
}

// save_integrals: rank 0 writes the file (every rank has the same orbitals); the others wait for it, so that a write
// that fails stops them all.
void save_integrals(const Input& input, linalg::Comm& comm, Calculation& calc, linalg::Kernels& kernels,
                    const Progress& say) {
  Reference& p = calc.reference;
  MoleculeRun& m = *p.molecule();
  comm.checked([&] {
    if (!input.save_integrals || comm.rank() != 0) return;
    say(fmt::format("  saving orbitals and integrals to {} (up to {} before compression)", *input.save_integrals,
                    linalg::format_bytes(chem::integral_file_bytes(p.nbf, p.nmo, p.naux))));
    chem::IntegralFileContents contents;
    contents.mo_coefficients = &m.scf.mo_coefficients;
    contents.orbital_energies = &m.scf.orbital_energies;
    contents.nocc = m.scf.nocc;
    if (m.scf.open_shell()) contents.open_shell = &m.scf;
    contents.ao_3index = m.ao_3index.get();
    contents.block_bytes = std::max(8.0 * double(p.nbf) * double(p.nbf),
                                    0.25 * (calc.memory.budget - resident_bytes()));
    contents.metric = &m.metric;
    contents.scf_energy = m.scf.energy;
    contents.nuclear_repulsion_energy = m.scf.nuclear_repulsion;
    contents.molecule = *input.molecule;
    contents.basis = m.basis.name;
    contents.aux_basis = m.aux_basis.name;
    contents.scf_type = p.metadata.scf_type;
    contents.generator = p.metadata.generator;
    linalg::Stopwatch save_clock;
    chem::write_integral_file(*input.save_integrals, contents);
    kernels.record_host("save_integrals", "write_file", save_clock.seconds(),
                        {0, chem::integral_file_bytes(p.nbf, p.nmo, p.naux)});
    m.saved_to = *input.save_integrals;
    say(fmt::format("  orbitals and integrals saved to {} (rerun with integrals: to skip the SCF)",
                    *input.save_integrals));
  });
}

// Integrals, the SCF and the MP2 fitting integrals for `molecule:` input, with the J/K as planned.
void run_molecule(const Input& input, ScfJk& planned, linalg::Comm& comm, Calculation& calc, const Progress& say) {
  MoleculeRun& m = *calc.reference.molecule();
  const chem::Molecule& mol = *input.molecule;
  m.backend = planned.kernels->backend().name();
  linalg::Kernels& kernels = *planned.kernels;
  comm.set_phase(chem::phase_name(chem::ScfPhase::jk_setup));
  linalg::Stopwatch setup_clock;
  const int nocc = calc.reference.nocc;
  const std::string label = chem::reference_label(input.reference);
  say(fmt::format("  SCF: {}, {} J/K{}, {} guess; nbf {}, {}",
                  label, input.scf.type == chem::ScfType::df ? "density-fitted" : "exact",
                  input.scf.type == chem::ScfType::df ? fmt::format(" ({}, {} functions)", m.jk_basis.name,
                                                                    m.jk_basis.nbf())
                                                      : std::string(),
                  input.scf.guess == chem::ScfGuess::sad ? "SAD"
                  : input.scf.guess == chem::ScfGuess::core ? "core"
                  : input.scf.start_basis != nullptr
                      ? fmt::format("{}'s orbitals projected", input.scf.start_basis->name)
                      : std::string("nearby geometry's orbitals"),
                  m.basis.nbf(),
                  calc.reference.open_shell()
                      ? fmt::format("{} alpha and {} beta occupied (multiplicity {})", nocc, calc.reference.nocc_beta,
                                    mol.multiplicity)
                      : fmt::format("{} occupied", nocc)));
  linalg::Stopwatch scf_clock;
  std::unique_ptr<chem::JkBuilder> jk = make_planned_jk(input, planned, comm, m, nocc, say);
  const double setup_seconds = planned.seconds + setup_clock.seconds();
  // The iterations: J and K shared by the ranks (TimedJk), the rest (Fock matrix, DIIS, diagonalisation) done by
  // every rank alike.
  TimedJk timed(*jk, comm);
  comm.set_phase("SCF other");
  linalg::Stopwatch iterations_clock;
  const chem::ScfOptions options = scf_options(input, m.basis.nbf(), comm);
  m.scf = chem::run_scf(input.reference, mol, m.basis, timed, options, kernels, scf_iteration_line(label, say));
  m.scf_seconds = scf_clock.seconds();
  say(fmt::format("  SCF converged in {} iterations: E = {:.12f} Eh ({:.2f} s){}{}", m.scf.iterations, m.scf.energy,
                  m.scf_seconds, m.scf.open_shell() ? fmt::format("; <S^2> = {:.6f}", m.scf.s_squared) : std::string(),
                  input.scf.precision == chem::ScfPrecision::mixed
                      ? fmt::format("; mixed precision: {} with an fp32 K, then fp64", m.scf.fp32_iterations)
                      : std::string()));
  run_ghosted_scfs(m.basis, timed, kernels, options, calc.reference.ghosted, say);
  const double iteration_seconds = iterations_clock.seconds();
  // Kept for the gradient's orbital response when the plan holds it through DF-MP2 (app/gradient_stage.cpp), rather
  // than set up again (its integrals, their fitting) after DF-MP2.
  if (m.keep_scf_jk)
    m.scf_jk = std::move(jk);
  else
    jk.reset();
  record_scf_ranks(m, comm, setup_seconds, timed.seconds, iteration_seconds);
  set_up_mp2_integrals(input, comm, m, kernels);

  Reference& p = calc.reference;
  p.nmo = m.scf.orbital_energies.size();
  p.nocc = m.scf.nocc;
  p.scf_energy = m.scf.energy;
  p.nuclear_repulsion_energy = m.scf.nuclear_repulsion;
  save_integrals(input, comm, calc, kernels, say);
}

class ScfStage final : public Stage {
 public:
  void plan(StageContext& c) override {
    c.comm.checked([&] { plan_scf_matrices(c.input, c.calc.reference, c.calc.memory); });
    // Collective (the ranks share the J/K's integrals): the same budget on every rank, so all refuse alike.
    jk_ = plan_scf_jk(c.input, *c.backends.scf, c.comm, c.calc);
  }
  void run(StageContext& c) override {
    run_molecule(c.input, jk_, c.comm, c.calc, [&c](const std::string& line) { c.say(line); });
  }
  std::string measured_part() const override { return "SCF and MP2 integral setup"; }

 private:
  ScfJk jk_;  // planned, kept for the run
};

}  // namespace

void plan_scf_matrices(const Input& input, const Reference& r, MemoryPlan& plan) {
  plan.phases.push_back({Phase::scf, "", "", scf_matrix_bytes(r.nbf, input.scf.diis_vectors, r.open_shell()), 0, ""});
  if (input.save_integrals) {
    // The file is written compressed; its uncompressed size bounds what the disk must take.
    const double bytes = chem::integral_file_bytes(r.nbf, r.nmo, r.naux);
    const std::string folder = std::filesystem::path(*input.save_integrals).parent_path().string();
    const double free = chem::free_bytes(folder.empty() ? "." : folder);
    if (free >= 0 && free < bytes) {
      throw ResourceError(fmt::format("save_integrals: '{}' needs up to {} and its folder has {} free",
                                      *input.save_integrals, linalg::format_bytes(bytes), linalg::format_bytes(free)));
    }
  }
}

std::unique_ptr<Stage> make_scf_stage() { return std::make_unique<ScfStage>(); }

}  // namespace dfmp2::app
