// The report's section on a basis-set extrapolation (report.hpp): each basis's energies, the schemes and the limits.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/report.hpp"

namespace dfmp2::app {

namespace {

std::string stage_line(const char* what, const chem::BasisSeries& series, chem::CbsScheme scheme,
                       std::optional<double> alpha, double limit) {
  const double a = alpha.value_or(chem::cbs_default_alpha(scheme));
  return fmt::format("  {:<12} {:<21} {:<12} over {}: {:.12f} Eh\n", what, chem::cbs_scheme_name(scheme),
                     a > 0 ? fmt::format("alpha {:g}", a) : std::string(), fmt::join(series.names, ", "), limit);
}

}  // namespace

std::string format_cbs(const Calculation& calc) {
  if (!calc.cbs) return "";
  const CbsRun& c = *calc.cbs;
  const CbsOptions& o = *calc.input.cbs;
  std::string out = "\n  ==> Basis-set extrapolation <==\n\n";
  out += fmt::format("  {:<20} {:>4} {:>20} {:>20} {:>20}\n", "basis", "zeta", "SCF [Eh]",
                     calc.input.mp2_model.label() + " corr. [Eh]", "total [Eh]");
  for (const CbsRun::Basis& b : c.bases) {
    out += fmt::format("  {:<20} {:>4} {:>20.12f} {:>20.12f} {:>20.12f}{}\n", b.name, b.zeta, b.scf, b.correlation,
                       b.scf + b.correlation, b.calc ? "" : "  (this run's own)");
  }
  out += "\n";
  out += stage_line("SCF", o.scf, o.scf_scheme, o.scf_alpha, c.scf);
  out += stage_line("correlation", o.corl, o.corl_scheme, o.corl_alpha, c.correlation);
  out += fmt::format("  {:<12} {:.12f} Eh  (the smaller bases' calculations {:.1f} s)\n", "CBS total", c.total(),
                     c.seconds);
  const chem::SpinScales scales = calc.input.mp2_model.scales();
  for (const InteractionEnergy& e : c.interaction) {
    out += fmt::format("  {:<12} {} interaction energy at the limit: {:.12f} Eh ({:.8f} kcal/mol): SCF {:.12f}, "
                       "correlation {:.12f}\n",
                       "", e.scheme, e.total_with(scales), e.total_with(scales) * 627.509474, e.scf,
                       e.correlation_with(scales));
  }
  if (c.gradient) {
    out += "  CBS total gradient [Eh/bohr]:\n";
    for (Eigen::Index a = 0; a < c.gradient->rows(); ++a) {
      out += fmt::format("    atom {:>3} {:>18.12f} {:>18.12f} {:>18.12f}\n", a + 1, (*c.gradient)(a, 0),
                         (*c.gradient)(a, 1), (*c.gradient)(a, 2));
    }
  }
  return out;
}

}  // namespace dfmp2::app
