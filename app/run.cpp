#include "app/run.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "chem/integrals.hpp"
#include "linalg/kernels.hpp"
#include "linalg/bytes.hpp"
#include "chem/scratch.hpp"

namespace dfmp2::app {

bool BackendRun::modelled() const { return log.any_modelled(); }

double BackendRun::modelled_seconds() const { return log.wall_with_modelled_kernels(wall_seconds); }

int resolve_frozen_core(const Input& input, const Reference& problem) {
  int n = 0;
  switch (input.frozen_core.kind) {
    case FrozenCore::Kind::none: return 0;
    case FrozenCore::Kind::count: n = input.frozen_core.count; break;
    case FrozenCore::Kind::psi4_rule:
      if (!problem.metadata.molecule) {
        throw InputError(input.path, "frozen_core", fmt::format("{{key}}: true needs the molecule, and {} has none (integral files: metadata attribute "
            "'molecule'); give the number of frozen orbitals instead", problem.description));
      }
      n = chem::frozen_core_orbitals(*problem.metadata.molecule);
      break;
  }
  if (n >= problem.nocc) {
    throw InputError(input.path, "frozen_core", fmt::format("{{key}}: freezing {} orbitals leaves none of the {} occupied orbitals "
                                 "of {} to correlate", n, problem.nocc, problem.description));
  }
  // Both spins freeze the same orbitals: the beta electrons must fill them.
  if (problem.open_shell() && n > problem.nocc_beta) {
    throw InputError(input.path, "frozen_core", fmt::format("{{key}}: freezing {} orbitals of each spin needs as many beta "
                                 "electrons, and {} has {}", n, problem.description, problem.nocc_beta));
  }
  return n;
}

namespace {

// The ops DF-MP2 will call with these options, each with the element types it needs (chem/dfmp2.hpp).
std::vector<std::pair<linalg::Op, linalg::DType>> required_ops(const Input& input, chem::Precision precision) {
  using linalg::DType;
  using linalg::Op;
  std::vector<Op> ops = {Op::gemm, Op::gemm_batched, Op::syrk};
  switch (input.metric) {
    case chem::MetricMethod::cholesky: ops.insert(ops.end(), {Op::cholesky, Op::trsm}); break;
    case chem::MetricMethod::eigh: ops.push_back(Op::eigh); break;
    case chem::MetricMethod::newton_schulz: break;  // GEMMs only
  }
  if (input.screening.enabled) ops.push_back(Op::spmm);
  std::vector<DType> types;
  switch (precision) {
    case chem::Precision::fp64: types = {DType::fp64}; break;
    case chem::Precision::fp32:
    case chem::Precision::bf16:
    case chem::Precision::bf16x3: types = {DType::fp32}; break;
    case chem::Precision::mixed: types = {DType::fp32, DType::fp64}; break;
  }
  std::vector<std::pair<Op, DType>> out;
  for (DType t : types)
    for (Op op : ops) out.emplace_back(op, t);
  return out;
}

}  // namespace

void check_backend_can_run(const Input& input, linalg::Backend& backend, linalg::Backend* fallback) {
  for (const chem::Precision precision : input.precisions_of(backend.name())) {
    for (const auto& [step, mode] : chem::step_matmul_modes(precision, input.step_modes)) {
      if (backend.supports_matmul_mode(mode)) continue;
      throw UnsupportedError(input.path, "precision", fmt::format("{{key}}: backend '{}' has no {} arithmetic ({} is for the device "
                                         "models trn1 and trn2; use fp64, fp32 or mixed)", backend.name(), linalg::matmul_mode_name(mode), chem::precision_name(precision)));
    }
    for (const auto& [op, dtype] : required_ops(input, precision)) {
      if (backend.supports(op, dtype)) continue;
      if (fallback != nullptr && fallback->supports(op, dtype)) continue;  // allowed, and counted in the report
      const bool metric_op = op == linalg::Op::eigh || op == linalg::Op::cholesky || op == linalg::Op::trsm;
      throw UnsupportedError(input.path, metric_op ? "metric" : "precision", fmt::format("{{key}}: backend '{}' cannot run {} in {} (needed by precision {}{}); choose another {}, or set "
          "device.host_fallback: true to run such ops on the host", backend.name(), linalg::op_name(op), linalg::dtype_name(dtype), chem::precision_name(precision), metric_op ? fmt::format(" with metric {}", chem::metric_name(input.metric)) : std::string(), metric_op ? "metric" : "precision"));
    }
  }
}

namespace {

Reference reference_from_file(std::unique_ptr<chem::IntegralFile> file) {
  const chem::IntegralFile& f = *file;
  Reference p;
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
  p.scf_reference = f.reference();
  p.nocc_beta = f.nocc_beta();
  if (p.open_shell()) {
    p.description += fmt::format(", {}: {} alpha and {} beta occupied", chem::reference_label(f.reference()), p.nocc,
                                 p.nocc_beta);
  }
  p.naux = f.naux();
  p.scf_energy = f.scf_energy();
  p.nuclear_repulsion_energy = f.nuclear_repulsion_energy();
  p.metadata = md;
  p.source = std::move(file);
  return p;
}

Reference synthetic_reference(std::unique_ptr<chem::SyntheticProblem> problem, const std::string& name) {
  const chem::SyntheticProblem& s = *problem;
  Reference p;
  p.kind = "synthetic";
  const auto& shape = s.shape();
  p.description = fmt::format("synthetic {}(nbasis {}, nocc {}, naux {}, seed {})",
                              name.empty() ? "" : "'" + name + "' ", shape.nbasis, shape.nocc, shape.naux, shape.seed);
  p.form = chem::ThreeIndexForm::ao;
  p.nbf = p.nmo = s.nbasis();
  p.nocc = s.nocc();
  p.naux = s.naux();
  p.source = std::move(problem);
  return p;
}

// Runs `phase`, which is given `memory` minus `held` bytes; when its smallest blocks do not fit, the one line names
// the phase and the `memory` the whole run would need.
template <class Phase>
auto within_memory(const MemoryPlan& plan, double held, const Phase& phase) {
  try {
    return phase();
  } catch (const PhaseTooLarge& e) {
    throw ResourceError(fmt::format("memory: {} is too small for the {}; the run needs at least {} ({} for the phase, "
                                    "{} held beside it, {} of it in use at the start), raise 'memory'",
                                    linalg::format_bytes(plan.budget), e.phase(),
                                    linalg::format_bytes(held + e.needed()), linalg::format_bytes(e.needed()),
                                    linalg::format_bytes(held), linalg::format_bytes(plan.baseline)));
  }
}

// Bytes the SCF holds besides its J/K: H, S, X, F, D, C, the orbital gradient, J, K and their copies, and the DIIS
// history of Fock and error matrices.
// An open shell holds each spin's Fock, density and orbital matrices and DIIS vectors (and the exact J/K its last
// D, J and K per spin for the incremental builds: three of the matrices the doubling adds).
double scf_matrix_bytes(linalg::Index nbf, int diis_vectors, bool open_shell) {
  return 8.0 * double(nbf) * double(nbf) * (16.0 + 2.0 * double(diis_vectors)) * (open_shell ? 2.0 : 1.0);
}

// The reference and its occupied orbitals of each spin, from the molecule's charge and multiplicity.
void set_occupation(const chem::Molecule& mol, chem::ScfReference reference, Reference& r) {
  const auto [nalpha, nbeta] = chem::spin_occupied(mol, mol.multiplicity);
  r.scf_reference = reference;
  r.nocc = nalpha;
  r.nocc_beta = reference == chem::ScfReference::rhf ? 0 : nbeta;
}

// A fragment's reference: RHF for a singlet (what UHF and ROHF give it too), else the complex's.
chem::ScfReference fragment_reference(const Input& input, const chem::Molecule& fragment) {
  return fragment.multiplicity == 1 ? chem::ScfReference::rhf : input.reference;
}

// The occupation and frozen core of `mol` (no basis set yet), checked as the complex's are: `description` names it
// in the errors.
Reference occupation_of(const Input& input, const chem::Molecule& mol, chem::ScfReference reference,
                        const std::string& description) {
  Reference r;
  set_occupation(mol, reference, r);
  r.metadata.molecule = mol;
  r.description = description;
  r.nfrozen = resolve_frozen_core(input, r);
  return r;
}

// The fragments in the complex's basis (interaction.bsse cp or both), their occupations and frozen cores known.
std::vector<GhostedFragment> ghosted_fragments(const Input& input) {
  std::vector<GhostedFragment> out;
  if (!input.interaction || !input.interaction->counterpoise) return out;
  const chem::Molecule& mol = *input.molecule;
  for (std::size_t k = 0; k < mol.fragments.size(); ++k) {
    GhostedFragment g;
    g.fragment = k;
    g.molecule = chem::fragment_in_complex_basis(mol, mol.fragments[k]);
    g.scf_reference = fragment_reference(input, g.molecule);
    const Reference r = occupation_of(input, g.molecule, g.scf_reference, fmt::format("fragment {}", k + 1));
    g.nocc = r.nocc;
    g.nocc_beta = r.nocc_beta;
    g.nfrozen = r.nfrozen;
    out.push_back(std::move(g));
  }
  return out;
}

// The basis sets of `molecule:` input (no integral yet): what the memory plan needs to know. The SCF comes later
// (run_molecule), into the reference's MoleculeRun.
Reference molecule_reference(const Input& input) {
  auto m = std::make_unique<MoleculeRun>();
  const chem::Molecule& mol = *input.molecule;
  const int orbital_l = chem::max_orbital_angular_momentum(), fitting_l = chem::max_fitting_angular_momentum();
  m->basis = chem::load_basis(input.basis, mol, input.basis_dir, "basis", orbital_l);
  m->aux_basis = chem::load_basis(input.aux_basis, mol, input.basis_dir, "aux_basis", fitting_l);
  if (input.scf.type == chem::ScfType::df) {
    // The default JK fitting set is blended with the universal one for elements it lacks, as Psi4 does; a set named
    // in scf.jk_basis is taken as it is.
    m->jk_basis = chem::load_basis(input.jk_basis, mol, input.basis_dir, "scf.jk_basis", fitting_l,
                                   input.jk_basis_given ? "" : chem::kUniversalJkFit);
  }
  // As Psi4 1.3.2 does, the JK fitting set takes the orbital basis's form (cartesian d and higher for a cartesian
  // basis such as 6-31G*), while the MP2 fitting set keeps its file's form. Measured: with 6-31G* water, either
  // other choice moves the MP2 energy 1e-6 to 4e-5 Eh away from Psi4's.
  bool orbital_pure = true;
  for (const auto& sh : m->basis.shells) orbital_pure &= (sh.l < 2 || sh.pure);
  for (auto& sh : m->jk_basis.shells) {
    if (sh.l >= 2) sh.pure = orbital_pure;
  }
  Reference p;
  p.kind = "molecule";
  const auto ghosts = std::count_if(mol.atoms.begin(), mol.atoms.end(), [](const chem::Atom& a) { return a.ghost; });
  p.description = fmt::format("{} atoms{} from {}; {} / {}{}", mol.atoms.size(),
                              ghosts > 0 ? fmt::format(" ({} ghost{})", ghosts, ghosts == 1 ? "" : "s") : std::string(),
                              input.molecule_source, m->basis.name,
                              m->aux_basis.name,
                              input.scf.type == chem::ScfType::df ? fmt::format("; DF-SCF with {}", m->jk_basis.name)
                                                                  : std::string("; exact SCF"));
  p.form = chem::ThreeIndexForm::ao;
  p.nbf = p.nmo = m->basis.nbf();
  set_occupation(mol, input.reference, p);
  p.naux = m->aux_basis.nbf();
  // MP2 correlates occupied with virtual orbitals: without a virtual one there is nothing to compute (He in STO-3G).
  if (p.nocc >= p.nbf) {
    throw InputError(input.path, "basis", fmt::format("{{key}}: {} gives this molecule {} basis function{} for {} occupied "
                                 "orbital{}, so no virtual orbital to correlate; choose a larger basis", m->basis.name, p.nbf, p.nbf == 1 ? "" : "s", p.nocc, p.nocc == 1 ? "" : "s"));
  }
  p.metadata.molecule = mol;
  p.metadata.basis = m->basis.name;
  p.metadata.aux_basis = m->aux_basis.name;
  p.metadata.scf_type = input.scf.type == chem::ScfType::df ? "df" : "exact";
  p.metadata.generator = fmt::format("dfmp2 {}", DFMP2_VERSION);
  p.source = std::move(m);
  return p;
}

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
  void compute_rotation_response(const linalg::Matrix& l, const linalg::Matrix& c_occ, linalg::Matrix& j,
                                 linalg::Matrix& kc) override {
    linalg::Stopwatch clock;
    inner_.compute_rotation_response(l, c_occ, j, kc);
    seconds += clock.seconds();
  }
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

// driver: gradient. Its phase comes after DF-MP2 and holds the SCF's J/K (set up again, as planned for the SCF)
// beside its own tensors (chem::dfmp2_gradient_bytes) and the SCF's matrices.
void plan_gradient(const Input& input, Calculation& calc) {
  MemoryPlan& plan = calc.memory;
  const Reference& r = calc.reference;
  const MoleculeRun& m = *r.molecule();
  const bool df = input.scf.type == chem::ScfType::df;
  const double jk = df ? m.jk_plan.memory_bytes : m.exact_plan.memory_bytes;
  const double held = plan.baseline + scf_matrix_bytes(r.nbf, input.scf.diis_vectors, false) + jk;
  const double need = chem::dfmp2_gradient_bytes(r.nbf, r.nocc, r.nfrozen, r.naux, df ? m.jk_basis.nbf() : 0);
  within_memory(plan, held, [&] {
    if (held + need > plan.budget) throw PhaseTooLarge("MP2 gradient", need, "");
    return 0;
  });
  plan.phases.push_back({"MP2 gradient", "memory", "one occupied orbital's pairs at a time", need + jk, 0,
                         "fitted integrals and three-index amplitudes in memory, beside the SCF's J/K set up again"});
}

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
      return PhasePlan{"SCF J/K", chem::jk_storage_name(jp.storage),
                       fmt::format("aux block {}, {} packed pairs", jp.aux_block, jp.npacked), jp.memory_bytes,
                       jp.scratch_bytes, jp.reason};
    }
    jk.exact = chem::make_exact_jk(m.basis, plan.budget - held, *jk.kernels, m.exact_plan, &comm);
    const auto& ep = m.exact_plan;
    return PhasePlan{"SCF J/K", ep.storage, fmt::format("{:.3g} integrals", ep.integrals), ep.memory_bytes, 0,
                     ep.reason};
  });
  plan.phases.insert(plan.phases.begin() + 1, phase);
  jk.seconds = clock.seconds();
  if (input.driver != Driver::energy) plan_gradient(input, calc);
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

