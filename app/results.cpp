#include "app/results.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/cost.hpp"
#include "app/report.hpp"
#include "chem/system/system.hpp"
#include "chem/io/io.hpp"
#include "devices/calibration.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {
namespace fs = std::filesystem;

namespace {

// A natoms x 3 matrix as QCSchema stores arrays (flat, row-major) and as Psi4's variables hold them (rows).
nlohmann::json flat(const linalg::Matrix& m) {
  nlohmann::json a = nlohmann::json::array();
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) a.push_back(m(r, c));
  return a;
}
nlohmann::json rows(const linalg::Matrix& m) {
  nlohmann::json a = nlohmann::json::array();
  for (Eigen::Index r = 0; r < m.rows(); ++r) a.push_back({m(r, 0), m(r, 1), m(r, 2)});
  return a;
}

// driver: gradient. return_result is the method's total gradient (Eh/bohr: MP2, SCS-MP2 or SOS-MP2); the properties,
// the variables under Psi4's names and extras.dfmp2.gradient hold it with the SCF gradient and both dipoles (a.u.;
// the relaxed one the method's: QCSchema's mp2_dipole_moment with MP2 only).
void add_gradient(const Calculation& calc, nlohmann::json& j) {
  const GradientRun& g = *calc.gradient;
  const chem::DfMp2Gradient& r = g.result;
  const chem::Mp2Model& model = calc.input.mp2_model;
  j["return_result"] = flat(calc.returned_gradient());
  j["properties"]["return_gradient"] = flat(calc.returned_gradient());
  j["properties"]["scf_total_gradient"] = flat(r.scf_gradient);
  j["properties"]["scf_dipole_moment"] = r.scf_dipole;
  if (model.method == chem::Mp2Method::mp2) j["properties"]["mp2_dipole_moment"] = r.relaxed_dipole;
  nlohmann::json& v = j["extras"]["qcvars"];
  v[model.label() + " TOTAL GRADIENT"] = rows(r.gradient);  // the complex's, with `interaction`
  v["CURRENT GRADIENT"] = rows(calc.returned_gradient());
  if (const auto& cp = calc.counterpoise) {
    v["CP-CORRECTED TOTAL GRADIENT"] = rows(cp->gradient);
    v["CP-CORRECTED TOTAL ENERGY"] = v["COUNTERPOISE CORRECTED TOTAL ENERGY"] = v["CURRENT ENERGY"] = cp->energy;
    j["properties"]["return_energy"] = cp->energy;
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& p : cp->parts) {
      parts.push_back({{"name", p.name}, {"sign", p.sign}, {"energy", p.energy}, {"gradient", rows(p.gradient)},
                       {"scf_iterations", p.scf_iterations},
                       {"from_energy_orbitals", p.from_energy_orbitals}});
    }
    j["extras"]["dfmp2"]["counterpoise_gradient"] = {{"energy", cp->energy}, {"gradient", rows(cp->gradient)},
                                                     {"complex_gradient", rows(r.gradient)}, {"parts", parts},
                                                     {"seconds", cp->seconds}};
  }
  v["SCF TOTAL GRADIENT"] = rows(r.scf_gradient);
  v["SCF DIPOLE"] = r.scf_dipole;
  v[model.label() + " DIPOLE"] = v["CURRENT DIPOLE"] = r.relaxed_dipole;
  j["extras"]["dfmp2"]["gradient"] = {{"backend", g.backend},
                                      {"method", linalg::name_in(chem::mp2_method_names(), model.method)},
                                      {"spin_scales", {model.scales().opposite_spin, model.scales().same_spin}},
                                      {"gradient", rows(r.gradient)},
                                      {"scf_gradient", rows(r.scf_gradient)},
                                      {"mp2_correlation_energy", r.correlation()},
                                      {"scf_dipole", r.scf_dipole},
                                      {"relaxed_dipole", r.relaxed_dipole},
                                      {"external_charge_gradient", rows(g.charge_gradient)},
                                      {"zvector_iterations", r.zvector_iterations},
                                      {"zvector_residual", r.zvector_residual},
                                      {"seconds", g.seconds},
                                      {"step_seconds", step_seconds(r)}};
}

