#include "app/report.hpp"
#include "app/yaml_file.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include "devices/registry.hpp"
#include "linalg/bytes.hpp"

#include <algorithm>
#include <cmath>

namespace dfmp2::app {

std::string one_line(std::string_view message) {
  constexpr std::size_t kMaxLength = 2000;
  std::string out;
  while (!message.empty() && out.size() <= kMaxLength) {
    const std::size_t bad = dfmp2::app::first_invalid_utf8(message);
    const std::string_view good = message.substr(0, bad);
    for (std::size_t i = 0; i < good.size() && out.size() <= kMaxLength; ++i) {
      const char c = good[i];
      const auto u = static_cast<unsigned char>(c);
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
      else out += c;
    }
    if (bad == std::string_view::npos) break;
    out += fmt::format("\\x{:02x}", static_cast<unsigned char>(message[bad]));
    message.remove_prefix(bad + 1);
  }
  if (out.size() > kMaxLength) {
    // Cut at a character boundary, never inside a UTF-8 sequence.
    std::size_t cut = kMaxLength;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
    out.resize(cut);
    out += " [...]";
  }
  return out;
}


namespace {

std::string line(const char* label, double value, const char* unit) {
  return fmt::format("\t {:<26}= {:24.16f} [{}]\n", label, value, unit);
}
std::string missing(const char* label) { return fmt::format("\t {:<26}= {:>24} [Eh]\n", label, "(no SCF energy in input)"); }
}  // namespace

std::string integrity_summary(const chem::IntegralFile& file) {
  const auto& unchecked = file.unchecked_datasets();
  if (file.metadata_checksummed() && unchecked.empty()) {
    return "checksums verified as read (file metadata, and every dataset's data)";
  }
  if (!file.metadata_checksummed()) {
    return "no checksums (HDF5 file format older than 1.8, as older writers make it): damage to this file cannot be "
           "detected beyond the range checks";
  }
  return fmt::format("no checksums on dataset(s) {} (contiguous, without Fletcher32, or indexed by an unchecksummed B-tree as in the HDF5 1.8 format): damage to them "
                     "cannot be detected beyond the range checks",
                     fmt::join(unchecked, ", "));
}

std::string format_header(const Calculation& calc) {
  const Reference& p = calc.reference;
  std::string out = fmt::format("dfmp2 {}: DF-MP2 for {}\n", DFMP2_VERSION, calc.input.path);
  out += fmt::format("  {:<12} {}\n", p.kind, p.description);
  if (p.integral_file()) out += fmt::format("  integrity    {}\n", integrity_summary(*p.integral_file()));
  out += fmt::format("  orbitals     nbf {}  nmo {}  nocc {}  frozen {}  active {}  nvir {}  naux {}\n",
                     p.nbf > 0 ? fmt::format("{}", p.nbf) : std::string("-"), p.nmo, p.nocc, p.nfrozen,
                     p.nocc - p.nfrozen, p.nmo - p.nocc, p.naux);
  if (p.open_shell()) {
    out += fmt::format("  reference    {}: alpha as above; beta nocc {}  active {}  nvir {}\n",
                       chem::reference_label(p.scf_reference), p.nocc_beta, p.nocc_beta - p.nfrozen,
                       p.nmo - p.nocc_beta);
  }
  // What ran (backend-major, as the runs were made): the backends, their precisions and the metric method.
  std::vector<std::string> backends;
  std::vector<std::vector<std::string>> precisions_of;
  for (const auto& run : calc.runs) {
    if (backends.empty() || backends.back() != run.backend) backends.push_back(run.backend), precisions_of.emplace_back();
    precisions_of.back().push_back(chem::precision_name(run.precision));
  }
  std::vector<std::string> precisions;
  if (calc.input.backend_precisions.empty()) {  // one list for every backend, as the input gave it
    if (!precisions_of.empty()) precisions = precisions_of.front();
  } else {
    for (std::size_t b = 0; b < backends.size(); ++b)
      precisions.push_back(fmt::format("{}: {}", backends[b], fmt::join(precisions_of[b], "+")));
  }
  const chem::MetricMethod metric = calc.runs.empty() ? calc.input.metric : calc.runs.front().result.metric;
  out += fmt::format("  run          backends {}  precision {}  metric {}  threads {}  memory {}{}\n",
                     fmt::join(backends, ", "), fmt::join(precisions, ", "), chem::metric_name(metric),
                     calc.input.threads, calc.input.memory_text, calc.ranks > 1 ? " (each rank)" : "");
  out += fmt::format("  ranks        {} ({}){}\n", calc.ranks, calc.mpi,
                     calc.ranks > 1 ? "; threads, memory and scratch are each rank's; the tables are rank 0's, with a "
                                      "per-rank summary after each"
                                    : "");
  if (calc.ranks > 1) {
    const Factorisations f = describe_factorisations(calc);
    std::vector<std::string> each;
    for (const GridMatrix& m : f.matrices)
      each.push_back(fmt::format("{} ({}): {}{}", m.name, m.order, m.distributed ? "distributed, " : "replicated, ", m.how));
    out += fmt::format("  dense        {}; {}\n",
                       f.libraries.empty() ? std::string("no ScaLAPACK in this build")
                                           : fmt::format("{} on a {} x {} grid from order {}", f.libraries, f.grid_rows,
                                                         f.grid_cols, f.min_order),
                       fmt::join(each, "; "));
  }
  std::vector<std::string> described;
  for (const auto& run : calc.runs) {
    if (run.details.empty() || std::find(described.begin(), described.end(), run.backend) != described.end()) continue;
    described.push_back(run.backend);
    out += fmt::format("  backend      {}: {}\n", run.backend, run.details);
  }
  // An input without `backends` runs on the default CPU backend: say which and why (devices/registry.hpp).
  if (!calc.input.as_read.contains("backends")) {
    out += fmt::format("  default      {} ({})\n", devices::default_backend_choice().name,
                       devices::default_backend_choice().reason);
  }
  const MemoryPlan& plan = calc.memory;
  out += fmt::format("  memory plan  memory {}, of which {} in use at the start or allowed for libraries; planned peak "
                     "{}, measured peak resident {}; scratch in {}\n",
                     linalg::format_bytes(plan.budget), linalg::format_bytes(plan.baseline),
                     linalg::format_bytes(plan.planned_peak()),
                     linalg::format_bytes(plan.peak_resident) +
                         (calc.rank_peak_resident.size() > 1
                              ? fmt::format(" (rank 0; largest of the ranks {})",
                                            linalg::format_bytes(*std::max_element(calc.rank_peak_resident.begin(),
                                                                                   calc.rank_peak_resident.end())))
                              : std::string()),
                     plan.scratch_folder);
  if (!plan.measured.empty()) {
    std::vector<std::string> parts;
    for (const auto& [part, bytes] : plan.measured) parts.push_back(fmt::format("{} {}", part, linalg::format_bytes(bytes)));
    out += fmt::format("               measured peak resident: {}\n", fmt::join(parts, "; "));
  }
  for (const auto& ph : plan.phases) {
    out += fmt::format("               {:<18} {:<9} {:<30} holds {:>10}{}{}{}\n", phase_name(ph.phase), ph.storage, ph.blocks,
                       linalg::format_bytes(ph.memory_bytes),
                       ph.measured_bytes > 0 ? "  measured peak " + linalg::format_bytes(ph.measured_bytes) : std::string(),
                       ph.scratch_bytes > 0 ? "  scratch " + linalg::format_bytes(ph.scratch_bytes) : std::string(),
                       ph.reason.empty() ? std::string() : "  (" + ph.reason + ")");
  }
  if (!plan.shared.empty()) out += fmt::format("               shared: {}\n", plan.shared);
  // The first DF-MP2 run's blocking (the gradient's energy has none of its own: the gradient's row gives its blocks).
  const auto run = std::find_if(calc.runs.begin(), calc.runs.end(), [](const BackendRun& r) { return !r.energy_from_gradient; });
  if (run != calc.runs.end()) {
    const auto& r = run->result;
    out += fmt::format("  blocking     aux block {}  occupied block {}  block pairs {}  working set {:.3f} GiB\n",
                       r.plan.aux_block, r.plan.occupied_block, r.block_pairs, r.plan.peak_bytes / double(1 << 30));
  }
  return out;
}

namespace {
bool below_fp32(chem::Precision p) { return p == chem::Precision::bf16 || p == chem::Precision::bf16x3; }
}  // namespace

std::string format_energies(const Calculation& calc, const BackendRun& run) {
  const auto& r = run.result;
  const auto scf = calc.reference.scf_energy;
  const std::string rule = "\t-----------------------------------------------------------\n";
  std::string out = fmt::format("\n  ==> DF-MP2 on backend {}, precision {} <==\n\n", run.backend,
                                chem::precision_name(run.precision));
  if (run.energy_from_gradient) {
    out += "  computed once, by the gradient's amplitude pass on this backend (the energy it differentiates): no DF-MP2\n"
           "  run of its own; its time and kernels are the gradient's (==> DF-MP2 gradient <==)\n\n";
  }
  const auto& m = r.metric_report;
  if (r.metric == chem::MetricMethod::eigh) {
    out += fmt::format("  metric eigh: {} of {} eigenvalues below {:.1e} x the largest ({:.3e}) dropped; smallest kept "
                       "{:.3e}\n\n",
                       m.dropped, r.naux, r.eigh_threshold, m.largest, m.smallest_kept);
  } else if (r.metric == chem::MetricMethod::newton_schulz) {
    out += fmt::format("  metric newton-schulz: converged in {} iterations, residual {:.3e}\n\n", m.iterations,
                       m.residual);
  }
  if (r.screening.enabled) {
    const auto& sc = r.screening;
    const long long skipped = sc.blocks_total - sc.blocks_kept;
    out += fmt::format("  screening: threshold {:.1e}, tiles {}x{}: kept {} of {}, skipped {} ({:.1f}%)", sc.threshold,
                       sc.block, sc.block, sc.blocks_kept, sc.blocks_total, skipped,
                       sc.blocks_total > 0 ? 100.0 * double(skipped) / double(sc.blocks_total) : 0.0);
    if (run.unscreened_correlation) {
      out += fmt::format("; energy change vs unscreened {:.3e} Eh", r.correlation() - *run.unscreened_correlation);
    }
    out += "\n\n";
  }
  if (below_fp32(run.precision)) {
    std::vector<std::string> steps;
    for (const auto& step : chem::matmul_steps())
      steps.push_back(fmt::format("{} {}", step, linalg::matmul_mode_name(r.step_modes.at(step))));
    out += fmt::format("  matmul operands: {}\n", fmt::join(steps, ", "));
    if (const BackendRun* ref = accuracy_reference(calc, run)) {
      const double err = r.correlation() - ref->result.correlation();
      out += fmt::format("  error of this precision: {:.3e} Eh in the correlation energy ({:.2e} relative) against {}\n",
                         err, std::abs(err) / std::max(1e-300, std::abs(ref->result.correlation())), run_label(*ref));
    } else {
      out += fmt::format("  error of this precision: unknown (no fp64 or fp32 run to compare with; add one to "
                         "'precision')\n");
    }
    out += "\n";
  }
  out += rule;
  out += "\t ==================> DF-MP2 Energies <==================== \n";
  out += rule;
  out += scf ? line("Reference Energy", *scf, "Eh") : missing("Reference Energy");
  out += line("Singles Energy", r.singles, "Eh");
  out += line("Same-Spin Energy", r.same_spin, "Eh");
  out += line("Opposite-Spin Energy", r.opposite_spin, "Eh");
  out += line("Correlation Energy", r.correlation(), "Eh");
  out += scf ? line("Total Energy", *scf + r.correlation(), "Eh") : missing("Total Energy");
  out += rule;
  out += "\t ================> DF-SCS-MP2 Energies <================== \n";
  out += rule;
  const chem::Mp2Model& model = calc.input.mp2_model;
  out += line("SCS Same-Spin Scale", model.scs.same_spin, "-");
  out += line("SCS Opposite-Spin Scale", model.scs.opposite_spin, "-");
  out += line("SCS Same-Spin Energy", model.scs.same_spin * r.same_spin, "Eh");
  out += line("SCS Opposite-Spin Energy", model.scs.opposite_spin * r.opposite_spin, "Eh");
  out += line("SCS Correlation Energy", r.correlation(model.scs), "Eh");
  out += scf ? line("SCS Total Energy", *scf + r.correlation(model.scs), "Eh") : missing("SCS Total Energy");
  out += rule;
  if (model.method == chem::Mp2Method::sos_mp2) {  // as Psi4's dfocc prints SOS-MP2
    out += "\t ================> DF-SOS-MP2 Energies <================== \n";
    out += rule;
    out += line("SOS Opposite-Spin Scale", model.sos, "-");
    out += line("SOS Correlation Energy", r.correlation(model.scales()), "Eh");
    out += scf ? line("SOS Total Energy", *scf + r.correlation(model.scales()), "Eh") : missing("SOS Total Energy");
    out += rule;
  }
  if (model.method != chem::Mp2Method::mp2) {
    out += fmt::format("  method {}: the energy returned (and differentiated) is the {} total energy\n",
                       linalg::name_in(chem::mp2_method_names(), model.method), model.label());
  }
  if (r.unrestricted) {
    out += fmt::format("  same-spin energy by spin: alpha-alpha {:.16f} Eh, beta-beta {:.16f} Eh{}\n", r.same_spin_alpha,
                       r.same_spin_beta, r.singles != 0 ? "; singles from the semicanonical ROHF orbitals" : "");
  }
  return out;
}

std::string format_kernel_table(const BackendRun& run) {
  std::string out = format_kernel_table(fmt::format("Kernel timings on backend {}", run.backend), run.log,
                                        run.wall_seconds);
  if (run.modelled()) out += format_modelled_table(run);
  const long fallbacks = run.log.fallback_calls();
  if (fallbacks > 0) {
    out += fmt::format("  host fallback: {} call{} ran on the host instead of {} (device.host_fallback: true)\n",
                       fallbacks, fallbacks == 1 ? "" : "s", run.backend);
  }
  return out;
}

std::string format_kernel_table(const std::string& title, const linalg::KernelLog& log, double wall_seconds) {
  std::size_t wb = 9;  // backend column: fallbacks are named "<host> (fallback from <device>)"
  for (const auto& k : log.records()) wb = std::max(wb, k.backend.size());
  std::string out = fmt::format("\n  {} (wall {:.3f} s)\n", title, wall_seconds);
  out += fmt::format("  {:<14} {:<13} {:<{}} {:<5} {:>7} {:>11} {:>10} {:>7}\n", "step", "kernel", "backend", wb,
                     "dtype", "calls", "seconds", "GFLOP/s", "share");
  double accounted = 0;
  for (const auto& k : log.records()) {
    accounted += k.seconds;
    const std::string rate = k.flops > 0 && k.seconds > 0 ? fmt::format("{:.2f}", k.flops / k.seconds * 1e-9) : "-";
    out += fmt::format("  {:<14} {:<13} {:<{}} {:<5} {:>7} {:>11.6f} {:>10} {:>6.1f}%\n", k.step, k.kernel, k.backend,
                       wb, k.dtype.empty() ? "-" : k.dtype, k.calls, k.seconds, rate,
                       wall_seconds > 0 ? 100.0 * k.seconds / wall_seconds : 0.0);
  }
  const double other = std::max(0.0, wall_seconds - accounted);
  out += fmt::format("  {:<14} {:<13} {:<{}} {:<5} {:>7} {:>11.6f} {:>10} {:>6.1f}%\n", "other", "(untimed)", "host",
                     wb, "-", "-", other, "-", wall_seconds > 0 ? 100.0 * other / wall_seconds : 0.0);
  return out;
}

std::string format_modelled_table(const BackendRun& run) {
  std::string out = fmt::format(
      "\n  Modelled device time on {} (a prediction of the device model; 'host s' is the measured time of the "
      "emulation here)\n",
      run.backend);
  out += fmt::format("  {:<14} {:<13} {:>6} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6}\n",
                     "step", "kernel", "calls", "launches", "host s", "model s", "dispatch", "transfer", "dma",
                     "compute", "host", "compile", "TFLOPS", "peak");
  const linalg::ModelledTime sum = run.log.modelled_sum();
  for (const auto& k : run.log.records()) {
    if (!k.modelled) continue;
    const double tflops = k.model.total > 0 ? k.flops / k.model.total * 1e-12 : 0.0;
    out += fmt::format(
        "  {:<14} {:<13} {:>6} {:>8} {:>10.4f} {:>10.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} "
        "{:>8.4g} {:>5.1f}%\n",
        k.step, k.kernel, k.calls, k.model.launches, k.seconds, k.model.total, k.model.dispatch, k.model.transfer,
        k.model.dma, k.model.compute, k.model.host, k.model.compile, tflops,
        run.peak_flops > 0 ? 100.0 * tflops * 1e12 / run.peak_flops : 0.0);
  }
  out += fmt::format("  {:<14} {:<13} {:>6} {:>8} {:>10} {:>10.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f}\n",
                     "total", "(kernels)", "", sum.launches, "", sum.total, sum.dispatch, sum.transfer, sum.dma,
                     sum.compute, sum.host, sum.compile);
  out += fmt::format("  compiles {}  cache loads {}  peak {:.1f} TFLOPS; run on the device: {:.4f} s (kernels as "
                     "modelled, host steps as measured)\n",
                     sum.compiles, sum.cache_loads, run.peak_flops * 1e-12, run.modelled_seconds());
  out += format_native_table(run);
  return out;
}

double library_step_seconds(const BackendRun& run, const std::string& step) {
  return run.log.modelled_sum(step).total;
}

std::string format_native_table(const BackendRun& run) {
  if (!run.native) {
    return run.native_absent.empty() ? std::string()
                                     : fmt::format("  device-native prediction: none, {}\n", run.native_absent);
  }
  const auto& native = *run.native;
  std::string out = fmt::format(
      "\n  Two predictions on {}: the library's calls as above, and device-native (tensors resident in HBM{}, one "
      "fused kernel per step launched once per block; README \"Two predictions\")\n",
      run.backend, native.resident ? "" : fmt::format(": L^-1 and B need {}, more than HBM holds, so B streams through "
                                                      "the host link", linalg::format_bytes(native.resident_bytes)));
  out += fmt::format("  {:<12} {:<6} {:>10} {:>10} {:<14} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
                     "step", "mode", "library s", "native s", "bottleneck", "peak", "launches", "tensor", "vector",
                     "dma", "hbm", "link", "host", "launch");
  double library = 0;
  for (const auto& s : native.steps) {
    const double lib = library_step_seconds(run, s.step);
    library += lib;
    out += fmt::format(
        "  {:<12} {:<6} {:>10.4f} {:>10.4f} {:<14} {:>5.1f}% {:>8} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} "
        "{:>9.4f} {:>9.4f}\n",
        s.step, linalg::matmul_mode_name(s.mode), lib, s.seconds, s.bottleneck, 100 * s.peak_share, s.launches, s.tensor,
        s.vector, s.dma, s.hbm, s.link, s.host, s.launch);
  }
  out += fmt::format("  {:<12} {:<6} {:>10.4f} {:>10.4f}   (kernels only: the host steps of the run are not in either)\n",
                     "total", "", library, native.seconds());
  out += "  native: each step as long as its busiest engine or link (they run concurrently) plus host work and launch\n"
         "  submissions; 'peak': flops over the Tensor Engine's peak in the step's mode. No published measurement\n"
         "  checks it (bench/README \"Two predictions\").\n";
  return out;
}

const BackendRun* fp64_run(const Calculation& calc, const std::string& backend) {
  for (const auto& r : calc.runs) {
    if (r.backend == backend && r.precision == chem::Precision::fp64) return &r;
  }
  return nullptr;
}

const std::vector<std::string>& mp2_rank_phases() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& name : chem::matmul_steps()) out.push_back(name);
    return out;
  }();
  return names;
}

