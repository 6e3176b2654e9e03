#include "chem/scf_gradient.hpp"

#include <Eigen/Cholesky>
#include <stdexcept>
#include <vector>

#include "chem/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;

namespace {

// The DF form of two_electron_gradient (the header's formula): one pass over (Q|mn) for the fitted densities d_D,
// d_P and the half-transformed H, then the three-index derivatives and the metric's.
Matrix df_two_electron_gradient(const BasisSet& basis, const BasisSet& jk_basis, Index natoms, const Matrix& c_occ,
                                const Matrix& response) {
  const Index nbf = basis.nbf(), nocc = c_occ.cols();
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Matrix metric = coulomb_metric(jk_basis);
  const Index naux = metric.rows();
  const Eigen::LLT<Matrix> metric_factor(metric);
  const ThreeCenterEngine engine(jk_basis, basis);

  linalg::Vector gamma_d(naux), gamma_p(naux);
  Matrix half(nbf * nocc, naux);  // column P: (P|m i), m fastest
  std::vector<double> block;
  for (const auto& [p0, p1] : engine.blocks(64)) {
    block.resize(static_cast<std::size_t>((p1 - p0) * nbf * nbf));
    engine.compute_square(p0, p1, block.data());
    for (Index p = p0; p < p1; ++p) {
      const Eigen::Map<const Matrix> pmn(block.data() + (p - p0) * nbf * nbf, nbf, nbf);
      gamma_d(p) = pmn.cwiseProduct(density).sum();
      gamma_p(p) = pmn.cwiseProduct(response).sum();
      Eigen::Map<Matrix>(half.col(p).data(), nbf, nocc).noalias() = pmn * c_occ;
    }
  }
  const linalg::Vector fitted_d = metric_factor.solve(gamma_d), fitted_p = metric_factor.solve(gamma_p);
  const Matrix fitted_half = metric_factor.solve(half.transpose()).transpose();  // H^P = c^P C_o
  half.resize(0, 0);

  // sum_mi H^P_mi (P H^Q)_mi, from P H^Q for every Q at once (H as nbf x (nocc naux)).
  const Matrix response_half =
      response * Eigen::Map<const Matrix>(fitted_half.data(), nbf, nocc * naux);
  Matrix metric_density =
      fitted_half.transpose() * Eigen::Map<const Matrix>(response_half.data(), nbf * nocc, naux);
  metric_density -= 0.5 * (fitted_p * fitted_d.transpose() + fitted_d * fitted_p.transpose());

  const Matrix three_index = three_center_gradient(jk_basis, basis, natoms, [&](Index p0, Index p1, double* out) {
    for (Index p = p0; p < p1; ++p) {
      const Eigen::Map<const Matrix> h(fitted_half.col(p).data(), nbf, nocc);
      const Matrix ph_c = response * h * c_occ.transpose();
      Eigen::Map<Matrix> r(out + (p - p0) * nbf * nbf, nbf, nbf);
      r = fitted_d(p) * response + fitted_p(p) * density - ph_c - ph_c.transpose();
    }
  });
  return three_index + metric_gradient(jk_basis, natoms, metric_density);
}

}  // namespace

Matrix two_electron_gradient(const BasisSet& basis, const BasisSet* jk_basis, Index natoms, const Matrix& c_occ,
                             const Matrix& response) {
  if (jk_basis == nullptr) return four_center_gradient(basis, natoms, 2.0 * c_occ * c_occ.transpose(), response);
  return df_two_electron_gradient(basis, *jk_basis, natoms, c_occ, response);
}

Matrix rhf_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis, const ScfResult& scf,
                    const DensityCorrection& correction) {
  if (scf.open_shell()) throw std::logic_error("rhf_gradient: an open-shell SCF");
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  const Matrix c_occ = scf.mo_coefficients.leftCols(scf.nocc);
  Matrix density = 2.0 * c_occ * c_occ.transpose();
  Matrix energy_weighted = 2.0 * c_occ * scf.orbital_energies.head(scf.nocc).asDiagonal() * c_occ.transpose();
  Matrix response = 0.5 * density;
  if (correction.density.size() > 0) {
    density += correction.density;
    energy_weighted += correction.energy_weighted;
    response += correction.density;
  }
  return one_electron_gradient(basis, molecule, density, energy_weighted) + nuclear_repulsion_gradient(molecule) +
         two_electron_gradient(basis, jk_basis, natoms, c_occ, response);
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
