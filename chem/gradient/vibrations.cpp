#include "chem/gradient/vibrations.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <array>
#include <cmath>

#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;
using linalg::Vector;

namespace {

// AME2016 masses of the most abundant isotopes, H (1) to Rn (86), in amu (for Tc, Pm, Po, At and Rn, which have no
// stable isotope, the longest-lived one's, as qcelemental and Psi4 take them).
constexpr std::array<double, 86> kIsotopicMass = {
    1.00782503223,  4.00260325413, 7.0160034366,  9.012183065,   11.00930536,   12.0,          14.00307400443,
    15.99491461957, 18.99840316273, 19.9924401762, 22.989769282,  23.985041697,  26.98153853,   27.97692653465,
    30.97376199842, 31.9720711744, 34.968852682,  39.9623831237, 38.9637064864, 39.962590863,  44.95590828,
    47.94794198,    50.94395704,   51.94050623,   54.93804391,   55.93493633,   58.93319429,   57.93534241,
    62.92959772,    63.92914201,   68.9255735,    73.921177761,  74.92159457,   79.9165218,    78.9183376,
    83.9114977282,  84.9117897379, 87.9056125,    88.9058403,    89.9046977,    92.906373,     97.90540482,
    97.9072124,     101.9043441,   102.905498,    105.9034804,   106.9050916,   113.90336509,  114.903878776,
    119.90220163,   120.903812,    129.906222748, 126.9044719,   131.9041550856, 132.905451961, 137.905247,
    138.9063563,    139.9054431,   140.9076576,   141.907729,    144.9127559,   151.9197397,   152.921238,
    157.9241123,    158.9253547,   163.9291819,   164.9303288,   165.9302995,   168.9342179,   173.9388664,
    174.9407752,    179.946557,    180.9479958,   183.95093092,  186.9557501,   191.961477,    192.9629216,
    194.9647917,    196.96656879,  201.9706434,   204.9744278,   207.9766525,   208.9803991,   208.9824308,
    209.9871479,    222.0175782};

// sqrt(Eh / (amu bohr^2)) as a wavenumber: CODATA 2014 hartree, atomic mass unit, bohr and speed of light.
double wavenumber_per_sqrt_au() {
  constexpr double kHartreeJoule = 4.359744650e-18, kAmuKilogram = 1.660539040e-27, kBohrMetre = 0.52917721067e-10;
  constexpr double kLightCentimetrePerSecond = 2.99792458e10;
  return std::sqrt(kHartreeJoule / (kAmuKilogram * kBohrMetre * kBohrMetre)) / (2.0 * M_PI * kLightCentimetrePerSecond);
}

double coordinate(const Atom& atom, int x) {
  return (x == 0 ? atom.x : x == 1 ? atom.y : atom.z) * kBohrPerAngstrom;
}

}  // namespace

double isotopic_mass(int z) {
  if (z < 1 || z > static_cast<int>(kIsotopicMass.size())) {
    throw UnsupportedError(fmt::format("vibrations: no isotopic mass for element {} (dfmp2 has H to Rn)", z));
  }
  return kIsotopicMass[static_cast<std::size_t>(z - 1)];
}

std::vector<Molecule> hessian_displacements(const Molecule& molecule, double step) {
  std::vector<Molecule> out;
  for (std::size_t k = 0; k < 3 * molecule.atoms.size(); ++k) {
    for (const double sign : {1.0, -1.0}) {
      Molecule& displaced = out.emplace_back(molecule);
      Atom& atom = displaced.atoms[k / 3];
      double& position = k % 3 == 0 ? atom.x : k % 3 == 1 ? atom.y : atom.z;
      position += sign * step / kBohrPerAngstrom;
    }
  }
  return out;
}

Matrix hessian_from_gradients(const std::vector<Matrix>& gradients, double step) {
  const auto n = static_cast<Index>(gradients.size() / 2);
  Matrix hessian(n, n);
  for (Index k = 0; k < n; ++k) {
    const Matrix column = (gradients[std::size_t(2 * k)] - gradients[std::size_t(2 * k + 1)]) / (2.0 * step);
    for (Index j = 0; j < n; ++j) hessian(j, k) = column(j / 3, j % 3);  // column is natoms x 3
  }
  return 0.5 * (hessian + hessian.transpose());
}

