#include "chem/gradient/scf_gradient.hpp"

#include <cmath>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include <Eigen/Eigenvalues>

#include "chem/gradient/gradient_detail.hpp"
#include "chem/integrals/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Matrix;

namespace {

const std::string kStep = "gradient";

// J^-1 x for the metric's Cholesky factor L (lower triangle): L^-T L^-1 x, in place.
void solve_metric(const Matrix& factor, Matrix& x, linalg::Kernels& kernels) {
  if (x.cols() == 0) return;
  for (const linalg::Trans t : {linalg::Trans::no, linalg::Trans::yes})
    kernels.trsm(kStep, linalg::Side::left, linalg::Uplo::lower, t, linalg::Diag::non_unit, 1.0, linalg::view(factor),
                 linalg::view(x));
}

// The half-transformed integrals of the DF form, fitted: H = (Q|mi) J^-1 for each channel's occupied orbitals, by
// blocks of them (rows (i m), a column per fitting function), and the fitted densities d_D = J^-1 (Q|mn) D_mn of the
// spin-summed D and d_P of each correction's spin-summed part. With several ranks each transforms its own fitting
// functions (aux) and holds the blocks it fits (README "MPI").
struct FittedHalf {
  Matrix factor;  // the metric's Cholesky factor
  gradient_detail::AuxColumns aux;
  struct Channel {
    std::vector<std::pair<Index, Index>> blocks;
    std::unique_ptr<gradient_detail::Store> h;  // the blocks this rank holds, whole
  };
  std::vector<Channel> channels;
  Matrix fitted_d, fitted_c;
};

FittedHalf fitted_half(const BasisSet& basis, const BasisSet& jk_basis, const std::vector<ExchangeChannel>& channels,
                       const Matrix& density, const std::vector<Matrix>& corrections,
                       const HalfTransformedStorage& storage, const gradient_detail::Ranks& ranks,
                       linalg::Kernels& kernels) {
  using linalg::ConstMatrixView;
  using linalg::MatrixView;
  using linalg::Trans;
  const Index nbf = basis.nbf();
  const auto count = static_cast<Index>(corrections.size());
  FittedHalf f;
  Matrix& factor = f.factor;
  factor = coulomb_metric(jk_basis);
  kernels.cholesky(kStep, linalg::Uplo::lower, linalg::view(factor));
  const Index naux = factor.rows();
  const ThreeCenterEngine engine(jk_basis, basis);
  f.aux = gradient_detail::aux_columns(engine.blocks(storage.aux_block), naux, ranks);
  const Index col0 = f.aux.first(ranks.rank());
  const std::string* folder = storage.on_scratch ? &storage.scratch_folder : nullptr;
  const bool one = ranks.size() == 1;
  // This rank's fitting functions of every block of each channel.
  std::vector<std::unique_ptr<gradient_detail::Store>> columns(channels.size());
  f.channels.resize(channels.size());
  auto name = [&](std::size_t c, const char* what) {
    return ranks.file_name(std::string(what) + (channels.size() > 1 ? (c == 0 ? "-alpha" : "-beta") : ""));
  };
  // Its fitted densities' elements (summed over the ranks at the end) and its columns of H.
  Matrix& fitted_d = f.fitted_d;
  Matrix& fitted_c = f.fitted_c;
  fitted_d = Matrix::Zero(naux, 1);
  fitted_c = Matrix::Zero(naux, count);
  ranks.checked([&] {
    for (std::size_t c = 0; c < channels.size(); ++c) {
      f.channels[c].blocks = gradient_detail::active_blocks(channels[c].c_occ.cols(), storage.occupied_block);
      columns[c] = gradient_detail::make_store(f.channels[c].blocks, nbf, f.aux.count(ranks.rank()), folder,
                                               name(c, one ? "gradient-half" : "gradient-half-columns"), nullptr,
                                               !one);
    }
    std::vector<double> block;
    for (const auto& [p0, p1] : f.aux.mine) {
      const Index np = p1 - p0;
      block.resize(static_cast<std::size_t>(np * nbf * nbf));
      engine.compute_square(p0, p1, block.data());
#pragma omp parallel for
      for (Index p = 0; p < np; ++p) {
        const Eigen::Map<const Matrix> pmn(block.data() + p * nbf * nbf, nbf, nbf);
        fitted_d(p0 + p) = pmn.cwiseProduct(density).sum();
        for (Index k = 0; k < count; ++k) fitted_c(p0 + p, k) = pmn.cwiseProduct(corrections[std::size_t(k)]).sum();
      }
      for (std::size_t c = 0; c < channels.size(); ++c) {
        // (P|mn) C_o for every P of the block in one GEMM ((P|mn) is symmetric): (nbf np) x nocc, row P nbf + m;
        // then each P's nbf x nocc as one column (i m) of the store.
        const Matrix& c_occ = channels[c].c_occ;
        const Index nocc = c_occ.cols();
        Matrix half(nbf * np, nocc), slab(nbf * nocc, np);
        kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{block.data(), nbf, nbf * np, nbf},
                             linalg::view(c_occ), 0.0, linalg::view(half));
        for (Index p = 0; p < np; ++p)
          Eigen::Map<Matrix>(slab.col(p).data(), nbf, nocc) = half.middleRows(p * nbf, nbf);
        const auto& blocks = f.channels[c].blocks;
        for (std::size_t b = 0; b < blocks.size(); ++b)
          columns[c]->write_columns(static_cast<Index>(b), p0 - col0, np, slab.data() + blocks[b].first * nbf,
                                    nbf * nocc);
      }
    }
  });
  ranks.sum(fitted_d);
  ranks.sum(fitted_c);
  auto fit = [&](MatrixView rows) {  // H J^-1 = H L^-T L^-1
    for (const Trans t : {Trans::yes, Trans::no})
      kernels.trsm(kStep, linalg::Side::right, linalg::Uplo::lower, t, linalg::Diag::non_unit, 1.0,
                   linalg::view(factor), rows);
  };
  for (std::size_t c = 0; c < channels.size(); ++c) {
    const auto& blocks = f.channels[c].blocks;
    const auto nblocks = static_cast<Index>(blocks.size());
    if (one) {
      gradient_detail::update_blocks(*columns[c], nblocks, fit);
      f.channels[c].h = std::move(columns[c]);
      continue;
    }
    const std::vector<Index> held = gradient_detail::held_blocks(nblocks, ranks);
    ranks.checked([&] {
      f.channels[c].h = gradient_detail::make_store(blocks, nbf, naux, folder, name(c, "gradient-half"), &held, true);
    });
    gradient_detail::columns_to_blocks(*columns[c], f.aux, *f.channels[c].h, fit, ranks);
    columns[c].reset();
  }
  solve_metric(factor, fitted_d, kernels);
  solve_metric(factor, fitted_c, kernels);
  return f;
}