// driver: hessian. return_result is the Hessian (3 natoms x 3 natoms, Eh/bohr^2, flat); the harmonic analysis goes
// in extras.dfmp2.vibrations.
void add_hessian(const Calculation& calc, nlohmann::json& j) {
  const HessianRun& h = *calc.hessian;
  j["return_result"] = flat(h.hessian);
  j["properties"]["return_hessian"] = flat(h.hessian);
  nlohmann::json rows_of = nlohmann::json::array();
  for (Eigen::Index r = 0; r < h.hessian.rows(); ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (Eigen::Index c = 0; c < h.hessian.cols(); ++c) row.push_back(h.hessian(r, c));
    rows_of.push_back(row);
  }
  j["extras"]["qcvars"]["CURRENT HESSIAN"] = j["extras"]["qcvars"][calc.input.mp2_model.label() + " TOTAL HESSIAN"] = rows_of;
  const chem::Vibrations& v = h.vibrations;
  nlohmann::json modes = nlohmann::json::array();
  for (Eigen::Index k = 0; k < v.modes.cols(); ++k) {
    nlohmann::json mode = nlohmann::json::array();
    for (Eigen::Index x = 0; x < v.modes.rows(); ++x) mode.push_back(v.modes(x, k));
    modes.push_back(mode);
  }
  j["extras"]["dfmp2"]["vibrations"] = {
      {"step_bohr", h.step},
      {"displacements", h.displacements},
      {"projected_rigid_motions", v.projected},
      {"frequencies_cm", std::vector<double>(v.frequencies.data(), v.frequencies.data() + v.frequencies.size())},
      {"reduced_masses_amu",
       std::vector<double>(v.reduced_masses.data(), v.reduced_masses.data() + v.reduced_masses.size())},
      {"normal_modes", modes},
      {"displaced_scf_iterations", h.scf_iterations},
      {"seconds", h.seconds}};
}

nlohmann::json properties(const Calculation& calc, const BackendRun& run) {
  const Reference& f = calc.reference;
  nlohmann::json p;
  if (auto scf = f.scf_energy) p["scf_total_energy"] = *scf;
  if (auto nuc = f.nuclear_repulsion_energy) p["nuclear_repulsion_energy"] = *nuc;
  const chem::DfMp2Result& r = run.result;
  p["mp2_same_spin_correlation_energy"] = r.same_spin;
  p["mp2_opposite_spin_correlation_energy"] = r.opposite_spin;
  p["mp2_singles_energy"] = r.singles;
  p["mp2_doubles_energy"] = r.same_spin + r.opposite_spin;
  p["mp2_correlation_energy"] = r.correlation();
  // The method's energy (MP2, SCS-MP2 or SOS-MP2: `method`) is the one returned.
  const double correlation = r.correlation(calc.input.mp2_model.scales());
  if (auto scf = f.scf_energy) {
    p["mp2_total_energy"] = *scf + run.result.correlation();
    p["return_energy"] = *scf + correlation;
  } else {
    p["return_energy"] = correlation;
  }
  if (f.nbf > 0) p["calcinfo_nbasis"] = f.nbf;
  if (calc.input.molecule) p["calcinfo_natom"] = calc.input.molecule->atoms.size();
  p["calcinfo_nmo"] = f.nmo;
  p["calcinfo_nalpha"] = f.nocc;
  p["calcinfo_nbeta"] = f.beta_occupied();
  return p;
}