std::string format_rank_table(const std::string& title, const std::vector<std::string>& phases,
                              const std::vector<std::vector<linalg::PhaseStats>>& ranks) {
  if (ranks.size() < 2) return "";
  std::string out = fmt::format(
      "\n  {} ({} ranks; comm = seconds in communication, waiting for other ranks included; busy = the rest; imbalance = max / mean busy)\n", title,
      ranks.size());
  out += fmt::format("  {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "phase", "wall s",
                     "busy min", "busy mean", "busy max", "imbalance", "GFLOP", "sent MiB", "recv MiB", "messages",
                     "comm s");
  for (std::size_t p = 0; p < phases.size(); ++p) {
    double wall = 0, lo = 1e300, hi = 0, sum = 0, flops = 0, sent = 0, received = 0, messages = 0, waited = 0;
    for (const auto& rank : ranks) {
      const linalg::PhaseStats& st = rank[p];
      const double busy = std::max(0.0, st.seconds - st.wait_seconds);
      wall = std::max(wall, st.seconds);
      lo = std::min(lo, busy);
      hi = std::max(hi, busy);
      sum += busy;
      flops += st.flops;
      sent = std::max(sent, st.bytes_sent);
      received = std::max(received, st.bytes_received);
      messages += st.messages;
      waited = std::max(waited, st.wait_seconds);
    }
    const double mean = sum / double(ranks.size());
    out += fmt::format("  {:<14} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.2f} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.0f} "
                       "{:>9.3f}\n",
                       phases[p], wall, lo, mean, hi, mean > 0 ? hi / mean : 1.0, flops / 1e9, sent / 1048576.0,
                       received / 1048576.0, messages, waited);
  }
  out += "  (wall, sent, received and comm: the largest over the ranks; GFLOP and messages: all ranks; the results "
         "file has every rank's)\n";
  return out;
}

