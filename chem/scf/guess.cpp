// The SCF's guess from a superposition of atomic densities (README "SCF"; the core guess is in scf.cpp).
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "chem/scf/scf_detail.hpp"

namespace dfmp2::chem::scf_detail {


// The occupied columns scaled by sqrt(weight), so that D = c c^T.
namespace {

Matrix weighted_occupied(const Matrix& c, const std::vector<double>& weights) {
  Matrix out(c.rows(), static_cast<Index>(weights.size()));
  for (std::size_t i = 0; i < weights.size(); ++i) out.col(Index(i)) = c.col(Index(i)) * std::sqrt(weights[i]);
  return out;
}

// Aufbau over groups of degenerate orbitals (energies within 1e-6 Eh), a partly filled group sharing its electrons
// evenly: the occupation of a spherically averaged atom (O: 1s2 2s2 and 4/3 electrons in each 2p). As weights per
// orbital (half its electrons), for the occupied ones.
std::vector<double> spherical_weights(const Vector& eps, int electrons) {
  std::vector<double> weights;
  double left = electrons;
  for (Index i = 0; i < eps.size() && left > 0;) {
    Index end = i + 1;
    while (end < eps.size() && eps(end) - eps(i) < 1e-6) ++end;
    const double group = double(end - i), filled = std::min(left, 2.0 * group);
    for (Index o = i; o < end; ++o) weights.push_back(filled / (2.0 * group));
    left -= filled;
    i = end;
  }
  return weights;
}

// A few iterations of fractional-occupation RHF for one atom in its own basis functions, spherically averaged: a
// guess, not a result (the same density whichever way the eigensolver orders degenerate orbitals).
Matrix atomic_density_factor(const Atom& atom, const BasisSet& atom_basis, linalg::Kernels& kernels) {
  Molecule single;
  single.atoms = {atom};
  const Matrix s = overlap_matrix(atom_basis);
  const Matrix h =
      kinetic_matrix(atom_basis) + nuclear_attraction_matrix(atom_basis, single) + core_potential_matrix(atom_basis, single);
  const Matrix x = orthogonaliser(s);
  // A real atom's (less the core a potential replaces).
  const int electrons = std::min<int>(atom.nuclear_charge(), 2 * static_cast<int>(h.rows()));
  ExactJk jk(atom_basis, 0.0, nullptr);
  Orbitals orb = diagonalise(h, x, kernels);
  std::vector<double> weights = spherical_weights(orb.eps, electrons);
  Diis diis(6);
  Matrix j, k;
  for (int it = 0; it < 40; ++it) {
    const Matrix c_occ = weighted_occupied(orb.c, weights);
    jk.compute(c_occ, j, k, false, 0);
    const Matrix fock = h + 2.0 * j - k;
    const Matrix d = c_occ * c_occ.transpose();
    const Matrix error = x.transpose() * (fock * d * s - s * d * fock) * x;
    orb = diagonalise(diis.extrapolate(fock, error), x, kernels);
    weights = spherical_weights(orb.eps, electrons);
    if (error.norm() / double(error.rows()) < 1e-6) break;
  }
  return weighted_occupied(orb.c, weights);
}

BasisSet atom_subset(const BasisSet& basis, int atom) {
  BasisSet out;
  out.name = basis.name;
  out.source = basis.source;
  for (const auto& sh : basis.shells) {
    if (sh.atom == atom) out.shells.push_back(sh);
  }
  for (auto potential : basis.core_potentials) {
    if (potential.atom != atom) continue;
    potential.atom = 0;  // the atom's own one-atom molecule
    out.core_potentials.push_back(potential);
  }
  return out;
}

}  // namespace

// Superposition of atomic densities, as a factor c with D = c c^T (one block of columns per atom).
Matrix sad_guess(const Molecule& molecule, const BasisSet& basis, linalg::Kernels& kernels) {
  const std::vector<int> offsets = basis.shell_offsets();
  std::vector<int> first(molecule.atoms.size(), -1), count(molecule.atoms.size(), 0);
  for (std::size_t s = 0; s < basis.shells.size(); ++s) {
    const int a = basis.shells[s].atom;
    if (first[static_cast<std::size_t>(a)] < 0) first[static_cast<std::size_t>(a)] = offsets[s];
    count[static_cast<std::size_t>(a)] += basis.shells[s].size();
  }
  std::map<int, Matrix> by_element;  // atoms of one element in one basis share their density
  std::vector<Matrix> factors;
  Index columns = 0;
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    const int z = molecule.atoms[a].atomic_number;
    if (molecule.atoms[a].ghost) {  // no electrons: no columns in the guess
      factors.emplace_back(count[a], 0);
      continue;
    }
    auto it = by_element.find(z);
    if (it == by_element.end()) {
      it = by_element.emplace(z, atomic_density_factor(molecule.atoms[a], atom_subset(basis, int(a)), kernels)).first;
    }
    factors.push_back(it->second);
    columns += it->second.cols();
  }
  Matrix c = Matrix::Zero(basis.nbf(), columns);
  Index col = 0;
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    c.block(first[a], col, count[a], factors[a].cols()) = factors[a];
    col += factors[a].cols();
  }
  return c;
}

}  // namespace dfmp2::chem::scf_detail