// The energies under the names Psi4 gives its variables (psi4.variable(), QCEngine's extras.qcvars), as Psi4's
// DF-MP2 sets them for each reference: the singles term (ROHF-MBPT(2)) is part of the correlation energies. The
// CURRENT ones are the method's (`method`); SOS-MP2's own under its name when it is the method.
nlohmann::json qcvars(const Calculation& calc, const BackendRun& run) {
  const Reference& f = calc.reference;
  const chem::DfMp2Result& r = run.result;
  const chem::Mp2Model& model = calc.input.mp2_model;
  const double correlation = r.correlation(model.scales());
  nlohmann::json v = {{"MP2 SINGLES ENERGY", r.singles},
                      {"MP2 DOUBLES ENERGY", r.same_spin + r.opposite_spin},
                      {"MP2 SAME-SPIN CORRELATION ENERGY", r.same_spin},
                      {"MP2 OPPOSITE-SPIN CORRELATION ENERGY", r.opposite_spin},
                      {"MP2 CORRELATION ENERGY", r.correlation()},
                      {"SCS-MP2 CORRELATION ENERGY", r.correlation(model.scs)},
                      {model.label() + " CORRELATION ENERGY", correlation},
                      {"CURRENT CORRELATION ENERGY", correlation}};
  if (auto scf = f.scf_energy) {
    v["SCF TOTAL ENERGY"] = *scf;
    v["CURRENT REFERENCE ENERGY"] = *scf;
    v["MP2 TOTAL ENERGY"] = *scf + r.correlation();
    v["SCS-MP2 TOTAL ENERGY"] = *scf + r.correlation(model.scs);
    v[model.label() + " TOTAL ENERGY"] = *scf + correlation;
    v["CURRENT ENERGY"] = *scf + correlation;
  }
  if (auto nuc = f.nuclear_repulsion_energy) v["NUCLEAR REPULSION ENERGY"] = *nuc;
  // Interaction energies, under the names of Psi4's n-body driver (1.3 and later spellings), of the method's total.
  const auto interaction = interaction_energies(calc, std::size_t(&run - calc.runs.data()));
  for (const InteractionEnergy& e : interaction) {
    const std::string longer = e.scheme == "CP" ? "COUNTERPOISE CORRECTED" : "NON-COUNTERPOISE CORRECTED";
    const double total = e.total_with(model.scales());
    v[e.scheme + "-CORRECTED INTERACTION ENERGY"] = total;
    // The n-body name at n = the fragment count: the whole interaction energy, as Psi4 names it with max_nbody n.
    v[fmt::format("{}-CORRECTED {}-BODY INTERACTION ENERGY", e.scheme, calc.input.molecule->fragments.size())] = total;
    v[longer + " INTERACTION ENERGY"] = total;
    if (e.scheme == "NOCP") v["NOCP-CORRECTED TOTAL ENERGY"] = v["NON-COUNTERPOISE CORRECTED TOTAL ENERGY"] = *f.scf_energy + correlation;
  }
  // The CP total energy is the fragments' own-basis energies plus the CP interaction energy: with both schemes.
  if (interaction.size() == 2) {
    double fragments = 0;
    for (const InteractionPart& p : interaction_parts(calc, std::size_t(&run - calc.runs.data())))
      if (p.own_basis) fragments += p.total(model.scales());
    v["CP-CORRECTED TOTAL ENERGY"] = v["COUNTERPOISE CORRECTED TOTAL ENERGY"] =
        fragments + interaction[0].total_with(model.scales());
  }
  return v;
}