// Integrals, RHF and the MP2 fitting integrals for `molecule:` input, with the J/K as planned.
void run_molecule(const Input& input, ScfJk& planned, linalg::Comm& comm, Calculation& calc,
                  const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
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
                  input.scf.guess == chem::ScfGuess::sad ? "SAD" : "core", m.basis.nbf(),
                  calc.reference.open_shell()
                      ? fmt::format("{} alpha and {} beta occupied (multiplicity {})", nocc, calc.reference.nocc_beta,
                                    mol.multiplicity)
                      : fmt::format("{} occupied", nocc)));
  linalg::Stopwatch scf_clock;
  std::unique_ptr<chem::JkBuilder> jk;
  if (input.scf.type == chem::ScfType::df) {
    jk = chem::make_df_jk(std::move(planned.df_engine), m.jk_basis, nocc, kernels,
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
  jk.reset();
  // Per rank: the J/K set-up (integrals, fitting), the J/K builds and the replicated rest, with their kernels' flops
  // and their traffic.
  {
    using chem::ScfPhase;
    std::vector<linalg::PhaseStats> stats(chem::scf_phase_names().size());
    auto of = [&](ScfPhase phase) -> linalg::PhaseStats& { return stats[static_cast<std::size_t>(phase)]; };
    of(ScfPhase::jk_setup).seconds = setup_seconds;
    of(ScfPhase::jk_builds).seconds = timed.seconds;
    of(ScfPhase::other).seconds = iteration_seconds - timed.seconds;
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

  // The MP2 integrals are computed block by block as DF-MP2 reads them (the transform's read_3index rows); here
  // only the metric and the screening of the shell pairs.
  linalg::Stopwatch integral_clock;
  // The whole metric only where some run or the integral file needs it: runs factored on the grid compute their tiles.
  if (!every_mp2_metric_on_grid(input, m.aux_basis.nbf(), comm.size()) || input.save_integrals)
    m.metric = chem::coulomb_metric(m.aux_basis);
  m.ao_3index = std::make_unique<chem::DirectThreeIndex>(m.aux_basis, m.basis);
  m.integral_seconds = integral_clock.seconds();
  kernels.record_host("mp2_integrals", "metric_and_screening", m.integral_seconds,
                      {0, 8.0 * double(m.metric.size())});

  Reference& p = calc.reference;
  p.nmo = m.scf.orbital_energies.size();
  p.nocc = m.scf.nocc;
  p.scf_energy = m.scf.energy;
  p.nuclear_repulsion_energy = m.scf.nuclear_repulsion;

  // Rank 0 writes the file (every rank has the same orbitals); the others wait for it, so that a write that fails
  // stops them all.
  comm.checked([&] {
  if (input.save_integrals && comm.rank() == 0) {
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
    contents.molecule = mol;
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
  }
  });
}

}  // namespace

namespace {

// The backends of a run, made before any of them runs: each named one, the host fallback (device.host_fallback), and
// the one the SCF runs on.
struct Backends {
  std::vector<std::unique_ptr<linalg::Backend>> named;
  std::unique_ptr<linalg::Backend> fallback, scf_own;
  linalg::Backend* scf = nullptr;
};

// Every backend made, and checked against what the input asks of it (an element type, bf16, an op of the chosen
// metric), so that one that cannot run stops the run before any work is done. The SCF is fp64 throughout: it runs on
// the first named backend with fp64 arithmetic, or on the default CPU backend when the list holds only device models.
Backends make_backends(const Input& input) {
  Backends b;
  for (const auto& name : input.backends) {
    try {
      b.named.push_back(devices::make_backend(name, input.device));
    } catch (const InputError& e) {  // a device parameter override the model does not know
      throw InputError(input.path, "device." + name, std::string("{key}: ") + e.what());
    }
    b.named.back()->set_threads(input.threads);
  }
  if (input.host_fallback) {
    b.fallback = devices::make_backend(devices::default_backend());
    b.fallback->set_threads(input.threads);
  }
  for (const auto& backend : b.named) check_backend_can_run(input, *backend, b.fallback.get());
  for (const auto& backend : b.named) {
    if (b.scf == nullptr && backend->supports(linalg::Op::gemm, linalg::DType::fp64) &&
        backend->supports(linalg::Op::eigh, linalg::DType::fp64)) {
      b.scf = backend.get();
    }
  }
  if (b.scf == nullptr && input.molecule) {
    b.scf_own = devices::make_backend(devices::default_backend());
    b.scf_own->set_threads(input.threads);
    b.scf = b.scf_own.get();
  }
  return b;
}

}  // namespace

Reference make_reference(const Input& input) {
  Reference reference;
  if (input.synthetic) {
    reference = synthetic_reference(std::make_unique<chem::SyntheticProblem>(*input.synthetic), input.synthetic_name);
  } else if (input.molecule) {
    // The frozen-core count is known from the molecule alone: checked before any basis set is loaded.
    occupation_of(input, *input.molecule, input.reference, "the molecule");
    std::vector<GhostedFragment> ghosted = ghosted_fragments(input);
    reference = molecule_reference(input);
    reference.ghosted = std::move(ghosted);
  } else {
    reference = reference_from_file(chem::IntegralFile::open(input.integrals));
  }
  reference.nfrozen = resolve_frozen_core(input, reference);
  if (input.screening.enabled && reference.form != chem::ThreeIndexForm::ao) {
    throw InputError(input.path, "screening", fmt::format("{{key}}: screens AO integrals (P|mn), and {} holds MO-form (P|ia)", reference.description));
  }
  return reference;
}

namespace {

// DF-MP2's part of the plan: the blocking of every run (backend and precision), each in the storage the largest of
// them needs, and its phases as the largest needs them. `mp2_budget` is what DF-MP2 may hold beside the orbitals,
// the metric and the integral engine.
void plan_dfmp2(const Input& input, const Reference& r, const std::vector<linalg::Backend*>& backends,
                MemoryPlan& plan, int ranks) {
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
  for (const linalg::Backend* backend : backends) {
    for (const chem::Precision precision : input.precisions_of(backend->name())) {
      plan.mp2_runs.push_back({backend->name(), precision, blocks(*backend, precision, input.mp2_storage)});
      if (plan.mp2_runs.back().blocks.peak_bytes > largest.peak_bytes) largest = plan.mp2_runs.back().blocks;
    }
  }
  // One storage for all runs: a run whose tensor would fit in memory keeps it on scratch when another's does not.
  std::size_t i = 0;
  for (const linalg::Backend* backend : backends) {
    for (const chem::Precision precision : input.precisions_of(backend->name())) {
      chem::BlockPlan& run = plan.mp2_runs[i++].blocks;
      if (run.storage != largest.storage) run = blocks(*backend, precision, largest.storage);
    }
  }
  const std::string storage = chem::mp2_storage_name(largest.storage);
  const std::string why = input.mp2_storage != chem::Mp2Storage::automatic ? "asked for (mp2_storage)"
                          : largest.storage == chem::Mp2Storage::scratch
                              ? "the fitted tensor does not fit in memory beside the blocks"
                              : "the fitted tensor fits in memory";
  using chem::Mp2Step;
  plan.phases.push_back({chem::mp2_phase_name(Mp2Step::metric), "", "", largest.metric_bytes, 0, ""});
  plan.phases.push_back({chem::mp2_phase_name(Mp2Step::transform), storage,
                         fmt::format("aux block {}", largest.aux_block), largest.transform_bytes,
                         largest.scratch_bytes, why});
  plan.phases.push_back({chem::mp2_phase_name(Mp2Step::fitting), storage, fmt::format("rows {}", largest.fit_rows),
                         largest.fitting_bytes, largest.scratch_bytes, ""});
  plan.phases.push_back({chem::mp2_phase_name(Mp2Step::pair_energy), storage,
                         fmt::format("occupied block {}", largest.occupied_block), largest.pair_bytes,
                         largest.scratch_bytes, ""});
}

}  // namespace

MemoryPlan make_memory_plan(const Input& input, const Reference& r, const std::vector<linalg::Backend*>& backends,
                            int ranks, double resident_at_start) {
  MemoryPlan plan;
  plan.budget = input.memory_bytes;
  plan.baseline = resident_at_start + memory_allowance(input.threads);
  plan.scratch_folder = input.scratch;
  plan_dfmp2(input, r, backends, plan, ranks);
  if (!r.ghosted.empty()) {
    plan.shared = fmt::format("the complex and its {} fragments in its basis: one SCF J/K (its three-index integrals "
                              "and fitting) for their SCFs in turn; one DF-MP2 run per backend and precision for "
                              "their {} sets of orbitals at once (metric factored once, each (P|mn) block computed "
                              "once), its tensors holding them all", r.ghosted.size(), r.mp2_spaces().size());
  }
  if (!r.molecule()) return plan;
  plan.phases.insert(plan.phases.begin(), {"SCF", "", "", scf_matrix_bytes(r.nbf, input.scf.diis_vectors, r.open_shell()), 0, ""});
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
  return plan;
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
                                    largest->phase, linalg::format_bytes(largest->scratch_bytes), plan.scratch_folder,
                                    linalg::format_bytes(free)));
  }
}