std::string format_scf(const Calculation& calc) {
  const MoleculeRun& m = *calc.reference.molecule();
  std::string out = fmt::format("\n  ==> {} <==\n\n  basis {} ({} functions), fitting {} ({}){}\n",
                                chem::reference_label(m.scf.reference), m.basis.name,
                                m.basis.nbf(), m.aux_basis.name, m.aux_basis.nbf(),
                                m.jk_basis.shells.empty() ? std::string()
                                                          : fmt::format(", JK fitting {} ({})", m.jk_basis.name,
                                                                        m.jk_basis.nbf()));
  out += fmt::format("  SCF energy {:.12f} Eh after {} iterations{}; nuclear repulsion {:.12f} Eh\n", m.scf.energy,
                     m.scf.iterations,
                     m.scf.fp32_iterations > 0 ? fmt::format(" ({} of them with an fp32 K: scf.precision mixed)",
                                                            m.scf.fp32_iterations)
                                               : std::string(),
                     m.scf.nuclear_repulsion);
  if (m.scf.open_shell()) {
    out += fmt::format("  multiplicity {}: {} alpha and {} beta electrons; <S^2> = {:.10f} (exact {:.4f})\n",
                       calc.input.molecule->multiplicity, m.scf.nocc, m.scf.nocc_beta, m.scf.s_squared,
                       0.25 * double(calc.input.molecule->multiplicity * calc.input.molecule->multiplicity - 1));
  }
  if (const std::array<double, 3>& f = calc.input.scf.electric_field; f != std::array<double, 3>{}) {
    out += fmt::format("  in a uniform electric field ({}, {}, {}) a.u. (perturb_dipole): -F.r in the one-electron "
                       "Hamiltonian, F.sum Z R in the nuclear repulsion\n", f[0], f[1], f[2]);
  }
  if (const auto& charges = calc.input.scf.external_charges; !charges.empty()) {
    double total = 0;
    for (const auto& [q, r] : charges) total += q;
    out += fmt::format("  among {} point charges (external_charges, total {:.6f} e): their potential in the one-electron "
                       "Hamiltonian, their interaction with the nuclei in the nuclear repulsion\n", charges.size(), total);
  }
  if (m.saved_to) out += fmt::format("  orbitals and integrals saved to {}\n", *m.saved_to);
  out += format_kernel_table(fmt::format("Integral and SCF timings on backend {}{}", m.backend,
                                         calc.ranks > 1 ? " (rank 0)" : ""),
                             m.log, m.scf_seconds + m.integral_seconds);
  out += format_rank_table("SCF per rank (the J/K set-up and builds are shared; 'SCF other', the Fock matrix and its "
                           "diagonalisation, is done by every rank alike)",
                           linalg::names_of(chem::scf_phase_names()), m.ranks);
  return out;
}

