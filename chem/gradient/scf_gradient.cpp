#include "chem/gradient/scf_gradient.hpp"

#include <Eigen/Cholesky>
#include <stdexcept>
#include <vector>

#include "chem/integrals/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;

namespace {

const std::string kStep = "gradient";

// The DF form of two_electron_gradients (the header's formula): one pass over (Q|mn) for the fitted densities and
// the half-transformed H, fitted with the kernels; then one pass over the three-index derivatives for every
// response, and the metric's. The SCF's own response D/2 takes the cheaper occupied route (B = C_o^T H).
std::vector<Matrix> df_two_electron_gradients(const BasisSet& basis, const BasisSet& jk_basis, Index natoms,
                                              const Matrix& c_occ, const std::vector<Matrix>& corrections,
                                              linalg::Kernels& kernels) {
  using linalg::ConstMatrixView;
  using linalg::MatrixView;
  using linalg::Trans;
  const Index nbf = basis.nbf(), nocc = c_occ.cols();
  const auto count = static_cast<Index>(corrections.size());
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Eigen::LLT<Matrix> metric_factor(coulomb_metric(jk_basis));
  const Matrix factor = metric_factor.matrixL();
  const Index naux = factor.rows();
  const ThreeCenterEngine engine(jk_basis, basis);

  linalg::Vector gamma_d(naux);
  Matrix gamma_c(naux, count);
  Matrix half(nbf * nocc, naux);  // column P: (P|m i), m fastest; fitted in place to H^P = c^P C_o
  std::vector<double> block;
  for (const auto& range : engine.blocks(64)) {
    const Index p0 = range.first, p1 = range.second;  // plain locals: clang refuses structured bindings in OpenMP regions
    block.resize(static_cast<std::size_t>((p1 - p0) * nbf * nbf));
    engine.compute_square(p0, p1, block.data());
#pragma omp parallel for
    for (Index p = p0; p < p1; ++p) {
      const Eigen::Map<const Matrix> pmn(block.data() + (p - p0) * nbf * nbf, nbf, nbf);
      gamma_d(p) = pmn.cwiseProduct(density).sum();
      for (Index k = 0; k < count; ++k) gamma_c(p, k) = pmn.cwiseProduct(corrections[std::size_t(k)]).sum();
      Eigen::Map<Matrix>(half.col(p).data(), nbf, nocc).noalias() = pmn * c_occ;
    }
  }
  block = {};
  for (const Trans t : {Trans::yes, Trans::no})  // H J^-1 = H L^-T L^-1
    kernels.trsm(kStep, linalg::Side::right, linalg::Uplo::lower, t, linalg::Diag::non_unit, 1.0,
                 linalg::view(factor), linalg::view(half));
  const linalg::Vector fitted_d = metric_factor.solve(gamma_d);
  // No corrections (the SCF's own gradient): nothing to solve, and Eigen's triangular solve of an empty right-hand
  // side binds a reference to its null data (UndefinedBehaviorSanitizer stops there).
  const Matrix fitted_c = count > 0 ? Matrix(metric_factor.solve(gamma_c)) : Matrix(naux, 0);
  const ConstMatrixView h_wide{half.data(), nbf, nocc * naux, nbf};         // H as nbf x (nocc naux)
  const ConstMatrixView h_tall{half.data(), nbf * nocc, naux, nbf * nocc};  // H as (nbf nocc) x naux

  // The SCF's metric density: B^P = C_o^T H^P, V0 = sum_ij B^P_ij B^Q_ij - 1/2 d_D d_D^T.
  Matrix occupied(nocc, nocc * naux), v0(naux, naux);
  kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, linalg::view(c_occ), h_wide, 0.0, linalg::view(occupied));
  const ConstMatrixView b_tall{occupied.data(), nocc * nocc, naux, nocc * nocc};
  kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, b_tall, b_tall, 0.0, linalg::view(v0));
  v0 -= 0.5 * fitted_d * fitted_d.transpose();
  std::vector<Matrix> gradients = {metric_gradient(jk_basis, natoms, v0)};
  // Each correction P: V = V0 + sum_mi H^P_mi (P H^Q)_mi - 1/2 (d_P d_D^T + d_D d_P^T), with P H kept for the
  // three-index pass.
  std::vector<Matrix> corrected_half;
  for (Index k = 0; k < count; ++k) {
    Matrix& ph = corrected_half.emplace_back(nbf, nocc * naux);
    kernels.gemm(kStep, Trans::no, Trans::no, 1.0, linalg::view(corrections[std::size_t(k)]), h_wide, 0.0,
                 linalg::view(ph));
    Matrix v = v0;
    kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, h_tall, ConstMatrixView{ph.data(), nbf * nocc, naux, nbf * nocc},
                 1.0, linalg::view(v));
    v -= 0.5 * (fitted_c.col(k) * fitted_d.transpose() + fitted_d * fitted_c.col(k).transpose());
    gradients.push_back(metric_gradient(jk_basis, natoms, v));
  }
  const std::vector<Matrix> three_index = three_center_gradients(
      jk_basis, basis, natoms, static_cast<int>(count + 1), [&](Index p0, Index p1, double* out) {
        const Index np = p1 - p0;
        for (Index p = p0; p < p1; ++p) {
          // The SCF's: d_D^P D - 2 C_o B^P C_o^T.
          const Eigen::Map<const Matrix> b(occupied.data() + p * nocc * nocc, nocc, nocc);
          Eigen::Map<Matrix> r0(out + (p - p0) * nbf * nbf, nbf, nbf);
          r0.noalias() = fitted_d(p) * density - 2.0 * c_occ * b * c_occ.transpose();
          for (Index k = 0; k < count; ++k) {
            const Eigen::Map<const Matrix> ph(corrected_half[std::size_t(k)].data() + p * nbf * nocc, nbf, nocc);
            const Matrix ph_c = ph * c_occ.transpose();
            Eigen::Map<Matrix> r(out + ((k + 1) * np + p - p0) * nbf * nbf, nbf, nbf);
            r = r0 + fitted_d(p) * corrections[std::size_t(k)] + fitted_c(p, k) * density - ph_c - ph_c.transpose();
          }
        }
      });
  for (Index k = 0; k <= count; ++k) gradients[std::size_t(k)] += three_index[std::size_t(k)];
  return gradients;
}

}  // namespace