const chem::BlockPlan& MemoryPlan::mp2_blocks(const std::string& backend, chem::Precision precision) const {
  for (const auto& run : mp2_runs)
    if (run.backend == backend && run.precision == precision) return run.blocks;
  throw std::logic_error(fmt::format("memory plan: no DF-MP2 run planned for {} in {}", backend,
                                     chem::precision_name(precision)));
}

namespace {

// Molecule input prints its plan before the SCF; the other inputs print nothing until the report.
void print_plan(const MemoryPlan& plan, const std::function<void(const std::string&)>& progress) {
  if (!progress) return;
  progress(fmt::format("  memory plan: {} ({} in use at the start or allowed for libraries); scratch in {}",
                       linalg::format_bytes(plan.budget), linalg::format_bytes(plan.baseline), plan.scratch_folder));
  if (!plan.shared.empty()) progress("    shared: " + plan.shared);
  for (const auto& ph : plan.phases) {
    progress(fmt::format("    {:<18} {:<9} {:<28} holds {:>10}{}", ph.phase, ph.storage, ph.blocks,
                         linalg::format_bytes(ph.memory_bytes),
                         ph.scratch_bytes > 0 ? "  scratch " + linalg::format_bytes(ph.scratch_bytes) : ""));
  }
}

// The SCF of molecule input within its part of the plan, its peak measured.
void run_scf(const Input& input, ScfJk& planned, linalg::Comm& comm, Calculation& calc, ResidentSampler& sampler,
             const std::function<void(const std::string&)>& progress) {
  MemoryPlan& plan = calc.memory;
  sampler.take_peak();
  run_molecule(input, planned, comm, calc, progress);
  plan.measured.emplace_back("SCF and MP2 integral setup", sampler.take_peak());
  for (auto& ph : plan.phases) {
    if (ph.phase == "SCF J/K" || ph.phase == "SCF") ph.measured_bytes = plan.measured.back().second;
  }
}

}  // namespace