// The fp64 run a run's energy is compared with: the same backend's, else the first fp64 run of any backend.
std::optional<std::size_t> fp64_reference(const std::vector<RunKey>& runs, std::size_t run) {
  auto first = [&](auto&& pick) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (pick(runs[i])) return i;
    return std::nullopt;
  };
  if (auto same = first([&](const RunKey& r) {
        return r.backend == runs[run].backend && r.precision == chem::Precision::fp64;
      }))
    return same;
  return first([](const RunKey& r) { return r.precision == chem::Precision::fp64; });
}

std::optional<std::size_t> accuracy_reference(const std::vector<RunKey>& runs, std::size_t run) {
  const RunKey& me = runs[run];
  if (me.precision == chem::Precision::fp64) return std::nullopt;  // fp64 is the reference; runs differ in "diff first"
  if (auto r = fp64_reference(runs, run)) return r;
  if (!below_fp32(me.precision)) return std::nullopt;
  for (const bool same_backend : {true, false})
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (runs[i].precision == chem::Precision::fp32 && (!same_backend || runs[i].backend == me.backend)) return i;
  return std::nullopt;
}

namespace {
// The runs of a calculation as the rule sees them, and the index of `run` among them.
std::vector<RunKey> keys_of(const Calculation& calc) {
  std::vector<RunKey> keys;
  for (const auto& r : calc.runs) keys.push_back({r.backend, r.precision});
  return keys;
}
std::size_t index_of(const Calculation& calc, const BackendRun& run) { return std::size_t(&run - calc.runs.data()); }
}  // namespace