Matrix finite_difference_hessian(const Molecule& molecule, const std::function<Matrix(const Molecule&, int)>& gradient,
                                 double step) {
  const std::vector<Molecule> displaced = hessian_displacements(molecule, step);
  std::vector<Matrix> gradients;
  for (std::size_t k = 0; k < displaced.size(); ++k) gradients.push_back(gradient(displaced[k], static_cast<int>(k)));
  return hessian_from_gradients(gradients, step);
}

Vibrations harmonic_analysis(const Molecule& molecule, const Matrix& hessian) {
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  const Index n = 3 * natoms;
  Vector sqrt_mass(n);
  double total = 0;
  Eigen::Vector3d centre = Eigen::Vector3d::Zero();
  for (Index a = 0; a < natoms; ++a) {
    const Atom& atom = molecule.atoms[static_cast<std::size_t>(a)];
    if (atom.ghost) throw InputError("vibrations: a ghost atom has no mass; frequencies need real atoms only");
    const double m = isotopic_mass(atom.atomic_number);
    sqrt_mass.segment(3 * a, 3).setConstant(std::sqrt(m));
    total += m;
    for (int x = 0; x < 3; ++x) centre(x) += m * coordinate(atom, x);
  }
  centre /= total;

  // Translations and rotations about the centre of mass, in mass-weighted coordinates; their span (rank 5 for a
  // linear molecule, else 6) is projected out by working in its orthogonal complement.
  Matrix rigid = Matrix::Zero(n, 6);
  for (Index a = 0; a < natoms; ++a) {
    const Atom& atom = molecule.atoms[static_cast<std::size_t>(a)];
    const Eigen::Vector3d r(coordinate(atom, 0) - centre(0), coordinate(atom, 1) - centre(1),
                            coordinate(atom, 2) - centre(2));
    const double s = sqrt_mass(3 * a);
    for (int x = 0; x < 3; ++x) {
      rigid(3 * a + x, x) = s;
      const Eigen::Vector3d axis = Eigen::Vector3d::Unit(x);
      const Eigen::Vector3d turn = axis.cross(r);
      for (int y = 0; y < 3; ++y) rigid(3 * a + y, 3 + x) = s * turn(y);
    }
  }
  const Eigen::JacobiSVD<Matrix> svd(rigid, Eigen::ComputeFullU);
  const Vector& sv = svd.singularValues();
  int projected = 0;
  for (Index k = 0; k < sv.size(); ++k)
    if (sv(k) > 1e-6 * sv(0)) ++projected;
  const Matrix internal = svd.matrixU().rightCols(n - projected);  // orthonormal, orthogonal to the rigid motions

  Vibrations v;
  v.projected = projected;
  if (internal.cols() == 0) {  // a single atom: three translations and nothing that vibrates
    v.frequencies.resize(0);
    v.modes.resize(n, 0);
    v.reduced_masses.resize(0);
    return v;
  }
  const Matrix weighted = sqrt_mass.cwiseInverse().asDiagonal() * hessian * sqrt_mass.cwiseInverse().asDiagonal();
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(internal.transpose() * weighted * internal);
  const double scale = wavenumber_per_sqrt_au();
  v.frequencies = eig.eigenvalues().unaryExpr(
      [scale](double l) { return (l < 0 ? -1.0 : 1.0) * std::sqrt(std::abs(l)) * scale; });
  const Matrix cartesian = sqrt_mass.cwiseInverse().asDiagonal() * internal * eig.eigenvectors();
  v.modes = cartesian;
  v.reduced_masses.resize(cartesian.cols());
  for (Index k = 0; k < cartesian.cols(); ++k) {
    v.reduced_masses(k) = 1.0 / cartesian.col(k).squaredNorm();
    v.modes.col(k).normalize();
  }
  return v;
}

}  // namespace dfmp2::chem
