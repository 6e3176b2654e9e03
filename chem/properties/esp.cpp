// The electrostatic potential's grid and the charges fitted to it (properties.hpp).
#include <Eigen/Dense>

#include <cmath>
#include <stdexcept>

#include "chem/properties/properties.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;
using linalg::Vector;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Van der Waals radii (angstrom) by atomic number, H to Kr: Merz and Kollman's where their papers give one (H, C, N,
// O, F, P, S, Cl), else Bondi's (J. Phys. Chem. 68, 441 (1964)) and, where Bondi gives none, Mantina et al.'s
// (J. Phys. Chem. A 113, 5806 (2009)).
constexpr double kRadii[37] = {0.0,
                               1.20, 1.40,                                                          // H He
                               1.82, 1.53, 1.92, 1.50, 1.50, 1.40, 1.35, 1.54,                      // Li-Ne
                               2.27, 1.73, 1.84, 2.10, 1.80, 1.75, 1.70, 1.88,                      // Na-Ar
                               2.75, 2.31, 2.11, 1.87, 1.79, 1.89, 1.97, 1.94, 1.92, 1.63, 1.40,    // K-Cu
                               1.39, 1.87, 2.11, 1.85, 1.90, 1.85, 2.02};                           // Zn-Kr

double radius(int z) {
  if (z < 1 || z > 36) throw std::invalid_argument("merz_kollman_points: no van der Waals radius beyond krypton");
  return kRadii[z];
}

std::array<double, 3> angstrom_position(const Atom& a) { return {a.x, a.y, a.z}; }

double distance(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return std::hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
}

}  // namespace

std::vector<std::array<double, 3>> merz_kollman_points(const Molecule& molecule, const EspGridOptions& options) {
  std::vector<std::array<double, 3>> points;
  const double golden_angle = kPi * (3.0 - std::sqrt(5.0));
  for (const double scale : options.scales) {
    for (const Atom& atom : molecule.atoms) {
      if (atom.ghost) continue;
      const double r = scale * radius(atom.atomic_number);
      const auto n = static_cast<int>(std::lround(4.0 * kPi * r * r * options.density));
      const std::array<double, 3> centre = angstrom_position(atom);
      for (int k = 0; k < n; ++k) {  // a golden-angle spiral: evenly spread, the same points every run
        const double z = 1.0 - (2.0 * k + 1.0) / n;
        const double ring = std::sqrt(1.0 - z * z);
        const double phi = golden_angle * k;
        const std::array<double, 3> p = {centre[0] + r * ring * std::cos(phi), centre[1] + r * ring * std::sin(phi),
                                         centre[2] + r * z};
        bool inside = false;
        for (const Atom& other : molecule.atoms) {
          if (&other == &atom || other.ghost) continue;
          if (distance(p, angstrom_position(other)) < scale * radius(other.atomic_number) - 1e-10) {
            inside = true;
            break;
          }
        }
        if (!inside) points.push_back({p[0] * kBohrPerAngstrom, p[1] * kBohrPerAngstrom, p[2] * kBohrPerAngstrom});
      }
    }
  }
  return points;
}

FittedCharges fit_charges(const Molecule& molecule, const std::vector<std::array<double, 3>>& points,
                          const std::vector<double>& potential, const std::array<double, 3>* dipole) {
  std::vector<std::size_t> centres;  // the atoms with nuclei
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a)
    if (!molecule.atoms[a].ghost) centres.push_back(a);
  const auto n = static_cast<Index>(centres.size());
  const auto npoints = static_cast<Index>(points.size());
  Matrix inverse_distance(npoints, n);
  std::vector<std::array<double, 3>> at(centres.size());
  for (Index a = 0; a < n; ++a) {
    const Atom& atom = molecule.atoms[centres[static_cast<std::size_t>(a)]];
    at[static_cast<std::size_t>(a)] = {atom.x * kBohrPerAngstrom, atom.y * kBohrPerAngstrom, atom.z * kBohrPerAngstrom};
    for (Index k = 0; k < npoints; ++k)
      inverse_distance(k, a) = 1.0 / distance(points[static_cast<std::size_t>(k)], at[static_cast<std::size_t>(a)]);
  }
  const Vector v = Eigen::Map<const Vector>(potential.data(), npoints);
  // The normal equations bordered by the constraints: [A C^T; C 0] [q; lambda] = [b; d].
  const Index nc = dipole != nullptr ? 4 : 1;
  Matrix kkt = Matrix::Zero(n + nc, n + nc);
  Vector rhs = Vector::Zero(n + nc);
  kkt.topLeftCorner(n, n) = inverse_distance.transpose() * inverse_distance;
  rhs.head(n) = inverse_distance.transpose() * v;
  for (Index a = 0; a < n; ++a) {
    kkt(n, a) = kkt(a, n) = 1.0;
    for (Index i = 1; i < nc; ++i)
      kkt(n + i, a) = kkt(a, n + i) = at[static_cast<std::size_t>(a)][static_cast<std::size_t>(i - 1)];
  }
  rhs(n) = molecule.charge;
  for (Index i = 1; i < nc; ++i) rhs(n + i) = (*dipole)[static_cast<std::size_t>(i - 1)];
  const Vector solution = kkt.fullPivLu().solve(rhs);
  FittedCharges out;
  out.dipole_constrained = dipole != nullptr;
  out.charges.assign(molecule.atoms.size(), 0.0);
  for (Index a = 0; a < n; ++a) {
    out.charges[centres[static_cast<std::size_t>(a)]] = solution(a);
    for (std::size_t i = 0; i < 3; ++i) out.dipole[i] += solution(a) * at[static_cast<std::size_t>(a)][i];
  }
  const Vector misfit = v - inverse_distance * solution.head(n);
  out.rms_residual = std::sqrt(misfit.squaredNorm() / double(npoints));
  out.relative_residual = std::sqrt(misfit.squaredNorm() / v.squaredNorm());
  return out;
}

}  // namespace dfmp2::chem