bool order_on_grid(const Input& input, linalg::Index order, int ranks) {
  return linalg::order_on_grid(order, ranks, input.distributed_min_order);
}

bool metric_on_grid(const Input& input, linalg::Index naux, chem::Precision precision, int ranks) {
  return chem::distributed_metric(input.metric, precision, naux, ranks, input.distributed_min_order);
}

Factorisations describe_factorisations(const Calculation& calc) {
  const Input& input = calc.input;
  const Reference& r = calc.reference;
  Factorisations f;
  f.libraries = linalg::dense_libraries();
  std::tie(f.grid_rows, f.grid_cols) = linalg::grid_shape(calc.ranks);
  f.min_order = input.distributed_min_order;
  // The library that serves each matrix, and why when it is not the one asked for (linalg::dense_library_for).
  const auto served = [&](linalg::DenseLibrary asked, linalg::Index n, const char* what) {
    const std::string fallback = linalg::dense_library_fallback(asked, n, f.grid_rows, f.grid_cols);
    return fmt::format("{} {}{}", linalg::dense_library_name(linalg::dense_library_for(asked, n, f.grid_rows, f.grid_cols)),
                       what, fallback.empty() ? "" : " (" + fallback + ")");
  };
  const auto cholesky = [&](linalg::Index n) { return served(input.dense.cholesky, n, "Cholesky, ScaLAPACK pdtrsm"); };
  auto replicated = [&](linalg::Index order) -> std::string {
    if (calc.ranks == 1) return "one rank";
    if (f.libraries.empty()) return "this build has no ScaLAPACK";
    return fmt::format("order {} below mpi.distributed_min_order {}", order, input.distributed_min_order);
  };
  if (const MoleculeRun* m = r.molecule()) {
    if (input.scf.type == chem::ScfType::df) {
      const linalg::Index n = m->jk_basis.nbf();
      const bool on = order_on_grid(input, n, calc.ranks);
      f.matrices.push_back({"JK metric", n, on, on ? cholesky(n) : replicated(n)});
    }
    const bool on = order_on_grid(input, r.nbf, calc.ranks);
    f.matrices.push_back({"SCF eigenproblems", r.nbf, on,
                          on ? served(input.dense.eigh, r.nbf, "eigensolver") : replicated(r.nbf)});
  }
  for (const std::string& backend : input.backends) {
    for (const chem::Precision precision : input.precisions_of(backend)) {
      const bool on = metric_on_grid(input, r.naux, precision, calc.ranks);
      std::string why = on ? cholesky(r.naux) : replicated(r.naux);
      if (!on && calc.ranks > 1 && !f.libraries.empty() && r.naux >= input.distributed_min_order)
        why = input.metric != chem::MetricMethod::cholesky
                  ? fmt::format("metric {} has no distributed form", chem::metric_name(input.metric))
                  : fmt::format("precision {}: the grid's solves are fp64", chem::precision_name(precision));
      f.matrices.push_back({fmt::format("MP2 metric ({} {})", backend, chem::precision_name(precision)), r.naux, on, why});
    }
  }
  return f;
}