// extras.dfmp2.interaction: every calculation of the interaction energy (first run) and each run's interaction
// energies by scheme, in Eh.
nlohmann::json interaction_json(const Calculation& calc) {
  nlohmann::json calcs = nlohmann::json::array();
  const Reference& r = calc.reference;
  for (const InteractionPart& p : interaction_parts(calc, 0)) {
    nlohmann::json c = {{"name", p.name}, {"basis", p.own_basis ? "own" : "complex"}, {"nbf", p.nbf},
                        {"nalpha", p.nalpha}, {"nbeta", p.nbeta},
                        {"reference", linalg::name_in(chem::scf_reference_names(), p.scf->reference)},
                        {"nfrozen", p.nfrozen}, {"scf_energy", p.scf->energy},
                        {"mp2_correlation_energy", p.mp2->correlation()}, {"scf_iterations", p.scf->iterations},
                        {"scf_seconds", p.scf_seconds}};
    if (p.fragment != 0) c["fragment"] = p.fragment;
    if (p.own_basis) c["mp2_seconds"] = p.mp2_seconds;
    calcs.push_back(c);
  }
  nlohmann::json runs = nlohmann::json::array();
  for (std::size_t run = 0; run < calc.runs.size(); ++run) {
    nlohmann::json schemes;
    for (const InteractionEnergy& e : interaction_energies(calc, run)) {
      schemes[e.scheme == "CP" ? "cp" : "nocp"] = {
          {"scf", e.scf}, {"mp2_singles", e.singles}, {"mp2_opposite_spin", e.opposite_spin},
          {"mp2_same_spin", e.same_spin}, {"mp2_correlation", e.correlation}, {"mp2_total", e.mp2_total()},
          {"scs_mp2_correlation", e.correlation_with(calc.input.mp2_model.scs)},
          {"scs_mp2_total", e.total_with(calc.input.mp2_model.scs)},
          {"method_total", e.total_with(calc.input.mp2_model.scales())},
          {"mp2_total_kcal_mol", e.mp2_total() * kHartreeToKcalMol}};
    }
    runs.push_back({{"backend", calc.runs[run].backend},
                    {"precision", chem::precision_name(calc.runs[run].precision)},
                    {"energies", schemes}});
  }
  const InteractionOptions& o = *calc.input.interaction;
  return {{"bsse", o.counterpoise && o.uncorrected ? "both" : o.counterpoise ? "cp" : "nocp"},
          {"calculations", calcs},
          {"runs", runs},
          {"jk_setup_seconds", r.molecule()->ranks.empty() ? 0.0
                                                           : r.molecule()->ranks.front()[static_cast<std::size_t>(chem::ScfPhase::jk_setup)].seconds},
          {"kcal_mol_per_hartree", kHartreeToKcalMol}};
}

nlohmann::json kernels(const linalg::KernelLog& log) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& k : log.records()) {
    rows.push_back({{"step", k.step},
                    {"kernel", k.kernel},
                    {"backend", k.backend},
                    {"dtype", k.dtype},
                    {"calls", k.calls},
                    {"seconds", k.seconds},
                    {"flops", k.flops},
                    {"bytes", k.bytes},
                    {"gflops_per_second", k.seconds > 0 ? k.flops / k.seconds * 1e-9 : 0.0},
                    {"fallback", k.fallback}});
    if (k.modelled) {
      const auto& m = k.model;
      rows.back()["modelled"] = {{"seconds", m.total},       {"dispatch", m.dispatch}, {"transfer", m.transfer},
                                 {"dma", m.dma},             {"compute", m.compute},   {"host", m.host},
                                 {"compile", m.compile},     {"launches", m.launches}, {"compiles", m.compiles},
                                 {"cache_loads", m.cache_loads}, {"device_flops", m.device_flops}};
    }
  }
  return rows;
}

}  // namespace

// Every rank's stats of each phase: {phase, imbalance (max / mean of the seconds not spent waiting), ranks: [...]}.
nlohmann::json rank_json(const std::vector<std::string>& phases,
                         const std::vector<std::vector<linalg::PhaseStats>>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t p = 0; p < phases.size(); ++p) {
    nlohmann::json per_rank = nlohmann::json::array();
    double sum = 0, hi = 0;  // of the busy seconds (not waiting for other ranks)
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const linalg::PhaseStats& st = ranks[r][p];
      const double busy = std::max(0.0, st.seconds - st.wait_seconds);
      sum += busy;
      hi = std::max(hi, busy);
      per_rank.push_back({{"rank", r},
                          {"seconds", st.seconds},
                          {"flops", st.flops},
                          {"bytes_sent", st.bytes_sent},
                          {"bytes_received", st.bytes_received},
                          {"messages", st.messages},
                          {"wait_seconds", st.wait_seconds}});
    }
    const double mean = ranks.empty() ? 0.0 : sum / double(ranks.size());
    out.push_back({{"phase", phases[p]}, {"imbalance", mean > 0 ? hi / mean : 1.0}, {"ranks", per_rank}});
  }
  return out;
}