const BackendRun* fp64_reference(const Calculation& calc, const BackendRun& run) {
  const auto i = fp64_reference(keys_of(calc), index_of(calc, run));
  return i ? &calc.runs[*i] : nullptr;
}

const BackendRun* accuracy_reference(const Calculation& calc, const BackendRun& run) {
  const auto i = accuracy_reference(keys_of(calc), index_of(calc, run));
  return i ? &calc.runs[*i] : nullptr;
}

std::string run_label(const BackendRun& run) {
  return fmt::format("{} {}", run.backend, chem::precision_name(run.precision));
}

std::string format_comparison(const Calculation& calc) {
  std::string out = "\n  ==> Backend comparison <==\n\n";
  out += fmt::format("  {:<10} {:<9} {:>24} {:>16} {:>16} {:<16} {:>12} {:>13}\n", "backend", "precision",
                     "correlation [Eh]", "diff first [Eh]", "error [Eh]", "against", "wall [s]", "modelled [s]");
  const double first = calc.runs.front().result.correlation();
  for (const auto& run : calc.runs) {
    const BackendRun* reference = accuracy_reference(calc, run);
    out += fmt::format("  {:<10} {:<9} {:>24.16f} {:>16.3e} {:>16} {:<16} {:>12.4f} {:>13}\n", run.backend,
                       chem::precision_name(run.precision), run.result.correlation(),
                       run.result.correlation() - first,
                       reference ? fmt::format("{:.3e}", run.result.correlation() - reference->result.correlation())
                                 : std::string("-"),
                       reference ? run_label(*reference) : std::string("-"), run.wall_seconds,
                       run.modelled() ? fmt::format("{:.4f}", run.modelled_seconds()) : "-");
  }
  out += "  error: the correlation energy minus that of the run named under 'against': the same backend's fp64 run,\n"
         "  else the first fp64 run; for bf16 and bf16x3 without any fp64 run, the fp32 run. modelled: the device\n"
         "  model's prediction for device backends (wall: the emulation's time on this machine)\n";
  for (const auto& run : calc.runs)
    if (run.energy_from_gradient)
      out += fmt::format("  {}: the energy of the gradient's amplitude pass; wall is the gradient step's\n", run_label(run));
  return out;
}

