// One-electron properties of a density (properties.hpp).
#include "chem/properties/properties.hpp"

#include <Eigen/Eigenvalues>

#include <cmath>

#include "chem/integrals/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;
using linalg::Vector;

namespace {

std::array<double, 3> bohr_position(const Atom& atom) {
  return {atom.x * kBohrPerAngstrom, atom.y * kBohrPerAngstrom, atom.z * kBohrPerAngstrom};
}

// The atom each basis function sits on.
std::vector<int> function_atoms(const BasisSet& basis) {
  std::vector<int> atoms;
  atoms.reserve(static_cast<std::size_t>(basis.nbf()));
  for (const Shell& shell : basis.shells) atoms.insert(atoms.end(), static_cast<std::size_t>(shell.size()), shell.atom);
  return atoms;
}

// The atoms' populations from each function's (diagonal of a population matrix, one per spin).
AtomicCharges charges_from(const Molecule& molecule, const BasisSet& basis, const Vector& alpha, const Vector& beta) {
  const std::size_t natoms = molecule.atoms.size();
  AtomicCharges out{std::vector<double>(natoms, 0.0), std::vector<double>(natoms, 0.0), {}};
  const std::vector<int> atom_of = function_atoms(basis);
  for (Index m = 0; m < alpha.size(); ++m) {
    out.alpha[static_cast<std::size_t>(atom_of[static_cast<std::size_t>(m)])] += alpha(m);
    out.beta[static_cast<std::size_t>(atom_of[static_cast<std::size_t>(m)])] += beta(m);
  }
  for (std::size_t a = 0; a < natoms; ++a)
    out.charge.push_back(molecule.atoms[a].nuclear_charge() - out.alpha[a] - out.beta[a]);
  return out;
}

}  // namespace

std::array<double, 6> Multipoles::traceless_quadrupole() const {
  const double third_trace = (quadrupole[0] + quadrupole[3] + quadrupole[5]) / 3.0;
  std::array<double, 6> t{};
  for (std::size_t k = 0; k < 6; ++k) t[k] = 1.5 * quadrupole[k];
  for (std::size_t k : {0, 3, 5}) t[k] -= 1.5 * third_trace;
  return t;
}

Multipoles multipoles(const Molecule& molecule, const BasisSet& basis, const Matrix& density,
                      const std::array<double, 3>& origin) {
  Multipoles m;
  m.origin = origin;
  const std::array<Matrix, 3> r = dipole_matrices(basis, origin);
  const std::array<Matrix, 6> rr = second_moment_matrices(basis, origin);
  for (std::size_t i = 0; i < 3; ++i) m.dipole[i] = -density.cwiseProduct(r[i]).sum();
  for (std::size_t k = 0; k < 6; ++k) m.quadrupole[k] = -density.cwiseProduct(rr[k]).sum();
  static constexpr std::array<std::array<std::size_t, 2>, 6> kPairs = {{{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}}};
  for (const Atom& atom : molecule.atoms) {
    std::array<double, 3> d = bohr_position(atom);
    for (std::size_t i = 0; i < 3; ++i) d[i] -= origin[i];
    for (std::size_t i = 0; i < 3; ++i) m.dipole[i] += atom.nuclear_charge() * d[i];
    for (std::size_t k = 0; k < 6; ++k) m.quadrupole[k] += atom.nuclear_charge() * d[kPairs[k][0]] * d[kPairs[k][1]];
  }
  return m;
}

AtomicCharges mulliken_charges(const Molecule& molecule, const BasisSet& basis, const SpinDensities& density,
                               const Matrix& overlap) {
  return charges_from(molecule, basis, density.alpha.cwiseProduct(overlap).rowwise().sum(),
                      density.beta.cwiseProduct(overlap).rowwise().sum());
}

AtomicCharges lowdin_charges(const Molecule& molecule, const BasisSet& basis, const SpinDensities& density,
                             const Matrix& overlap) {
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(overlap);
  const Matrix half = eig.eigenvectors() * eig.eigenvalues().cwiseSqrt().asDiagonal() * eig.eigenvectors().transpose();
  auto populations = [&](const Matrix& d) { return Vector((half * d * half).diagonal()); };
  return charges_from(molecule, basis, populations(density.alpha), populations(density.beta));
}

NaturalOrbitals natural_orbitals(const Matrix& density, const Matrix& overlap, const Matrix& orbitals) {
  // In the orbitals' orthonormal basis the density is C^T S D S C; its eigenvectors U give the orbitals C U.
  const Matrix sc = overlap * orbitals;
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(sc.transpose() * density * sc);
  const Index n = eig.eigenvalues().size();
  NaturalOrbitals out{Matrix(orbitals.rows(), n), Vector(n)};
  for (Index k = 0; k < n; ++k) {  // Eigen's ascending order, reversed
    out.occupations(k) = eig.eigenvalues()(n - 1 - k);
    out.coefficients.col(k) = orbitals * eig.eigenvectors().col(n - 1 - k);
  }
  return out;
}

std::vector<double> electrostatic_potential(const Molecule& molecule, const BasisSet& basis, const Matrix& density,
                                            const std::vector<std::array<double, 3>>& points) {
  std::vector<double> v = electronic_potential(basis, density, points);
  for (std::size_t k = 0; k < points.size(); ++k)
    for (const Atom& atom : molecule.atoms) {
      if (atom.ghost) continue;
      const std::array<double, 3> r = bohr_position(atom);
      const double distance = std::hypot(points[k][0] - r[0], points[k][1] - r[1], points[k][2] - r[2]);
      v[k] += atom.nuclear_charge() / distance;
    }
  return v;
}

DensityProperties density_properties(const Molecule& molecule, const BasisSet& basis, SpinDensities density,
                                     const Matrix& overlap, const Matrix& orbitals, const std::array<double, 3>& origin) {
  DensityProperties p;
  const Matrix total = density.total();
  p.multipoles = multipoles(molecule, basis, total, origin);
  p.mulliken = mulliken_charges(molecule, basis, density, overlap);
  p.lowdin = lowdin_charges(molecule, basis, density, overlap);
  p.natural_alpha = natural_orbitals(density.alpha, overlap, orbitals);
  p.natural_beta = natural_orbitals(density.beta, overlap, orbitals);
  p.natural = natural_orbitals(total, overlap, orbitals);
  p.density = std::move(density);
  return p;
}

}  // namespace dfmp2::chem