namespace {

// One run's entry of extras.dfmp2.backends: what ran, its energies against the references, blocking, ranks, kernels.
// The device-native prediction beside the library-structure one (README "Two predictions"); null without one.
nlohmann::json native_json(const BackendRun& run) {
  if (!run.native) return run.native_absent.empty() ? nlohmann::json(nullptr) : nlohmann::json{{"absent", run.native_absent}};
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : run.native->steps) {
    steps.push_back({{"step", s.step},
                     {"mode", linalg::matmul_mode_name(s.mode)},
                     {"library_seconds", library_step_seconds(run, s.step)},
                     {"seconds", s.seconds},
                     {"bottleneck", s.bottleneck},
                     {"peak_share", s.peak_share},
                     {"flops", s.flops},
                     {"launches", s.launches},
                     {"parts", {{"tensor", s.tensor}, {"vector", s.vector}, {"dma", s.dma}, {"hbm", s.hbm},
                                {"link", s.link}, {"host", s.host}, {"launch", s.launch}}}});
  }
  return {{"seconds", run.native->seconds()},
          {"resident", run.native->resident},
          {"resident_bytes", run.native->resident_bytes},
          {"steps", steps}};
}

nlohmann::json backend_json(const Calculation& calc, const BackendRun& run) {
  const auto& r = run.result;
  nlohmann::json metric = {{"method", chem::metric_name(r.metric)}};
  if (r.metric == chem::MetricMethod::eigh) {
    metric["dropped_eigenvalues"] = r.metric_report.dropped;
    metric["threshold"] = r.eigh_threshold;
  } else if (r.metric == chem::MetricMethod::newton_schulz) {
    metric["iterations"] = r.metric_report.iterations;
    metric["residual"] = r.metric_report.residual;
  }
  const BackendRun* reference = fp64_reference(calc, run);
  nlohmann::json accuracy = nullptr;
  if (const BackendRun* ref = accuracy_reference(calc, run)) {
    accuracy = {{"correlation_energy", r.correlation() - ref->result.correlation()}, {"against", run_label(*ref)}};
  }
  nlohmann::json operands = nlohmann::json::object();
  for (const auto& [step, mode] : r.step_modes) operands[step] = linalg::matmul_mode_name(mode);
  nlohmann::json screening = nullptr;
  if (r.screening.enabled) {
    screening = {{"threshold", r.screening.threshold},
                 {"block", r.screening.block},
                 {"blocks_kept", r.screening.blocks_kept},
                 {"blocks_total", r.screening.blocks_total},
                 {"energy_change_vs_unscreened",
                  run.unscreened_correlation ? nlohmann::json(r.correlation() - *run.unscreened_correlation)
                                             : nlohmann::json(nullptr)}};
  }
  return {{"backend", run.backend},
                      {"screening", screening},
                      {"details", run.details},
                      {"precision", chem::precision_name(run.precision)},
                      {"metric", metric},
                      {"difference_from_fp64",
                       reference ? nlohmann::json(r.correlation() - reference->result.correlation())
                                 : nlohmann::json(nullptr)},
                      {"error", accuracy},
                      {"matmul_operands", operands},
                      {"properties", properties(calc, run)},
                      {"scs_mp2_correlation_energy", r.correlation(calc.input.mp2_model.scs)},
                      {"wall_time_seconds", run.wall_seconds},
                      {"modelled_seconds", run.modelled() ? nlohmann::json(run.modelled_seconds()) : nlohmann::json(nullptr)},
                      {"peak_flops", run.modelled() ? nlohmann::json(run.peak_flops) : nlohmann::json(nullptr)},
                      {"native_pipeline", native_json(run)},
                      {"fallback_calls", run.log.fallback_calls()},
                      {"energy_from_gradient", run.energy_from_gradient},
                      {"blocking",
                       run.energy_from_gradient
                           ? nlohmann::json(nullptr)
                           : nlohmann::json{{"aux_block", r.plan.aux_block},
                                            {"occupied_block", r.plan.occupied_block},
                                            {"block_pairs", r.block_pairs},
                                            {"pair_imbalance_predicted", r.pair_imbalance},
                                            {"pairs_on_neither_holder", r.pairs_away},
                                            {"working_set_bytes", r.plan.peak_bytes}}},
                      {"ranks", run.energy_from_gradient ? nlohmann::json::array()
                                                         : rank_json(mp2_rank_phases(), r.ranks)},
                      {"kernels", kernels(run.log)}};

}