std::string format_interaction(const Calculation& calc) {
  if (!calc.input.interaction || calc.runs.empty()) return {};
  const chem::Molecule& mol = *calc.input.molecule;
  std::string out = "\n  ==> Interaction energy <==\n\n";
  for (std::size_t k = 0; k < mol.fragments.size(); ++k) {
    const chem::Fragment& f = mol.fragments[k];
    const std::string filled = !f.given_charge && !f.given_multiplicity ? " (neither given: completed as Psi4 does)"
                               : !f.given_charge                         ? " (charge not given: completed as Psi4 does)"
                               : !f.given_multiplicity ? " (multiplicity not given: completed as Psi4 does)"
                                                       : "";
    out += fmt::format("  fragment {}: atoms {}-{}, charge {}, multiplicity {}{}\n", k + 1, f.first + 1,
                       f.first + f.count, f.charge, f.multiplicity, filled);
  }
  // Every calculation's energies, of the first run (backend and precision).
  const BackendRun& first = calc.runs.front();
  out += fmt::format("\n  {:<40} {:>5} {:>22} {:>22}   ({})\n", "calculation", "nbf", "SCF [Eh]", "MP2 total [Eh]",
                     run_label(first));
  for (const InteractionPart& p : interaction_parts(calc, 0)) {
    const std::string name = p.fragment == 0 ? p.name
                             : p.own_basis  ? p.name + " in its own basis (NOCP)"
                                            : p.name + " in the complex's basis (CP)";
    out += fmt::format("  {:<40} {:>5} {:>22.12f} {:>22.12f}\n", name, p.nbf, p.scf->energy, p.total());
  }
  if (!calc.reference.ghosted.empty()) {
    out += fmt::format("\n  shared by the complex and the {} fragments in its basis: the SCF's J/K (its three-index "
                       "integrals and fitting, computed once), and one DF-MP2 run per backend and precision (the "
                       "metric factored once, each (P|mn) block read once for {} sets of orbitals)\n",
                       calc.reference.ghosted.size(), calc.reference.mp2_spaces().size());
  }
  for (std::size_t run = 0; run < calc.runs.size(); ++run) {
    out += fmt::format("\n  {:<6} {:<34} {:>22} {:>16}   ({})\n", "scheme", "interaction energy", "[Eh]",
                       "[kcal/mol]", run_label(calc.runs[run]));
    for (const InteractionEnergy& e : interaction_energies(calc, run)) {
      auto row = [&](const std::string& what, double value) {
        out += fmt::format("  {:<6} {:<34} {:>22.12f} {:>16.8f}\n", e.scheme, what, value, value * kHartreeToKcalMol);
      };
      row("SCF", e.scf);
      if (e.singles != 0) row("MP2 singles", e.singles);
      row("MP2 opposite-spin", e.opposite_spin);
      row("MP2 same-spin", e.same_spin);
      row("MP2 correlation", e.correlation);
      row("MP2 total", e.mp2_total());
      row("SCS-MP2 correlation", e.correlation_with(calc.input.mp2_model.scs));
      row("SCS-MP2 total", e.total_with(calc.input.mp2_model.scs));
      if (calc.input.mp2_model.method == chem::Mp2Method::sos_mp2)
        row("SOS-MP2 total", e.total_with(calc.input.mp2_model.scales()));
    }
  }
  return out;
}

}  // namespace dfmp2::app