// The metric's densities, block by block: the SCF's V0 = sum_c w_c sum_ij B^P_ij B^Q_ij - 1/2 d_D d_D^T with
// B^P = C_o^T H^P of each channel c; each correction's V = V0 + sum_c sum_mi H^P_mi (P_c H^Q)_mi
// - 1/2 (d_P d_D^T + d_D d_P^T) (before the last term). With P_c split by its eigenvalues into W+ W+^T - W- W-^T
// (columns scaled by sqrt |lambda|), the middle sum is sum_i (W+^T H_i)^T (W+^T H_i) - (W-^T H_i)^T (W-^T H_i): two
// SYRKs, half the flops of H^T (P H). Every sum builds its lower triangle only, mirrored at the end.
std::pair<Matrix, std::vector<Matrix>> metric_densities(const FittedHalf& f, Index nbf,
                                                        const std::vector<ExchangeChannel>& channels, Index count,
                                                        const gradient_detail::Ranks& ranks, linalg::Kernels& kernels) {
  using linalg::ConstMatrixView;
  using linalg::MatrixView;
  using linalg::Trans;
  using linalg::Uplo;
  const Index naux = f.factor.rows();
  Matrix v0 = Matrix::Zero(naux, naux);
  std::vector<Matrix> v(static_cast<std::size_t>(count), Matrix::Zero(naux, naux));
  std::vector<double> buffer;
  Matrix occupied, corrected;
  for (std::size_t c = 0; c < channels.size(); ++c) {
    const Matrix& c_occ = channels[c].c_occ;
    const Index nocc = c_occ.cols();
    const gradient_detail::Store* h = f.channels[c].h.get();
    const auto nblocks = static_cast<Index>(f.channels[c].blocks.size());
    std::vector<std::pair<Matrix, Index>> split;  // per correction: [W+ W-] and the count of W+'s columns
    for (const Matrix& p : channels[c].corrections) {
      const Eigen::SelfAdjointEigenSolver<Matrix> eig(p);
      const Index positive = (eig.eigenvalues().array() > 0.0).count();
      Matrix w(nbf, nbf);
      Index next_plus = 0, next_minus = positive;
      for (Index e = 0; e < nbf; ++e) {
        const double lambda = eig.eigenvalues()(e);
        w.col(lambda > 0.0 ? next_plus++ : next_minus++) = std::sqrt(std::abs(lambda)) * eig.eigenvectors().col(e);
      }
      split.emplace_back(std::move(w), positive);
    }
    ranks.checked([&] {
      for (Index b = 0; b < nblocks; ++b) {
        if (!ranks.mine(b)) continue;  // each rank its blocks of orbitals; the sums summed over the ranks
        const Index rows = h->rows(b), ni = rows / nbf;
        const double* h_b = h->block(b, buffer);
        occupied.resize(nocc * ni, naux);
        for (Index i = 0; i < ni; ++i)
          kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, linalg::view(c_occ),
                       ConstMatrixView{h_b + i * nbf, nbf, naux, rows}, 0.0,
                       MatrixView{occupied.data() + i * nocc, nocc, naux, nocc * ni});
        kernels.syrk(kStep, Uplo::lower, Trans::yes, channels[c].weight, linalg::view(occupied), 1.0,
                     linalg::view(v0));
        for (Index k = 0; k < count; ++k) {
          // W+^T H_i for every i of the block, one under the other, then the W-^T H_i under them.
          const auto& [w, positive] = split[std::size_t(k)];
          const Index negative = nbf - positive;
          corrected.resize(rows, naux);
          for (Index i = 0; i < ni; ++i) {
            const ConstMatrixView h_i{h_b + i * nbf, nbf, naux, rows};
            if (positive > 0)
              kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{w.data(), nbf, positive, nbf}, h_i, 0.0,
                           MatrixView{corrected.data() + i * positive, positive, naux, rows});
            if (negative > 0)
              kernels.gemm(kStep, Trans::yes, Trans::no, 1.0,
                           ConstMatrixView{w.data() + positive * nbf, nbf, negative, nbf}, h_i, 0.0,
                           MatrixView{corrected.data() + ni * positive + i * negative, negative, naux, rows});
          }
          if (positive > 0)
            kernels.syrk(kStep, Uplo::lower, Trans::yes, 1.0,
                         ConstMatrixView{corrected.data(), ni * positive, naux, rows}, 1.0,
                         linalg::view(v[std::size_t(k)]));
          if (negative > 0)
            kernels.syrk(kStep, Uplo::lower, Trans::yes, -1.0,
                         ConstMatrixView{corrected.data() + ni * positive, ni * negative, naux, rows}, 1.0,
                         linalg::view(v[std::size_t(k)]));
        }
      }
    });
  }
  auto summed_and_mirrored = [&](Matrix& m) {
    ranks.sum(m);
    m.triangularView<Eigen::StrictlyUpper>() = m.transpose();
  };
  summed_and_mirrored(v0);
  for (Matrix& vk : v) summed_and_mirrored(vk);
  v0 -= 0.5 * f.fitted_d * f.fitted_d.transpose();
  return {v0, v};
}