// extras.dfmp2.problem: what the calculation was, and for molecule input its SCF.
nlohmann::json problem_json(const Calculation& calc) {
  const Reference& f = calc.reference;
  nlohmann::json problem = {{"kind", f.kind},
                            {"description", f.description},
                            {"form", f.form == chem::ThreeIndexForm::ao ? "ao" : "mo"},
                            {"naux", f.naux},
                            {"nfrozen", f.nfrozen}};
  if (const chem::IntegralFile* file = f.integral_file()) {
    problem["path"] = file->path();
    problem["generator"] = f.metadata.generator;
    problem["integrity"] = {{"metadata_checksummed", file->metadata_checksummed()},
                            {"unchecked_datasets", file->unchecked_datasets()},
                            {"summary", integrity_summary(*file)}};
  }
  if (f.synthetic()) {
    const auto& shape = f.synthetic()->shape();
    problem["synthetic"] = {{"nbasis", shape.nbasis}, {"nocc", shape.nocc}, {"naux", shape.naux}, {"seed", shape.seed}};
  }
  if (f.molecule()) {
    const MoleculeRun& m = *f.molecule();
    problem["scf"] = {{"energy", m.scf.energy},
                      {"reference", linalg::name_in(chem::scf_reference_names(), m.scf.reference)},
                      {"multiplicity", calc.input.molecule->multiplicity},
                      {"s_squared", m.scf.s_squared},
                      {"iterations", m.scf.iterations},
                      {"precision", calc.input.scf.precision == chem::ScfPrecision::mixed ? "mixed" : "fp64"},
                      {"fp32_iterations", m.scf.fp32_iterations},
                      {"type", f.metadata.scf_type},
                      {"basis", m.basis.name},
                      {"aux_basis", m.aux_basis.name},
                      {"jk_basis", m.jk_basis.shells.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.jk_basis.name)},
                      {"backend", m.backend},
                      {"scf_seconds", m.scf_seconds},
                      {"mp2_integral_seconds", m.integral_seconds},
                      {"jk_storage", m.jk_basis.shells.empty() ? nlohmann::json(m.exact_plan.storage)
                                                               : nlohmann::json(chem::jk_storage_name(m.jk_plan.storage))},
                      {"exact_integrals", m.jk_basis.shells.empty() ? nlohmann::json(m.exact_plan.integrals)
                                                                    : nlohmann::json(nullptr)},
                      {"exact_cached_integrals", m.jk_basis.shells.empty()
                                                     ? nlohmann::json(m.exact_plan.cached_integrals)
                                                     : nlohmann::json(nullptr)},
                      {"saved_to", m.saved_to ? nlohmann::json(*m.saved_to) : nlohmann::json(nullptr)},
                      {"ranks", rank_json(linalg::names_of(chem::scf_phase_names()), m.ranks)},
                      {"kernels", kernels(m.log)}};
  }
  return problem;
}

// extras.dfmp2.memory_plan: the plan, each phase's measured peak, and the run's.
// extras.dfmp2.mpi.factorisations: which dense factorisations ran on the ranks' grid (README "MPI").
nlohmann::json factorisations_json(const Calculation& calc) {
  const Factorisations f = describe_factorisations(calc);
  nlohmann::json matrices = nlohmann::json::array();
  for (const GridMatrix& m : f.matrices)
    matrices.push_back({{"matrix", m.name}, {"order", m.order}, {"distributed", m.distributed}, {"how", m.how}});
  return {{"libraries", f.libraries}, {"grid", {f.grid_rows, f.grid_cols}}, {"min_order", f.min_order},
          {"matrices", matrices}};
}

nlohmann::json memory_plan_json(const MemoryPlan& plan) {
  nlohmann::json measured = nlohmann::json::array();
  for (const auto& [part, bytes] : plan.measured) measured.push_back({{"part", part}, {"peak_resident_bytes", bytes}});
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& ph : plan.phases) {
    phases.push_back({{"phase", phase_name(ph.phase)},
                      {"storage", ph.storage},
                      {"blocks", ph.blocks},
                      {"memory_bytes", ph.memory_bytes},
                      {"scratch_bytes", ph.scratch_bytes},
                      {"measured_peak_bytes", ph.measured_bytes > 0 ? nlohmann::json(ph.measured_bytes) : nlohmann::json(nullptr)},
                      {"reason", ph.reason}});
  }
  return {{"memory_bytes", plan.budget},
          {"baseline_bytes", plan.baseline},
          {"scratch_folder", plan.scratch_folder},
          {"planned_peak_bytes", plan.planned_peak()},
          {"peak_resident_bytes", plan.peak_resident},
          {"measured_peaks", measured},
          {"phases", phases},
          {"shared", plan.shared.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.shared)}};
}

}  // namespace