std::vector<Matrix> two_electron_gradients(const BasisSet& basis, const BasisSet* jk_basis, Index natoms,
                                           const Matrix& c_occ, const std::vector<Matrix>& corrections,
                                           linalg::Kernels& kernels) {
  if (jk_basis != nullptr) return df_two_electron_gradients(basis, *jk_basis, natoms, c_occ, corrections, kernels);
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  std::vector<Matrix> responses = {0.5 * density};
  for (const Matrix& c : corrections) responses.push_back(0.5 * density + c);
  return four_center_gradients(basis, natoms, density, responses);
}

std::vector<Matrix> rhf_gradients(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                                  const ScfResult& scf, const std::vector<DensityCorrection>& corrections,
                                  linalg::Kernels& kernels) {
  if (scf.open_shell()) throw std::logic_error("rhf_gradient: an open-shell SCF");
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  const Matrix c_occ = scf.mo_coefficients.leftCols(scf.nocc);
  const Matrix density = 2.0 * c_occ * c_occ.transpose();
  const Matrix energy_weighted =
      2.0 * c_occ * scf.orbital_energies.head(scf.nocc).asDiagonal() * c_occ.transpose();
  std::vector<Matrix> densities;
  for (const DensityCorrection& c : corrections) densities.push_back(c.density);
  std::vector<Matrix> gradients = two_electron_gradients(basis, jk_basis, natoms, c_occ, densities, kernels);
  const Matrix nuclear = nuclear_repulsion_gradient(molecule);
  gradients[0] += one_electron_gradient(basis, molecule, density, energy_weighted) + nuclear;
  for (std::size_t k = 0; k < corrections.size(); ++k) {
    gradients[k + 1] += one_electron_gradient(basis, molecule, density + corrections[k].density,
                                              energy_weighted + corrections[k].energy_weighted) + nuclear;
  }
  return gradients;
}

Matrix rhf_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis, const ScfResult& scf,
                    linalg::Kernels& kernels) {
  return rhf_gradients(molecule, basis, jk_basis, scf, {}, kernels).front();
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