// The spin-summed densities of the two-electron functional (scf_gradient.hpp): D = sum_c 2 w_c C_c C_c^T, and each
// correction's sum_c P_c.
Matrix summed_density(const std::vector<ExchangeChannel>& channels) {
  Matrix d = Matrix::Zero(channels.front().c_occ.rows(), channels.front().c_occ.rows());
  for (const ExchangeChannel& c : channels) d += 2.0 * c.weight * c.c_occ * c.c_occ.transpose();
  return d;
}
std::vector<Matrix> summed_corrections(const std::vector<ExchangeChannel>& channels) {
  std::vector<Matrix> out = channels.front().corrections;
  for (std::size_t c = 1; c < channels.size(); ++c)
    for (std::size_t k = 0; k < out.size(); ++k) out[k] += channels[c].corrections[k];
  return out;
}

// The DF form of two_electron_gradients (the header's formula): one pass over (Q|mn) for the fitted densities and
// each channel's half-transformed H, stored by blocks of occupied orbitals (rows (i m), a column per fitting
// function) and fitted there; one pass over the blocks for the metric's densities; then one pass over the
// three-index derivatives for every response, each auxiliary shell reading its slabs of H. The SCF's own response
// takes the cheaper occupied route (B = C_o^T H).
std::vector<Matrix> df_two_electron_gradients(const BasisSet& basis, const BasisSet& jk_basis, Index natoms,
                                              const std::vector<ExchangeChannel>& channels, linalg::Kernels& kernels,
                                              const HalfTransformedStorage& storage) {
  const Index nbf = basis.nbf();
  const Matrix density = summed_density(channels);
  const std::vector<Matrix> corrections = summed_corrections(channels);
  const auto count = static_cast<Index>(corrections.size());
  const gradient_detail::Ranks ranks{storage.comm};
  FittedHalf f = fitted_half(basis, jk_basis, channels, density, corrections, storage, ranks, kernels);
  const Matrix& fitted_d = f.fitted_d;
  const Matrix& fitted_c = f.fitted_c;
  auto [v0, v] = metric_densities(f, nbf, channels, count, ranks, kernels);
  // H by this rank's fitting functions for the derivative integrals (one rank: as it is).
  if (ranks.size() > 1) {
    for (std::size_t c = 0; c < channels.size(); ++c) {
      auto& ch = f.channels[c];
      ch.h = gradient_detail::blocks_to_columns(
          *ch.h, ch.blocks, nbf, f.aux, storage.on_scratch ? &storage.scratch_folder : nullptr,
          std::string("gradient-half-columns") + (channels.size() > 1 ? (c == 0 ? "-alpha" : "-beta") : ""), ranks);
    }
  }
  const Index col0 = f.aux.first(ranks.rank());
  std::vector<Matrix> gradients = {metric_gradient(jk_basis, natoms, v0)};
  for (Index k = 0; k < count; ++k) {
    Matrix& vk = v[std::size_t(k)];
    vk += v0 - 0.5 * (fitted_c.col(k) * fitted_d.transpose() + fitted_d * fitted_c.col(k).transpose());
    gradients.push_back(metric_gradient(jk_basis, natoms, vk));
  }
  auto three_index_densities = [&](Index p0, Index p1, double* out) {
    const Index np = p1 - p0;
    for (Index p = p0; p < p1; ++p) {
      Eigen::Map<Matrix>(out + (p - p0) * nbf * nbf, nbf, nbf) = fitted_d(p) * density;
      for (Index k = 0; k < count; ++k) {
        Eigen::Map<Matrix>(out + ((k + 1) * np + p - p0) * nbf * nbf, nbf, nbf) =
            fitted_d(p) * (density + corrections[std::size_t(k)]) + fitted_c(p, k) * density;
      }
    }
    for (std::size_t c = 0; c < channels.size(); ++c) {
      const Matrix& c_occ = channels[c].c_occ;
      const Index nocc = c_occ.cols();
      Matrix slab(nbf * nocc, np);
      f.channels[c].h->read_slab(p0 - col0, np, slab.data());
      for (Index p = p0; p < p1; ++p) {
        // The SCF's exchange: 2 w C_o B^P C_o^T; each correction's: P_c H^P C_o^T and its mirror.
        const Eigen::Map<const Matrix> hp(slab.col(p - p0).data(), nbf, nocc);
        const Matrix scf = 2.0 * channels[c].weight * c_occ * (c_occ.transpose() * hp) * c_occ.transpose();
        for (Index k = 0; k <= count; ++k) {
          Eigen::Map<Matrix> r(out + (k * np + p - p0) * nbf * nbf, nbf, nbf);
          r -= scf;
          if (k == 0) continue;
          const Matrix ph_c = channels[c].corrections[std::size_t(k - 1)] * hp * c_occ.transpose();
          r -= ph_c + ph_c.transpose();
        }
      }
    }
  };
  std::vector<Matrix> three_index;
  ranks.checked([&] {
    three_index = three_center_gradients(jk_basis, basis, natoms, static_cast<int>(count + 1), three_index_densities,
                                         AuxFunctions{col0, col0 + f.aux.count(ranks.rank())});
  });
  for (Index k = 0; k <= count; ++k) {
    ranks.sum(three_index[std::size_t(k)]);  // each rank's auxiliary shells
    gradients[std::size_t(k)] += three_index[std::size_t(k)];
  }
  return gradients;
}

}  // namespace

