#include "app/report.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace dfmp2::app {

namespace {
constexpr double kSameSpinScale = 1.0 / 3.0;
constexpr double kOppositeSpinScale = 6.0 / 5.0;

std::string line(const char* label, double value, const char* unit) {
  return fmt::format("\t {:<26}= {:24.16f} [{}]\n", label, value, unit);
}
std::string missing(const char* label) { return fmt::format("\t {:<26}= {:>24} [Eh]\n", label, "(no SCF energy in input)"); }
}  // namespace

std::string format_header(const Calculation& calc) {
  const auto& f = *calc.integrals;
  const auto& md = f.metadata();
  std::string out = fmt::format("dfmp2 {}: DF-MP2 for {}\n", DFMP2_VERSION, calc.input.path);
  out += fmt::format("  integrals    {} ({} form", f.path(), f.form() == chem::ThreeIndexForm::ao ? "AO" : "MO");
  if (!md.basis.empty()) out += fmt::format("; {} / {}", md.basis, md.aux_basis);
  if (!md.generator.empty()) out += fmt::format("; from {}", md.generator);
  out += ")\n";
  out += fmt::format("  orbitals     nbf {}  nmo {}  nocc {}  frozen {}  active {}  nvir {}  naux {}\n",
                     f.form() == chem::ThreeIndexForm::ao ? fmt::format("{}", f.nbf()) : std::string("-"), f.nmo(),
                     f.nocc(), calc.nfrozen, f.nocc() - calc.nfrozen, f.nvir(), f.naux());
  out += fmt::format("  run          backends {}  precision {}  threads {}  memory {}\n",
                     fmt::join(calc.input.backends, ", "), calc.input.precision, calc.input.threads,
                     calc.input.memory_text);
  for (const auto& run : calc.runs) {
    if (!run.details.empty()) out += fmt::format("  backend      {}: {}\n", run.backend, run.details);
  }
  if (!calc.runs.empty()) {
    const auto& r = calc.runs.front().result;
    out += fmt::format("  blocking     aux block {}  occupied block {}  block pairs {}  working set {:.3f} GiB\n",
                       r.plan.aux_block, r.plan.occupied_block, r.block_pairs, r.plan.peak_bytes / double(1 << 30));
  }
  return out;
}

std::string format_energies(const Calculation& calc, const BackendRun& run) {
  const auto& r = run.result;
  const auto scf = calc.integrals->scf_energy();
  const std::string rule = "\t-----------------------------------------------------------\n";
  std::string out = fmt::format("\n  ==> DF-MP2 on backend {} <==\n\n", run.backend);
  out += rule;
  out += "\t ==================> DF-MP2 Energies <==================== \n";
  out += rule;
  out += scf ? line("Reference Energy", *scf, "Eh") : missing("Reference Energy");
  out += line("Singles Energy", 0.0, "Eh");
  out += line("Same-Spin Energy", r.same_spin, "Eh");
  out += line("Opposite-Spin Energy", r.opposite_spin, "Eh");
  out += line("Correlation Energy", r.correlation(), "Eh");
  out += scf ? line("Total Energy", *scf + r.correlation(), "Eh") : missing("Total Energy");
  out += rule;
  out += "\t ================> DF-SCS-MP2 Energies <================== \n";
  out += rule;
  out += line("SCS Same-Spin Scale", kSameSpinScale, "-");
  out += line("SCS Opposite-Spin Scale", kOppositeSpinScale, "-");
  out += line("SCS Same-Spin Energy", kSameSpinScale * r.same_spin, "Eh");
  out += line("SCS Opposite-Spin Energy", kOppositeSpinScale * r.opposite_spin, "Eh");
  out += line("SCS Correlation Energy", r.scs_correlation(), "Eh");
  out += scf ? line("SCS Total Energy", *scf + r.scs_correlation(), "Eh") : missing("SCS Total Energy");
  out += rule;
  return out;
}

std::string format_kernel_table(const BackendRun& run) {
  std::string out = fmt::format("\n  Kernel timings on backend {} (wall {:.3f} s)\n", run.backend, run.wall_seconds);
  out += fmt::format("  {:<12} {:<13} {:<9} {:>7} {:>11} {:>10} {:>7}\n", "step", "kernel", "backend", "calls",
                     "seconds", "GFLOP/s", "share");
  double accounted = 0;
  for (const auto& k : run.log.records()) {
    accounted += k.seconds;
    const std::string rate = k.flops > 0 && k.seconds > 0 ? fmt::format("{:.2f}", k.flops / k.seconds * 1e-9) : "-";
    out += fmt::format("  {:<12} {:<13} {:<9} {:>7} {:>11.6f} {:>10} {:>6.1f}%\n", k.step, k.kernel, k.backend,
                       k.calls, k.seconds, rate, run.wall_seconds > 0 ? 100.0 * k.seconds / run.wall_seconds : 0.0);
  }
  const double other = std::max(0.0, run.wall_seconds - accounted);
  out += fmt::format("  {:<12} {:<13} {:<9} {:>7} {:>11.6f} {:>10} {:>6.1f}%\n", "other", "(untimed)", "host", "-",
                     other, "-", run.wall_seconds > 0 ? 100.0 * other / run.wall_seconds : 0.0);
  return out;
}

std::string format_comparison(const Calculation& calc) {
  std::string out = "\n  ==> Backend comparison <==\n\n";
  out += fmt::format("  {:<10} {:>24} {:>16} {:>12}\n", "backend", "correlation [Eh]", "diff [Eh]", "wall [s]");
  const double first = calc.runs.front().result.correlation();
  for (const auto& run : calc.runs) {
    out += fmt::format("  {:<10} {:>24.16f} {:>16.3e} {:>12.4f}\n", run.backend, run.result.correlation(),
                       run.result.correlation() - first, run.wall_seconds);
  }
  return out;
}

}  // namespace dfmp2::app
