// The report's `==> Properties <==` section (driver: properties; README "Properties"): each density's multipoles,
// charges and natural-orbital occupations, the SCF's beside DF-MP2's unrelaxed and relaxed densities.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "app/report.hpp"

namespace dfmp2::app {

namespace {

struct NamedDensity {
  std::string name;
  const chem::DensityProperties* p;
};

std::string atom_label(const chem::Atom& atom) {
  const std::string symbol = chem::element_symbol(atom.atomic_number);
  return atom.ghost ? "Gh(" + symbol + ")" : symbol;
}

std::string format_multipoles(const std::vector<NamedDensity>& densities) {
  std::string out = fmt::format("  {:<22} {:>13} {:>13} {:>13} {:>13} {:>11}\n", "dipole [e a0]", "X", "Y", "Z",
                                "total", "total [D]");
  for (const NamedDensity& d : densities) {
    const std::array<double, 3>& mu = d.p->multipoles.dipole;
    const double total = std::sqrt(mu[0] * mu[0] + mu[1] * mu[1] + mu[2] * mu[2]);
    out += fmt::format("  {:<22} {:13.8f} {:13.8f} {:13.8f} {:13.8f} {:11.6f}\n", d.name, mu[0], mu[1], mu[2], total,
                       total * kDebyePerAtomicUnit);
  }
  auto second_moments = [&](const char* title, bool traceless) {
    out += fmt::format("\n  {:<22} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", title, "XX", "XY", "XZ", "YY", "YZ",
                       "ZZ");
    for (const NamedDensity& d : densities) {
      const std::array<double, 6> q =
          traceless ? d.p->multipoles.traceless_quadrupole() : d.p->multipoles.quadrupole;
      out += fmt::format("  {:<22} {:12.7f} {:12.7f} {:12.7f} {:12.7f} {:12.7f} {:12.7f}\n", d.name, q[0], q[1], q[2],
                         q[3], q[4], q[5]);
    }
  };
  second_moments("quadrupole [e a0^2]", false);
  second_moments("traceless [e a0^2]", true);
  return out;
}

// Each atom's charge by each density; with an open shell, the relaxed density's spin population (alpha - beta).
std::string format_charges(const char* title, const chem::Molecule& molecule,
                           const std::vector<NamedDensity>& densities, bool open_shell,
                           const chem::AtomicCharges chem::DensityProperties::*which) {
  std::string out = fmt::format("\n  {} charges [e]\n  {:>4} {:<6}", title, "atom", "");
  for (const NamedDensity& d : densities) out += fmt::format(" {:>22}", d.name);
  if (open_shell) out += fmt::format(" {:>22}", "relaxed spin");
  out += "\n";
  const chem::AtomicCharges& relaxed = densities.back().p->*which;
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    out += fmt::format("  {:>4} {:<6}", a + 1, atom_label(molecule.atoms[a]));
    for (const NamedDensity& d : densities) out += fmt::format(" {:22.8f}", (d.p->*which).charge[a]);
    if (open_shell) out += fmt::format(" {:22.8f}", relaxed.alpha[a] - relaxed.beta[a]);
    out += "\n";
  }
  return out;
}

// Occupations around the SCF's occupied count n (Psi4's HONO-k and LUNO+k), and the diagnostics of multireference
// character: the smallest of the n largest and the largest of the rest.
std::string format_occupations(const std::string& name, const linalg::Vector& n, linalg::Index occupied) {
  const linalg::Index count = n.size();
  std::string out = fmt::format("  {:<28}", name);
  for (linalg::Index k = std::max<linalg::Index>(0, occupied - 3); k < std::min(count, occupied + 4); ++k)
    out += k < occupied ? fmt::format(" HONO-{} {:.6f}", occupied - 1 - k, n(k))
                        : fmt::format(" LUNO+{} {:.6f}", k - occupied, n(k));
  out += "\n";
  return out;
}

std::string format_electrostatics(const Calculation& calc, const std::string& label) {
  const PropertiesRun& p = *calc.properties;
  std::string out;
  if (!p.esp_relaxed.empty()) {
    const auto [low, high] = std::minmax_element(p.esp_relaxed.begin(), p.esp_relaxed.end());
    out += fmt::format("\n  electrostatic potential at {} points of {} (results file: extras.dfmp2.properties.esp): "
                       "{} relaxed from {:.8f} to {:.8f} Eh/e\n", p.esp_relaxed.size(),
                       calc.input.properties.esp_points_file, label, *low, *high);
  }
  if (!p.fitted_relaxed) return out;
  out += fmt::format("\n  charges fitted to the electrostatic potential at {} points on Merz-Kollman shells (1.4, 1.6, "
                     "1.8, 2.0 x van der Waals radii), total charge {}{} [e]\n  {:>4} {:<6} {:>22} {:>22}\n",
                     p.fit_points.size(), calc.input.molecule->charge,
                     p.fitted_relaxed->dipole_constrained ? " and the density's dipole held" : "", "atom", "", "SCF",
                     label + " relaxed");
  for (std::size_t a = 0; a < calc.input.molecule->atoms.size(); ++a)
    out += fmt::format("  {:>4} {:<6} {:22.8f} {:22.8f}\n", a + 1, atom_label(calc.input.molecule->atoms[a]),
                       p.fitted_scf->charges[a], p.fitted_relaxed->charges[a]);
  for (const auto& [name, f] : {std::pair{std::string("SCF"), &*p.fitted_scf}, {label + " relaxed", &*p.fitted_relaxed}})
    out += fmt::format("  {:<22} residual: RMS {:.3e} Eh/e, relative {:.4f}; the charges' dipole {:.8f} {:.8f} {:.8f} "
                       "e a0\n", name, f->rms_residual, f->relative_residual, f->dipole[0], f->dipole[1], f->dipole[2]);
  return out;
}

}  // namespace

std::string format_properties(const Calculation& calc) {
  if (!calc.properties) return {};
  const PropertiesRun& p = *calc.properties;
  const std::string label = calc.input.mp2_model.label();
  const std::vector<NamedDensity> densities = {
      {"SCF", &p.scf}, {label + " unrelaxed", &p.unrelaxed}, {label + " relaxed", &p.relaxed}};
  const Reference& r = calc.reference;
  const bool open_shell = r.open_shell();
  std::string out = fmt::format("\n  ==> Properties <==\n\n  of the SCF density and of {}'s unrelaxed and relaxed "
                                "densities; multipoles about ({}, {}, {}) bohr in the input's frame ({:.2f} s)\n\n",
                                label, p.origin[0], p.origin[1], p.origin[2], p.seconds);
  out += format_multipoles(densities);
  out += format_charges("Mulliken", *calc.input.molecule, densities, open_shell, &chem::DensityProperties::mulliken);
  out += format_charges("Loewdin", *calc.input.molecule, densities, open_shell, &chem::DensityProperties::lowdin);
  out += fmt::format("\n  natural-orbital occupations, largest first (HONO-0: the {}th, as many as the SCF occupies; "
                     "a spin's: its own count)\n", r.nocc);
  for (const NamedDensity& d : {densities[1], densities[2]}) {
    out += format_occupations(d.name, d.p->natural.occupations, r.nocc);
    if (!open_shell) continue;
    out += format_occupations(d.name + " alpha", d.p->natural_alpha.occupations, r.nocc);
    out += format_occupations(d.name + " beta", d.p->natural_beta.occupations, r.nocc_beta);
  }
  out += format_electrostatics(calc, label);
  return out;
}

}  // namespace dfmp2::app