std::vector<Matrix> two_electron_gradients(const BasisSet& basis, const BasisSet* jk_basis, Index natoms,
                                           const std::vector<ExchangeChannel>& channels, linalg::Kernels& kernels,
                                           const HalfTransformedStorage& storage) {
  if (jk_basis != nullptr) return df_two_electron_gradients(basis, *jk_basis, natoms, channels, kernels, storage);
  FourCenterDensities densities{summed_density(channels), {}};
  for (const ExchangeChannel& c : channels) densities.exchange.push_back(c.c_occ * c.c_occ.transpose());
  std::vector<FourCenterDensities> responses = {{0.5 * densities.coulomb, {}}};
  for (std::size_t c = 0; c < channels.size(); ++c)
    responses[0].exchange.push_back(channels[c].weight * densities.exchange[c]);
  const std::vector<Matrix> corrections = summed_corrections(channels);
  for (std::size_t k = 0; k < corrections.size(); ++k) {
    FourCenterDensities r{responses[0].coulomb + corrections[k], {}};
    for (std::size_t c = 0; c < channels.size(); ++c)
      r.exchange.push_back(responses[0].exchange[c] + channels[c].corrections[k]);
    responses.push_back(std::move(r));
  }
  return four_center_gradients(basis, natoms, densities, responses);
}

