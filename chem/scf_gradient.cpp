#include "chem/scf_gradient.hpp"

#include <Eigen/Cholesky>
#include <stdexcept>
#include <vector>

#include "chem/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;

namespace {

// The DF form of two_electron_gradients (the header's formula): one pass over (Q|mn) for the fitted densities d_D,
// d_P and the half-transformed H, then one pass over the three-index derivatives and the metric's for every P.
std::vector<Matrix> df_two_electron_gradients(const BasisSet& basis, const BasisSet& jk_basis, Index natoms,
                                              const Matrix& c_occ, const std::vector<Matrix>& responses) {
  const Index nbf = basis.nbf(), nocc = c_occ.cols();
  const auto count = static_cast<Index>(responses.size());
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Matrix metric = coulomb_metric(jk_basis);
  const Index naux = metric.rows();
  const Eigen::LLT<Matrix> metric_factor(metric);
  const ThreeCenterEngine engine(jk_basis, basis);

  linalg::Vector gamma_d(naux);
  Matrix gamma_p(naux, count);
  Matrix half(nbf * nocc, naux);  // column P: (P|m i), m fastest
  std::vector<double> block;
  for (const auto& [p0, p1] : engine.blocks(64)) {
    block.resize(static_cast<std::size_t>((p1 - p0) * nbf * nbf));
    engine.compute_square(p0, p1, block.data());
#pragma omp parallel for
    for (Index p = p0; p < p1; ++p) {
      const Eigen::Map<const Matrix> pmn(block.data() + (p - p0) * nbf * nbf, nbf, nbf);
      gamma_d(p) = pmn.cwiseProduct(density).sum();
      for (Index k = 0; k < count; ++k) gamma_p(p, k) = pmn.cwiseProduct(responses[std::size_t(k)]).sum();
      Eigen::Map<Matrix>(half.col(p).data(), nbf, nocc).noalias() = pmn * c_occ;
    }
  }
  const linalg::Vector fitted_d = metric_factor.solve(gamma_d);
  const Matrix fitted_p = metric_factor.solve(gamma_p);
  const Matrix fitted_half = metric_factor.solve(half.transpose()).transpose();  // H^P = c^P C_o
  half.resize(0, 0);

  std::vector<Matrix> gradients;
  for (Index k = 0; k < count; ++k) {
    // sum_mi H^P_mi (P H^Q)_mi, from P H^Q for every Q at once (H as nbf x (nocc naux)).
    const Matrix response_half =
        responses[std::size_t(k)] * Eigen::Map<const Matrix>(fitted_half.data(), nbf, nocc * naux);
    Matrix v = fitted_half.transpose() * Eigen::Map<const Matrix>(response_half.data(), nbf * nocc, naux);
    v -= 0.5 * (fitted_p.col(k) * fitted_d.transpose() + fitted_d * fitted_p.col(k).transpose());
    gradients.push_back(metric_gradient(jk_basis, natoms, v));
  }
  const std::vector<Matrix> three_index = three_center_gradients(
      jk_basis, basis, natoms, static_cast<int>(count), [&](Index p0, Index p1, double* out) {
        for (Index k = 0; k < count; ++k) {
          const Matrix& response = responses[std::size_t(k)];
          for (Index p = p0; p < p1; ++p) {
            const Eigen::Map<const Matrix> h(fitted_half.col(p).data(), nbf, nocc);
            const Matrix ph_c = response * h * c_occ.transpose();
            Eigen::Map<Matrix> r(out + (k * (p1 - p0) + p - p0) * nbf * nbf, nbf, nbf);
            r = fitted_d(p) * response + fitted_p(p, k) * density - ph_c - ph_c.transpose();
          }
        }
      });
  for (Index k = 0; k < count; ++k) gradients[std::size_t(k)] += three_index[std::size_t(k)];
  return gradients;
}

}  // namespace

std::vector<Matrix> two_electron_gradients(const BasisSet& basis, const BasisSet* jk_basis, Index natoms,
                                           const Matrix& c_occ, const std::vector<Matrix>& responses) {
  if (jk_basis == nullptr) return four_center_gradients(basis, natoms, 2.0 * c_occ * c_occ.transpose(), responses);
  return df_two_electron_gradients(basis, *jk_basis, natoms, c_occ, responses);
}

std::vector<Matrix> rhf_gradients(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                                  const ScfResult& scf, const std::vector<DensityCorrection>& corrections) {
  if (scf.open_shell()) throw std::logic_error("rhf_gradient: an open-shell SCF");
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  const Matrix c_occ = scf.mo_coefficients.leftCols(scf.nocc);
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Matrix energy_weighted =
      2.0 * c_occ * scf.orbital_energies.head(scf.nocc).asDiagonal() * c_occ.transpose();
  std::vector<Matrix> responses = {0.5 * density};
  for (const DensityCorrection& c : corrections) responses.push_back(0.5 * density + c.density);
  std::vector<Matrix> gradients = two_electron_gradients(basis, jk_basis, natoms, c_occ, responses);
  const Matrix nuclear = nuclear_repulsion_gradient(molecule);
  gradients[0] += one_electron_gradient(basis, molecule, density, energy_weighted) + nuclear;
  for (std::size_t k = 0; k < corrections.size(); ++k) {
    gradients[k + 1] += one_electron_gradient(basis, molecule, density + corrections[k].density,
                                              energy_weighted + corrections[k].energy_weighted) + nuclear;
  }
  return gradients;
}

Matrix rhf_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis, const ScfResult& scf) {
  return rhf_gradients(molecule, basis, jk_basis, scf, {}).front();
}

std::array<double, 3> dipole_moment(const Molecule& molecule, const BasisSet& basis, const Matrix& density) {
  const std::array<Matrix, 3> r = dipole_matrices(basis, {0.0, 0.0, 0.0});
  std::array<double, 3> mu{};
  for (int x = 0; x < 3; ++x) {
    mu[static_cast<std::size_t>(x)] = -density.cwiseProduct(r[static_cast<std::size_t>(x)]).sum();
    for (const Atom& atom : molecule.atoms) {
      if (atom.ghost) continue;
      const double position = x == 0 ? atom.x : x == 1 ? atom.y : atom.z;
      mu[static_cast<std::size_t>(x)] += atom.nuclear_charge() * position * kBohrPerAngstrom;
    }
  }
  return mu;
}

}  // namespace dfmp2::chem
