#include "chem/scf_gradient.hpp"

#include <Eigen/Cholesky>
#include <stdexcept>
#include <vector>

#include "chem/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;

linalg::Matrix rhf_df_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet& jk_basis,
                               const ScfResult& scf) {
  if (scf.open_shell()) throw std::logic_error("rhf_df_gradient: an open-shell SCF");
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  const Index nbf = basis.nbf(), nocc = scf.nocc;
  const Matrix c_occ = scf.mo_coefficients.leftCols(nocc);
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Matrix energy_weighted = 2.0 * c_occ * scf.orbital_energies.head(nocc).asDiagonal() * c_occ.transpose();

  // The fitted densities: c (the total density's), B (each occupied pair's), Y = B B^T.
  const Matrix metric = coulomb_metric(jk_basis);
  const Index naux = metric.rows();
  const Eigen::LLT<Matrix> metric_factor(metric);
  ThreeCenterEngine engine(jk_basis, basis);
  std::vector<double> pmn(static_cast<std::size_t>(naux * nbf * nbf));
  engine.compute_square(0, naux, pmn.data());
  linalg::Vector gamma(naux);
  Matrix pairs(naux, nocc * nocc);  // (P|ij), column i + nocc j
  for (Index p = 0; p < naux; ++p) {
    const Eigen::Map<const Matrix> block(pmn.data() + p * nbf * nbf, nbf, nbf);
    gamma(p) = block.cwiseProduct(density).sum();
    const Matrix ij = c_occ.transpose() * block * c_occ;
    pairs.row(p) = Eigen::Map<const linalg::Vector>(ij.data(), nocc * nocc).transpose();
  }
  const linalg::Vector fitted_density = metric_factor.solve(gamma);
  const Matrix fitted_pairs = metric_factor.solve(pairs);  // B, naux x nocc^2
  Matrix metric_density = fitted_pairs * fitted_pairs.transpose();
  metric_density -= 0.5 * fitted_density * fitted_density.transpose();

  const Matrix three_index = three_center_gradient(jk_basis, basis, natoms, [&](Index p0, Index p1, double* out) {
    for (Index p = p0; p < p1; ++p) {
      const linalg::Vector row = fitted_pairs.row(p).transpose();
      const Eigen::Map<const Matrix> b(row.data(), nocc, nocc);
      Eigen::Map<Matrix> r(out + (p - p0) * nbf * nbf, nbf, nbf);
      r = fitted_density(p) * density - 2.0 * c_occ * b * c_occ.transpose();
    }
  });
  return one_electron_gradient(basis, molecule, density, energy_weighted) + nuclear_repulsion_gradient(molecule) +
         three_index + metric_gradient(jk_basis, natoms, metric_density);
}

linalg::Matrix rhf_exact_gradient(const Molecule& molecule, const BasisSet& basis, const ScfResult& scf) {
  if (scf.open_shell()) throw std::logic_error("rhf_exact_gradient: an open-shell SCF");
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  const Matrix c_occ = scf.mo_coefficients.leftCols(scf.nocc);
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Matrix energy_weighted = 2.0 * c_occ * scf.orbital_energies.head(scf.nocc).asDiagonal() * c_occ.transpose();
  return one_electron_gradient(basis, molecule, density, energy_weighted) + nuclear_repulsion_gradient(molecule) +
         rhf_four_center_gradient(basis, natoms, density);
}

}  // namespace dfmp2::chem