nlohmann::json results_json(const Calculation& calc) {
  const Reference& f = calc.reference;
  const auto& first = calc.runs.front();
  nlohmann::json j;
  j["schema_name"] = "qcschema_output";
  j["schema_version"] = 1;
  if (const auto& mol = f.metadata.molecule) {
    nlohmann::json m;
    m["schema_name"] = "qcschema_molecule";
    m["schema_version"] = 2;
    m["symbols"] = nlohmann::json::array();
    m["geometry"] = nlohmann::json::array();
    m["real"] = nlohmann::json::array();  // false: a ghost atom
    for (const auto& a : mol->atoms) {
      m["symbols"].push_back(chem::element_symbol(a.atomic_number));
      m["real"].push_back(!a.ghost);
      for (double x : {a.x, a.y, a.z}) m["geometry"].push_back(x * chem::kBohrPerAngstrom);
    }
    m["molecular_charge"] = mol->charge;
    m["molecular_multiplicity"] = mol->multiplicity;
    if (!mol->fragments.empty()) {  // QCSchema's fragments: each one's atom indices, charge and multiplicity
      m["fragments"] = nlohmann::json::array();
      m["fragment_charges"] = nlohmann::json::array();
      m["fragment_multiplicities"] = nlohmann::json::array();
      for (const auto& f : mol->fragments) {
        nlohmann::json atoms = nlohmann::json::array();
        for (std::size_t a = f.first; a < f.first + f.count; ++a) atoms.push_back(a);
        m["fragments"].push_back(atoms);
        m["fragment_charges"].push_back(f.charge);
        m["fragment_multiplicities"].push_back(f.multiplicity);
      }
    }
    j["molecule"] = m;
  }
  j["driver"] = linalg::name_in(driver_names(), calc.input.driver);
  j["model"] = {{"method", "mp2"}, {"basis", f.kind == "synthetic" ? std::string("synthetic") : f.metadata.basis}};
  j["keywords"] = {{"mp2_type", "df"},
                   {"reference", linalg::name_in(chem::scf_reference_names(), f.scf_reference)},
                   {"df_basis_mp2", f.metadata.aux_basis},
                   {"num_frozen_docc", calc.reference.nfrozen}};
  j["properties"] = properties(calc, first);
  j["extras"]["qcvars"] = qcvars(calc, first);
  j["return_result"] = j["properties"]["return_energy"];
  j["success"] = true;
  j["provenance"] = {{"creator", "dfmp2"}, {"version", DFMP2_VERSION}, {"routine", "dfmp2"}};

  nlohmann::json backends = nlohmann::json::array();
  for (const auto& run : calc.runs) backends.push_back(backend_json(calc, run));
  j["extras"]["dfmp2"] = {{"input", calc.input.as_read},
                          {"problem", problem_json(calc)},
                          {"memory_plan", memory_plan_json(calc.memory)},
                          {"threads", calc.input.threads},
                          {"mpi",
                           {{"ranks", calc.ranks},
                            {"library", calc.mpi},
                            {"peak_resident_bytes", calc.rank_peak_resident},
                            {"factorisations", factorisations_json(calc)}}},
                          {"backends", backends},
                          {"cost", cost_json(calc)}};
  if (calc.input.interaction) j["extras"]["dfmp2"]["interaction"] = interaction_json(calc);
  if (calc.gradient && !calc.properties) add_gradient(calc, j);  // properties: the gradient stage's densities only
  if (calc.properties) add_properties(calc, j);
  if (calc.hessian) add_hessian(calc, j);
  if (calc.cbs) add_cbs(calc, j);
  if (!calc.input.as_read.contains("backends")) {  // the default CPU backend, and why it was chosen
    const devices::Calibration& c = devices::machine_calibration();
    nlohmann::json rates = nlohmann::json::array();
    for (const auto& r : c.rates) rates.push_back({{"backend", r.backend}, {"gflops", r.gflops}, {"seconds", r.seconds}});
    j["extras"]["dfmp2"]["default_backend"] = {{"name", devices::default_backend_choice().name},
                                               {"reason", devices::default_backend_choice().reason},
                                               {"calibration", {{"rates", rates},
                                                                {"cpu", c.cpu},
                                                                {"cached", c.cached},
                                                                {"file", c.file}}}};
  }
  return j;
}