bool every_mp2_metric_on_grid(const Input& input, linalg::Index naux, int ranks) {
  for (const std::string& backend : input.backends)
    for (const chem::Precision precision : input.precisions_of(backend))
      if (!metric_on_grid(input, naux, precision, ranks)) return false;
  return true;
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
  // The device-native prediction is of the whole problem on one NeuronCore in the device's arithmetic: one rank,
  // one closed-shell system, a device precision. Otherwise the report says why there is none.
  const bool one_rank = options.comm == nullptr || options.comm->size() == 1;
  const bool device_precision = precision == chem::Precision::fp32 || precision == chem::Precision::bf16 ||
                                precision == chem::Precision::bf16x3;
  if (!devices::is_device_model(run.backend)) {
  } else if (!one_rank) {
    run.native_absent = "made for one rank only (the whole problem on one NeuronCore)";
  } else if (reference.open_shell()) {
    run.native_absent = "made for closed shells only";
  } else if (!run.ghosted.empty()) {
    run.native_absent = "made for one system only, not a counterpoise run's complex and fragments";
  } else if (!device_precision) {
    run.native_absent = fmt::format("the device has no {} arithmetic", chem::precision_name(precision));
  } else {
    const auto modes = chem::step_matmul_modes(precision, input.step_modes);
    std::vector<linalg::MatmulMode> per_step;
    for (const auto& step : chem::matmul_steps()) per_step.push_back(modes.at(step));
    const devices::neuron::Mp2Shape shape{.nbf = reference.form == chem::ThreeIndexForm::ao ? reference.nbf : 0,
                                          .nocc = reference.nocc - reference.nfrozen,
                                          .nvir = reference.nmo - reference.nocc,
                                          .naux = reference.naux};
    run.native = devices::neuron::native_dfmp2(devices::neuron::load_neuron_params(run.backend, input.device), shape,
                                               per_step);
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

// The run's peak resident memory (getrusage, and what the phases measured), and every rank's.
void record_peaks(Calculation& calc, linalg::Comm& comm) {
  MemoryPlan& plan = calc.memory;
  plan.peak_resident = peak_resident_bytes();
  for (const auto& [part, bytes] : plan.measured) plan.peak_resident = std::max(plan.peak_resident, bytes);
  for (const auto& ph : plan.phases) plan.peak_resident = std::max(plan.peak_resident, ph.measured_bytes);
  calc.rank_peak_resident.resize(static_cast<std::size_t>(comm.size()));
  comm.allgather(&plan.peak_resident, sizeof(double), calc.rank_peak_resident.data());
}

}  // namespace

namespace {

// A fragment in its own basis (interaction.bsse nocp or both): the input of a calculation of its own, with the
// complex's settings.
Input own_basis_input(const Input& input, std::size_t k) {
  Input in = input;
  const chem::Molecule& mol = *input.molecule;
  in.molecule = chem::fragment_molecule(mol, mol.fragments[k]);
  in.reference = fragment_reference(input, *in.molecule);
  in.molecule_source = fmt::format("fragment {} of {}", k + 1, input.molecule_source);
  in.interaction.reset();
  in.output.reset();
  in.save_integrals.reset();
  in.qcschema.reset();
  return in;
}

// Before any work: each fragment in its own basis can run (its basis sets, its frozen core, its memory plan on
// these backends from the memory in use at the start). Smaller than the complex, it fits where the complex does,
// unless the complex's fitting sets leave out a fragment's element.
void check_own_basis_fragments(const Input& input, const std::vector<linalg::Backend*>& backends, int ranks,
                               double resident_at_start) {
  if (!input.interaction || !input.interaction->uncorrected) return;
  for (std::size_t k = 0; k < input.molecule->fragments.size(); ++k) {
    const std::string which = fmt::format("fragment {} in its own basis (interaction.bsse nocp): ", k + 1);
    try {
      const Input fragment = own_basis_input(input, k);
      const Reference r = make_reference(fragment);
      make_memory_plan(fragment, r, backends, ranks, resident_at_start);
    } catch (const InputError& e) {
      throw InputError(e.where(), e.key(), which + e.text());
    } catch (const ResourceError& e) {
      throw ResourceError(which + e.what());
    }
  }
}

// Each fragment in its own basis (interaction.bsse nocp or both), after the complex: a calculation of its own, on the
// same ranks, its progress indented under a line that names it.
void run_own_basis_fragments(Calculation& calc, linalg::Comm& comm,
                             const std::function<void(const std::string&)>& progress,
                             const std::function<void(const std::string&, long long, long long)>& phase_progress) {
  const Input& input = calc.input;
  if (!input.interaction || !input.interaction->uncorrected) return;
  for (std::size_t k = 0; k < input.molecule->fragments.size(); ++k) {
    Input fragment = own_basis_input(input, k);
    fragment.resident_at_start = resident_bytes();
    if (progress) progress(fmt::format("  fragment {} in its own basis ({} atoms):", k + 1, fragment.molecule->atoms.size()));
    auto indented = [&](const std::string& line) {
      if (progress) progress("  " + line);
    };
    calc.own_basis.push_back(
        {k, std::make_unique<Calculation>(run_calculation(fragment, comm, indented, phase_progress))});
  }
}

}  // namespace

std::vector<InteractionPart> interaction_parts(const Calculation& calc, std::size_t run) {
  const Reference& r = calc.reference;
  const MoleculeRun& m = *r.molecule();
  const BackendRun& complex = calc.runs.at(run);
  std::vector<InteractionPart> parts;
  auto beta = [](const Reference& ref) { return ref.open_shell() ? ref.nocc_beta : ref.nocc; };
  parts.push_back({"complex", 0, false, r.nbf, r.nocc, beta(r), r.nfrozen, &m.scf, &complex.result, m.scf_seconds});
  for (std::size_t k = 0; k < r.ghosted.size(); ++k) {
    const GhostedFragment& g = r.ghosted[k];
    parts.push_back({fmt::format("fragment {}", g.fragment + 1), g.fragment + 1, false, r.nbf, g.nocc,
                     g.scf_reference == chem::ScfReference::rhf ? g.nocc : g.nocc_beta, g.nfrozen, &g.scf,
                     &complex.ghosted.at(k), g.scf_seconds});
  }
  for (const OwnBasisFragment& o : calc.own_basis) {
    const Reference& f = o.calc->reference;
    const MoleculeRun& fm = *f.molecule();
    parts.push_back({fmt::format("fragment {}", o.fragment + 1), o.fragment + 1, true, f.nbf, f.nocc, beta(f),
                     f.nfrozen, &fm.scf, &o.calc->runs.at(run).result, fm.scf_seconds + fm.integral_seconds,
                     o.calc->runs.at(run).wall_seconds});
  }
  return parts;
}

std::vector<InteractionEnergy> interaction_energies(const Calculation& calc, std::size_t run) {
  std::vector<InteractionEnergy> out;
  if (!calc.input.interaction) return out;
  const std::vector<InteractionPart> parts = interaction_parts(calc, run);
  // The complex's energies minus those of the fragments of one basis.
  auto scheme = [&](const char* name, bool own_basis) {
    InteractionEnergy e;
    e.scheme = name;
    for (const InteractionPart& p : parts) {
      if (p.fragment != 0 && p.own_basis != own_basis) continue;
      const double sign = p.fragment == 0 ? 1.0 : -1.0;
      e.scf += sign * p.scf->energy;
      e.singles += sign * p.mp2->singles;
      e.opposite_spin += sign * p.mp2->opposite_spin;
      e.same_spin += sign * p.mp2->same_spin;
      e.correlation += sign * p.mp2->correlation();
      e.scs_correlation += sign * p.mp2->scs_correlation();
    }
    out.push_back(e);
  };
  if (calc.input.interaction->counterpoise) scheme("CP", false);
  if (calc.input.interaction->uncorrected) scheme("NOCP", true);
  return out;
}

namespace {

// driver: gradient, after the energy runs: the SCF's J/K set up again as planned, then chem::rhf_dfmp2_gradient on
// every rank alike (the J/K builds shared among them as in the SCF; the rest replicated).
void run_gradient(const Input& input, linalg::Backend& backend, linalg::Comm& comm, Calculation& calc,
                  const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  MoleculeRun& m = *calc.reference.molecule();
  comm.set_phase("MP2 gradient");
  GradientRun& g = calc.gradient.emplace();
  g.backend = backend.name();
  linalg::Kernels kernels(backend, g.log);
  linalg::Stopwatch clock;
  std::unique_ptr<chem::JkBuilder> jk;
  if (input.scf.type == chem::ScfType::df) {
    jk = chem::make_df_jk(std::make_unique<chem::ThreeCenterEngine>(m.jk_basis, m.basis), m.jk_basis,
                          calc.reference.nocc, kernels, df_jk_options(input, m.jk_plan.memory_bytes, m.jk_basis.nbf(), comm), m.jk_plan);
  } else {
    chem::ExactJkPlan plan;
    jk = chem::make_exact_jk(m.basis, m.exact_plan.memory_bytes, kernels, plan, &comm);
  }
  say(fmt::format("  MP2 gradient: {} frozen core orbitals, on backend {} (fp64)", calc.reference.nfrozen, g.backend));
  chem::DfMp2GradientInput in;
  in.molecule = &*input.molecule;
  in.basis = &m.basis;
  in.ri_basis = &m.aux_basis;
  in.jk_basis = input.scf.type == chem::ScfType::df ? &m.jk_basis : nullptr;
  in.scf = &m.scf;
  in.nfrozen = calc.reference.nfrozen;
  in.jk = jk.get();
  g.result = chem::rhf_dfmp2_gradient(in, kernels);
  g.seconds = clock.seconds();
  say(fmt::format("  MP2 gradient done ({:.2f} s; Z-vector {} iterations, largest residual {:.1e})", g.seconds,
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
  Input displaced_input = input;
  displaced_input.driver = Driver::gradient;
  displaced_input.output.reset();
  displaced_input.save_integrals.reset();
  linalg::Stopwatch clock;
  h.hessian = chem::finite_difference_hessian(*input.molecule, [&](const chem::Molecule& displaced, int k) {
    displaced_input.molecule = displaced;
    const Calculation c = run_calculation(displaced_input, comm);
    say(fmt::format("  displacement {:3} of {}: E = {:.12f} Eh", k + 1, h.displacements,
                    *c.reference.scf_energy + c.runs.front().result.correlation()));
    return c.gradient->result.gradient;
  }, h.step);
  h.vibrations = chem::harmonic_analysis(*input.molecule, h.hessian);
  h.seconds = clock.seconds();
}

}  // namespace

Calculation run_calculation(const Input& input, linalg::Comm& comm,
                            const std::function<void(const std::string&)>& progress,
                            const std::function<void(const std::string&, long long, long long)>& phase_progress) {
  Calculation calc;
  calc.input = input;
  calc.ranks = comm.size();
  calc.mpi = comm.description();
  omp_set_num_threads(input.threads);
  ResidentSampler sampler;  // each phase's measured peak
  // Up to the memory plan everything is local to each rank: checked, so that a rank that cannot go on (a file it
  // cannot read, a budget too small for it) stops them all.
  Backends backends;
  comm.checked([&] {
    backends = make_backends(input);
    calc.reference = make_reference(input);
  });
  // One plan for all ranks, made on the largest resident memory at the start of any.
  const double resident_at_start = comm.max(input.resident_at_start);
  comm.checked([&] {
    std::vector<linalg::Backend*> named;
    for (const auto& b : backends.named) named.push_back(b.get());
    calc.memory = make_memory_plan(input, calc.reference, named, comm.size(), resident_at_start);
    check_own_basis_fragments(input, named, comm.size(), resident_at_start);
  });
  ScfJk scf_jk;
  if (calc.reference.molecule()) scf_jk = plan_scf_jk(input, *backends.scf, comm, calc);
  comm.checked([&] { check_scratch(calc.memory); });  // each rank's own folder
  if (calc.reference.molecule()) {
    print_plan(calc.memory, progress);
    run_scf(input, scf_jk, comm, calc, sampler, progress);
  }

  chem::DfMp2Options options = dfmp2_options(input, calc.reference, comm);
  options.progress = phase_progress;
  // Each DF-MP2 phase's measured peak resident memory, next to what the plan gave it (the largest over the runs).
  options.phase_done = [&](chem::Mp2Step step) {
    const double peak = sampler.take_peak();
    for (auto& ph : calc.memory.phases) {
      if (ph.phase == chem::mp2_phase_name(step)) ph.measured_bytes = std::max(ph.measured_bytes, peak);
    }
  };
  for (auto& backend : backends.named) {
    backend->set_threads(input.threads);
    for (const chem::Precision precision : input.precisions_of(backend->name())) {
      sampler.take_peak();  // each DF-MP2 phase measures its own peak (options.phase_done)
      calc.runs.push_back(run_dfmp2_on(*backend, backends.fallback.get(), precision, input, calc.reference, calc.memory,
                                          options));
    }
    backend->release();
  }
  run_own_basis_fragments(calc, comm, progress, phase_progress);
  if (input.driver != Driver::energy) {
    sampler.take_peak();
    run_gradient(input, *backends.scf, comm, calc, progress);
    for (auto& ph : calc.memory.phases)
      if (ph.phase == "MP2 gradient") ph.measured_bytes = sampler.take_peak();
  }
  if (input.driver == Driver::hessian) run_hessian(input, comm, calc, progress);
  record_peaks(calc, comm);
  return calc;
}

namespace {
template <class Source, class Variant>
Source* source_of(const Variant& v) {
  const auto* p = std::get_if<std::unique_ptr<Source>>(&v);
  return p != nullptr ? p->get() : nullptr;
}
}  // namespace

const chem::IntegralFile* Reference::integral_file() const { return source_of<chem::IntegralFile>(source); }
const chem::SyntheticProblem* Reference::synthetic() const { return source_of<chem::SyntheticProblem>(source); }
const MoleculeRun* Reference::molecule() const { return source_of<MoleculeRun>(source); }
MoleculeRun* Reference::molecule() { return source_of<MoleculeRun>(source); }

std::vector<chem::SpinSpace> Reference::mp2_spaces() const {
  std::vector<chem::SpinSpace> spaces{{nocc, nocc - nfrozen, nmo - nocc}};
  if (open_shell()) spaces.push_back({nocc_beta, nocc_beta - nfrozen, nmo - nocc_beta});
  for (std::size_t k = 0; k < ghosted.size(); ++k) {
    for (chem::SpinSpace sp : ghosted[k].mp2_spaces(nmo)) {
      sp.system = static_cast<int>(k + 1);
      spaces.push_back(sp);
    }
  }
  return spaces;
}

std::vector<chem::SpinSpace> GhostedFragment::mp2_spaces(linalg::Index nmo) const {
  std::vector<chem::SpinSpace> spaces{{nocc, nocc - nfrozen, nmo - nocc}};
  if (scf_reference != chem::ScfReference::rhf) spaces.push_back({nocc_beta, nocc_beta - nfrozen, nmo - nocc_beta});
  return spaces;
}

std::vector<chem::Mp2System> Reference::mp2_systems() const {
  std::vector<chem::Mp2System> systems{{dfmp2_input(), nfrozen}};
  const MoleculeRun* m = molecule();
  for (const GhostedFragment& g : ghosted)
    systems.push_back({m->dfmp2_input_for(g.scf), g.nfrozen});
  return systems;
}

chem::DfMp2Input Reference::dfmp2_input() const {
  return std::visit(
      [](const auto& s) -> chem::DfMp2Input {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::monostate>) {
          throw std::logic_error("Reference::dfmp2_input: no source");
        } else {
          return s->dfmp2_input();
        }
      },
      source);
}

double MemoryPlan::planned_peak() const {
  double peak = 0;
  for (const auto& ph : phases) peak = std::max(peak, ph.memory_bytes);
  return baseline + peak;
}

// Measured on this project's machines: Eigen's GEMM and SYRK pack their operands into blocks sized for the caches,
// up to about 70 MiB per thread for the pair step of 32 waters (it grows with the product's k, up to the L3 size);
// OpenBLAS keeps a 32 MiB buffer per thread; libint2, HDF5 and the thread stacks add a few MiB.
double memory_allowance(int threads) { return double(64 << 20) + double(threads) * double(64 << 20); }

double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * double(sysconf(_SC_PAGE_SIZE));
}

double peak_resident_bytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

struct ResidentSampler::State {
  std::atomic<bool> stop{false};
  std::atomic<double> peak{0};
  std::thread thread;
};

ResidentSampler::ResidentSampler() : state_(std::make_unique<State>()) {
  State* s = state_.get();
  s->peak = resident_bytes();
  s->thread = std::thread([s] {
    while (!s->stop.load()) {
      const double now = resident_bytes();
      double seen = s->peak.load();
      while (now > seen && !s->peak.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
}

ResidentSampler::~ResidentSampler() {
  state_->stop = true;
  state_->thread.join();
}

double ResidentSampler::take_peak() {
  const double now = resident_bytes();
  double peak = std::max(state_->peak.exchange(now), now);
  return peak;
}

}  // namespace dfmp2::app