std::vector<Matrix> scf_gradients(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis,
                                  const ScfResult& scf, const std::vector<DensityCorrection>& corrections,
                                  linalg::Kernels& kernels, const HalfTransformedStorage& storage) {
  const bool uhf = scf.open_shell();  // UHF, and ROHF in its semicanonical orbitals: the same densities
  const auto natoms = static_cast<Index>(molecule.atoms.size());
  // RHF: one channel, the doubly occupied orbitals; UHF: the alpha and the beta orbitals, each of weight 1/2.
  std::vector<ExchangeChannel> channels = {{scf.mo_coefficients.leftCols(scf.nocc), uhf ? 0.5 : 1.0, {}}};
  if (uhf) channels.push_back({scf.mo_coefficients_beta.leftCols(scf.nocc_beta), 0.5, {}});
  for (const DensityCorrection& c : corrections) {
    if (!uhf) {
      channels[0].corrections.push_back(c.density);
      continue;
    }
    channels[0].corrections.push_back(c.alpha);
    channels[1].corrections.push_back(c.density - c.alpha);
  }
  Matrix density = Matrix::Zero(basis.nbf(), basis.nbf()), energy_weighted = density;
  // Each spin's W: C (f N + N f) / 2 C^T over its orbitals (f = C^T F C, N its occupations): C_o e_o C_o^T where
  // the orbitals are canonical (RHF, UHF); ROHF's semicanonical orbitals keep f's occupied-virtual block.
  auto add_spin = [&](const Matrix& c, const linalg::Vector& e, int nocc, double occupation, const Matrix* fock) {
    const Matrix c_occ = c.leftCols(nocc);
    density += occupation * c_occ * c_occ.transpose();
    if (fock == nullptr) {
      energy_weighted += occupation * c_occ * e.head(nocc).asDiagonal() * c_occ.transpose();
      return;
    }
    const Matrix f_mo_occ = c.transpose() * (*fock) * c_occ;  // nmo x nocc: f's occupied columns
    const Matrix half = c * f_mo_occ * c_occ.transpose();     // C f N C^T
    energy_weighted += 0.5 * occupation * (half + half.transpose());
  };
  const bool rohf = scf.reference == ScfReference::rohf;
  add_spin(scf.mo_coefficients, scf.orbital_energies, scf.nocc, uhf ? 1.0 : 2.0, rohf ? &scf.fock_alpha : nullptr);
  if (uhf)
    add_spin(scf.mo_coefficients_beta, scf.orbital_energies_beta, scf.nocc_beta, 1.0, rohf ? &scf.fock_beta : nullptr);
  std::vector<Matrix> gradients = two_electron_gradients(basis, jk_basis, natoms, channels, kernels, storage);
  // Point charges: a row each after the atoms', which only the one-electron and nuclear terms reach.
  const PointCharges& external = scf.external_charges;
  for (Matrix& g : gradients) {
    g.conservativeResize(natoms + static_cast<Index>(external.size()), 3);
    g.bottomRows(static_cast<Index>(external.size())).setZero();
  }
  const Matrix nuclear = nuclear_repulsion_gradient(molecule, external);
  gradients[0] += one_electron_gradient(basis, molecule, density, energy_weighted, external) + nuclear;
  for (std::size_t k = 0; k < corrections.size(); ++k) {
    gradients[k + 1] += one_electron_gradient(basis, molecule, density + corrections[k].density,
                                              energy_weighted + corrections[k].energy_weighted, external) + nuclear;
  }
  return gradients;
}

Matrix scf_gradient(const Molecule& molecule, const BasisSet& basis, const BasisSet* jk_basis, const ScfResult& scf,
                    linalg::Kernels& kernels) {
  return scf_gradients(molecule, basis, jk_basis, scf, {}, kernels).front();
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