void check_output_path(const std::string& path, const std::string& key) {
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (p.filename().empty()) throw OutputError(fmt::format("{}: cannot write '{}': it names a folder, not a file", key, path));
  if (!fs::is_directory(dir, ec)) {
    throw OutputError(fmt::format("{}: cannot write '{}': folder '{}' does not exist", key, path, dir.string()));
  }
  const auto status = fs::status(p, ec);
  if (fs::is_directory(status)) throw OutputError(fmt::format("{}: cannot write '{}': it is a folder", key, path));
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    throw OutputError(fmt::format("{}: cannot write '{}': it exists and is not a regular file", key, path));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw OutputError(fmt::format("{}: cannot write '{}': folder '{}' is not writable", key, path, dir.string()));
  }
}

void check_output_paths(const Input& input, const std::optional<std::string>& output) {
  // Every file the run will write, with its key, and every file it reads that must not be overwritten.
  std::vector<std::pair<std::string, std::string>> writes;
  if (output) writes.emplace_back("output", *output);
  if (input.save_integrals) writes.emplace_back("save_integrals", *input.save_integrals);
  if (input.properties.molden) writes.emplace_back("properties.molden", *input.properties.molden);
  if (input.properties.scf_molden) writes.emplace_back("properties.scf_molden", *input.properties.scf_molden);
  for (const auto& [key, path] : writes) check_output_path(path, key);
  // A scratch folder the input names is checked at once, whether or not the plan will need it; the default one
  // ($TMPDIR or /tmp) only when a phase is planned on scratch.
  if (input.as_read.contains("scratch")) chem::check_scratch_folder(input.scratch);
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::equivalent(a, b, ec)) return true;
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  for (std::size_t a = 0; a < writes.size(); ++a)
    for (std::size_t b = a + 1; b < writes.size(); ++b)
      if (same(writes[a].second, writes[b].second)) {
        throw OutputError(fmt::format("{}: '{}' is also the {} file; give them different names", writes[a].first,
                                      writes[a].second, writes[b].first));
      }
  std::vector<std::pair<std::string, std::string>> reads = {{"the input file", input.path}};
  if (!input.integrals.empty()) reads.emplace_back("the integral file", input.integrals);
  if (!input.molecule_file.empty()) reads.emplace_back("the molecule file", input.molecule_file);
  if (!input.properties.esp_points_file.empty()) reads.emplace_back("the esp_points file", input.properties.esp_points_file);
  for (const auto& [what, basis] : {std::pair{"the basis set file", &input.basis}, {"the fitting basis file", &input.aux_basis},
                                    {"the J/K fitting basis file", &input.jk_basis}})
    if (chem::is_basis_file_path(*basis)) reads.emplace_back(what, *basis);
  for (const auto& [key, path] : writes) {
    for (const auto& [what, read] : reads) {
      if (same(path, read)) {
        throw OutputError(fmt::format("{}: '{}' is {}; writing it would overwrite what the run reads", key, path, what));
      }
    }
  }
}

void write_atomically(const std::string& path, const std::string& text, const std::string& key) {
  chem::TemporaryFile tmp(path);
  {
    std::ofstream out(tmp.path(), std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw OutputError(fmt::format("{}: cannot write '{}': {}", key, path, std::strerror(errno)));
  }
  if (const std::string why = tmp.commit(); !why.empty()) {
    throw OutputError(fmt::format("{}: cannot write '{}': {}", key, path, why));
  }
}

}  // namespace dfmp2::app
