// The report's derivative sections: `==> DF-MP2 gradient <==` and `==> Harmonic frequencies <==` (README "Text
// report", items 8).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>

#include "app/report.hpp"
#include "devices/registry.hpp"

namespace dfmp2::app {

std::string format_gradient(const Calculation& calc) {
  if (!calc.gradient) return {};
  const GradientRun& g = *calc.gradient;
  const chem::DfMp2Gradient& r = g.result;
  const chem::Molecule& mol = *calc.input.molecule;
  // driver: properties runs the gradient's steps without the derivative integrals: its relaxed density alone.
  const bool density_only = calc.input.driver == Driver::properties;
  std::string out = fmt::format("\n  ==> DF-MP2 {} <==\n\n  backend {} (fp64), {} frozen core orbitals; "
                                "Z-vector converged in {} iterations (largest residual {:.1e}); {:.2f} s\n",
                                density_only ? "relaxed density" : "gradient", g.backend, calc.reference.nfrozen,
                                r.zvector_iterations, r.zvector_residual, g.seconds);
  bool devices_named = false;
  for (const std::string& name : calc.input.backends) devices_named |= devices::is_device_model(name);
  if (devices_named) {
    out += fmt::format("  the device models have no fp64 and a gradient in fp32 would carry the energy's fp32 error "
                       "into every force: the gradient runs on {} on the host\n", g.backend);
  }
  out += fmt::format("  MP2 correlation energy from the {}'s amplitudes: {:.12f} Eh\n",
                     density_only ? "density" : "gradient", r.correlation());
  auto table = [&](const char* title, const linalg::Matrix& m) {
    out += fmt::format("\n  {} [Eh/bohr]\n  {:>4} {:<3} {:>18} {:>18} {:>18}\n", title, "atom", "", "x", "y", "z");
    for (Eigen::Index a = 0; a < m.rows(); ++a) {
      const chem::Atom& atom = mol.atoms[static_cast<std::size_t>(a)];
      out += fmt::format("  {:>4} {:<3} {:>18.12f} {:>18.12f} {:>18.12f}\n", a + 1,
                         (atom.ghost ? "Gh(" + chem::element_symbol(atom.atomic_number) + ")"
                                     : chem::element_symbol(atom.atomic_number)),
                         m(a, 0), m(a, 1), m(a, 2));
    }
  };
  if (!density_only) {
    table((calc.input.mp2_model.label() + " total gradient" + (calc.counterpoise ? " of the complex" : "")).c_str(),
          r.gradient);
    if (const auto& cp = calc.counterpoise) {
      out += fmt::format("\n  counterpoise-corrected total energy E_AB(AB) - sum E_k(AB) + sum E_k(k): {:.12f} Eh "
                         "(its fragments' gradient calculations {:.2f} s)\n", cp->energy, cp->seconds);
      for (const auto& p : cp->parts)
        out += fmt::format("    {} {:<36} {:>20.12f} Eh  ({} SCF iterations{})\n", p.sign > 0 ? '+' : '-', p.name,
                           p.energy, p.scf_iterations, p.from_energy_orbitals ? " from the energy's orbitals" : "");
      table("Counterpoise-corrected total gradient", cp->gradient);
    }
    table("SCF gradient", r.scf_gradient);
    if (g.charge_gradient.rows() > 0) {  // external_charges: dE/dR of each point charge's position
      out += fmt::format("\n  {} total gradient on the point charges [Eh/bohr]\n", calc.input.mp2_model.label());
      for (Eigen::Index c = 0; c < g.charge_gradient.rows(); ++c)
        out += fmt::format("  {:>4} q {:+9.5f} {:>18.12f} {:>18.12f} {:>18.12f}\n", c + 1,
                           calc.input.scf.external_charges[static_cast<std::size_t>(c)].first, g.charge_gradient(c, 0),
                           g.charge_gradient(c, 1), g.charge_gradient(c, 2));
    }
    out += fmt::format("\n  RMS force {:.3e} Eh/bohr, largest {:.3e} Eh/bohr\n",
                       std::sqrt(calc.returned_gradient().squaredNorm() / double(r.gradient.size())),
                       calc.returned_gradient().cwiseAbs().maxCoeff());
  }
  auto dipole = [&](const char* what, const std::array<double, 3>& d) {
    const double total = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    out += fmt::format("  {:<28} X {:12.8f}  Y {:12.8f}  Z {:12.8f}  total {:12.8f} [e a0]  ({:.6f} D)\n", what, d[0],
                       d[1], d[2], total, total * kDebyePerAtomicUnit);
  };
  out += "\n";
  dipole("SCF dipole", r.scf_dipole);
  dipole((calc.input.mp2_model.label() + " relaxed dipole").c_str(), r.relaxed_dipole);
  out += "  steps:";
  for (const auto& [step, seconds] : r.seconds) out += fmt::format(" {} {:.2f} s;", step, seconds);
  out.back() = '\n';
  out += format_kernel_table(
      fmt::format("Kernel timings of the {} on backend {}", density_only ? "relaxed density" : "gradient", g.backend), g.log, g.seconds);
  return out;
}

std::string format_hessian(const Calculation& calc) {
  if (!calc.hessian) return {};
  const HessianRun& h = *calc.hessian;
  const chem::Vibrations& v = h.vibrations;
  const chem::Molecule& mol = *calc.input.molecule;
  std::string out = fmt::format("\n  ==> Harmonic frequencies <==\n\n  Hessian from central differences of analytic "
                                "DF-MP2 gradients: {} displaced geometries of {} bohr ({:.2f} s); masses of the most "
                                "abundant isotopes; {} translations and rotations projected out\n",
                                h.displacements, h.step, h.seconds, v.projected);
  if (!h.scf_iterations.empty()) {
    const auto [fewest, most] = std::minmax_element(h.scf_iterations.begin(), h.scf_iterations.end());
    // Each displaced calculation runs the gradient's backend in fp64 only, whatever the input named for the energy.
    out += fmt::format("  displaced geometries on backend {} (fp64); their SCFs from the undisplaced orbitals: {:.1f} "
                       "iterations on average ({} to {}; the input geometry's {} from its guess)\n",
                       calc.gradient->backend, double(std::accumulate(h.scf_iterations.begin(), h.scf_iterations.end(), 0)) /
                           double(h.scf_iterations.size()),
                       *fewest, *most, calc.reference.molecule()->scf.iterations);
  }
  out += "\n";
  if (v.frequencies.size() == 0) return out + "  no vibrations: a single atom only translates\n";
  out += fmt::format("  {:>4} {:>14} {:>16}\n", "mode", "freq [cm^-1]", "red. mass [amu]");
  for (Eigen::Index k = 0; k < v.frequencies.size(); ++k) {
    const double f = v.frequencies(k);
    out += fmt::format("  {:>4} {:>13.4f}{} {:>16.6f}\n", k + 1, std::abs(f), f < 0 ? "i" : " ", v.reduced_masses(k));
  }
  out += "\n  normal modes (Cartesian displacements, normalised):\n";
  for (Eigen::Index k = 0; k < v.modes.cols(); ++k) {
    out += fmt::format("  mode {} ({:.4f}{} cm^-1)\n", k + 1, std::abs(v.frequencies(k)), v.frequencies(k) < 0 ? "i" : "");
    for (Eigen::Index a = 0; a < v.modes.rows() / 3; ++a) {
      out += fmt::format("    {:<3} {:10.6f} {:10.6f} {:10.6f}\n",
                         chem::element_symbol(mol.atoms[static_cast<std::size_t>(a)].atomic_number),
                         v.modes(3 * a, k), v.modes(3 * a + 1, k), v.modes(3 * a + 2, k));
    }
  }
  return out;
}

}  // namespace dfmp2::app
