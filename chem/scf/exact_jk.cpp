// The J/K builder interface's defaults (chem/scf/jk_builder.hpp) and the exact J/K builder's construction.
#include <fmt/format.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "chem/scf/scf_detail.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using namespace scf_detail;

void JkBuilder::compute_response(const Matrix& m, const Matrix& c, Matrix& j, Matrix& kc) {
  Matrix k;
  compute_symmetric(m, j, k);
  kc = k * c;
}

Matrix JkBuilder::response_between(const Matrix& left, const Matrix& m, const Matrix& c_occ, linalg::Kernels& kernels) {
  const std::string& step = step_name(ScfStep::jk);
  Matrix j, kc;
  compute_response(m, c_occ, j, kc);
  kernels.gemm<double>(step, Trans::no, Trans::no, 4.0, linalg::view(j), linalg::view(c_occ), -2.0, linalg::view(kc));
  return linalg::product(kernels, step, left, Trans::yes, kc, Trans::no);
}

RotationResponse* JkBuilder::kept_products_for(const Matrix& c_vir, const Matrix& c_occ) {
  if (rotation_products_ == RotationProducts::none) return nullptr;
  for (auto& kept : rotations_)
    if (kept && kept->made_for(c_vir, c_occ)) return last_ = kept.get();
  // Another set of orbitals: beside the kept one when two are asked for (an open shell's spins), else instead.
  std::unique_ptr<RotationResponse>* slot = &rotations_[0];
  if (kept_sets_ > 1 && rotations_[0]) slot = &rotations_[1];
  if (kept_sets_ == 1) release_rotations();
  slot->reset();
  last_ = nullptr;
  if (std::optional<RotationSource> source = rotation_source(c_occ)) {
    source_ = std::move(*source);
    *slot = std::make_unique<RotationResponse>(rotation_products_, c_vir, c_occ, source_.naux, *source_.kernels,
                                               step_name(ScfStep::jk));
    last_ = slot->get();
  }
  return last_;
}

void JkBuilder::release_rotations() {
  for (auto& kept : rotations_) kept.reset();
  last_ = nullptr;
}

Matrix JkBuilder::rotation_hessian(const Matrix& c_vir, const Matrix& c_occ, const Matrix& z,
                                   linalg::Kernels& kernels) {
  if (RotationResponse* kept = kept_products_for(c_vir, c_occ)) {
    Matrix out;
    source_.on_ranks([&] { out = kept->apply(z, source_.pass); }, out);
    return out;
  }
  const std::string& step = step_name(ScfStep::jk);
  const Matrix half = linalg::product(kernels, step, linalg::product(kernels, step, c_vir, Trans::no, z, Trans::no),
                                      Trans::no, c_occ, Trans::yes);
  return response_between(c_vir, 0.5 * (half + half.transpose()), c_occ, kernels);
}

std::array<Matrix, 2> JkBuilder::unrestricted_rotation_hessian(const std::array<const Matrix*, 2>& c_vir,
                                                               const std::array<const Matrix*, 2>& c_occ,
                                                               const std::array<Matrix, 2>& z,
                                                               linalg::Kernels& kernels) {
  std::array<RotationResponse*, 2> kept{};
  if (kept_sets_ > 1)
    for (int s = 0; s < 2; ++s) kept[s] = kept_products_for(*c_vir[s], *c_occ[s]);
  std::array<Matrix, 2> out;
  if (kept[0] != nullptr && kept[1] != nullptr) {
    // Each spin's own 4 J - 2 K from its products, then J's other half: 2 J[M^t] - 2 J[M^s] = 2 sum_Q (d^t - d^s)_Q
    // b^Q_vo (both spins' products over the same fitting functions of this rank). Summed over the ranks as one.
    const Index size0 = z[0].size();
    Matrix both(size0 + z[1].size(), 1);
    source_.on_ranks([&] {
      std::array<Matrix, 2> d;
      for (int s = 0; s < 2; ++s) {
        out[s] = kept[s]->apply(z[s], source_.pass);
        d[s] = kept[s]->coulomb_coefficients(z[s]);
      }
      for (int s = 0; s < 2; ++s) out[s] += 2.0 * kept[s]->coulomb(d[1 - s] - d[s]);
      both.topRows(size0) = out[0].reshaped();
      both.bottomRows(z[1].size()) = out[1].reshaped();
    }, both);
    for (int s = 0; s < 2; ++s)
      out[s] = both.middleRows(s == 0 ? 0 : size0, z[s].size()).reshaped(z[s].rows(), z[s].cols());
    return out;
  }
  // Two response builds: J of each spin's M (summed) and K[M^s] C^s_o.
  const std::string& step = step_name(ScfStep::jk);
  std::array<Matrix, 2> j, kc;
  for (int s = 0; s < 2; ++s) {
    const Matrix half = linalg::product(
        kernels, step, linalg::product(kernels, step, *c_vir[s], Trans::no, z[s], Trans::no), Trans::no, *c_occ[s],
        Trans::yes);
    compute_response(0.5 * (half + half.transpose()), *c_occ[s], j[s], kc[s]);
  }
  const Matrix j_total = j[0] + j[1];
  for (int s = 0; s < 2; ++s) {
    kernels.gemm<double>(step, Trans::no, Trans::no, 2.0, linalg::view(j_total), linalg::view(*c_occ[s]), -2.0,
                         linalg::view(kc[s]));
    out[s] = linalg::product(kernels, step, *c_vir[s], Trans::yes, kc[s], Trans::no);
  }
  return out;
}

std::array<Matrix, 2> JkBuilder::unrestricted_rotation_hessian_diagonal(const std::array<const Matrix*, 2>& c_vir,
                                                                        const std::array<const Matrix*, 2>& c_occ) {
  std::array<Matrix, 2> out;
  if (rotation_products_ != RotationProducts::mo) return out;
  std::array<RotationResponse*, 2> kept{};
  for (int s = 0; s < 2; ++s)
    for (auto& r : rotations_)
      if (r && r->made_for(*c_vir[s], *c_occ[s])) kept[s] = r.get();
  if (kept[0] == nullptr || kept[1] == nullptr) return out;
  const Index size0 = c_vir[0]->cols() * c_occ[0]->cols(), size1 = c_vir[1]->cols() * c_occ[1]->cols();
  Matrix both(size0 + size1, 1);
  bool made = true;
  source_.on_ranks([&] {
    for (int s = 0; s < 2; ++s) {
      out[s] = kept[s]->diagonal(1.0);
      made = made && out[s].size() > 0;
    }
    if (!made) return;
    both.topRows(size0) = out[0].reshaped();
    both.bottomRows(size1) = out[1].reshaped();
  }, both);
  if (!made) return {};
  out[0] = both.topRows(size0).reshaped(c_vir[0]->cols(), c_occ[0]->cols());
  out[1] = both.bottomRows(size1).reshaped(c_vir[1]->cols(), c_occ[1]->cols());
  return out;
}

Matrix JkBuilder::unrelaxed_response(const Matrix& c_vir, const Matrix& c_occ, const Matrix& p_oo, const Matrix& p_vv,
                                     linalg::Kernels& kernels) {
  RotationResponse* kept = rotation_products_ == RotationProducts::mo ? kept_products_for(c_vir, c_occ) : nullptr;
  if (kept != nullptr) {
    Matrix out;
    source_.on_ranks([&] {
      kept->make(source_.pass);
      out = kept->unrelaxed_response(p_oo, p_vv);
    }, out);
    return out;
  }
  const std::string& step = step_name(ScfStep::jk);
  Matrix c(c_occ.rows(), c_occ.cols() + c_vir.cols());
  c << c_occ, c_vir;
  const Matrix m = linalg::product(kernels, step, linalg::product(kernels, step, c_occ, Trans::no, p_oo, Trans::no),
                                   Trans::no, c_occ, Trans::yes) +
                   linalg::product(kernels, step, linalg::product(kernels, step, c_vir, Trans::no, p_vv, Trans::no),
                                   Trans::no, c_vir, Trans::yes);
  return response_between(c, m, c_occ, kernels);
}

Matrix JkBuilder::rotation_hessian_diagonal() {
  if (last_ == nullptr || rotation_products_ != RotationProducts::mo) return Matrix();
  Matrix out;
  source_.on_ranks([&] { out = last_->diagonal(); }, out);
  return out;
}

Matrix JkBuilder::occupied_rotation_response(const Matrix& c_vir, const Matrix& c_occ, const Matrix& r_vo,
                                            const Matrix& r_oo, linalg::Kernels& kernels) {
  for (auto& kept : rotations_) {
    if (kept && kept->made_for(c_vir, c_occ)) {
      Matrix out;
      source_.on_ranks([&] { out = kept->occupied_response(r_vo, r_oo); }, out);
      return out;
    }
  }
  const std::string& step = step_name(ScfStep::jk);
  Matrix m = linalg::product(kernels, step, linalg::product(kernels, step, c_vir, Trans::no, r_vo, Trans::no),
                             Trans::no, c_occ, Trans::yes);
  m = (m + m.transpose()).eval();
  m += linalg::product(kernels, step, linalg::product(kernels, step, c_occ, Trans::no, r_oo, Trans::no), Trans::no,
                       c_occ, Trans::yes);
  return response_between(c_occ, m, c_occ, kernels);
}

void JkBuilder::compute_symmetric(const Matrix& m, Matrix& j, Matrix& k) {
  const Index n = m.rows();
  j.setZero(n, n);
  k.setZero(n, n);
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(0.5 * (m + m.transpose()));
  const double negligible = 1e-14 * std::max(1.0, eig.eigenvalues().cwiseAbs().maxCoeff());
  for (const double sign : {1.0, -1.0}) {
    std::vector<Index> part;
    for (Index x = 0; x < n; ++x)
      if (sign * eig.eigenvalues()(x) > negligible) part.push_back(x);
    const Index chunk = std::max<Index>(1, std::min<Index>(max_columns(), n));
    for (std::size_t first = 0; first < part.size(); first += static_cast<std::size_t>(chunk)) {
      const std::size_t last = std::min(part.size(), first + static_cast<std::size_t>(chunk));
      Matrix c(n, static_cast<Index>(last - first));
      for (std::size_t x = first; x < last; ++x)
        c.col(static_cast<Index>(x - first)) = eig.eigenvectors().col(part[x]) * std::sqrt(sign * eig.eigenvalues()(part[x]));
      Matrix jp, kp;
      compute(c, jp, kp, false, kResponseDensity);
      j += sign * jp;
      k += sign * kp;
    }
  }
}

double exact_jk_minimum_bytes(const BasisSet& basis, int threads) {
  return FourCenterJk::fixed_bytes(basis, threads);
}

std::unique_ptr<JkBuilder> make_exact_jk(const BasisSet& basis, double memory_bytes, linalg::Kernels& kernels,
                                         ExactJkPlan& plan, linalg::Comm* comm) {
  const double fixed = exact_jk_minimum_bytes(basis, omp_get_max_threads());
  if (memory_bytes < fixed) {
    throw PhaseTooLarge("SCF J/K (exact)", fixed,
                        fmt::format("the exact J/K needs {}, {} is left for it", linalg::format_bytes(fixed),
                                    linalg::format_bytes(memory_bytes)));
  }
  auto jk = std::make_unique<ExactJk>(basis, memory_bytes - fixed, &kernels, comm);
  const auto& st = jk->four().stats();
  // Over every rank's bras.
  double counts[2] = {st.integrals, st.cached_integrals};
  if (comm != nullptr) comm->sum(counts, 2);
  plan.integrals = counts[0];
  plan.cached_integrals = counts[1];
  plan.cache_bytes = st.cache_bytes;
  plan.memory_bytes = fixed + st.cache_bytes;
  if (st.cached_integrals >= st.integrals) {
    plan.storage = "semi-direct";
    plan.reason = fmt::format("all {:.3g} integrals kept in memory", st.integrals);
  } else if (st.cached_integrals == 0) {
    plan.storage = "direct";
    plan.reason = fmt::format("no memory left for the {:.3g} integrals; each build computes them", st.integrals);
  } else {
    plan.storage = "semi-direct";
    plan.reason = fmt::format("{:.3g} of {:.3g} integrals kept in memory, the rest computed each build",
                              st.cached_integrals, st.integrals);
  }
  return jk;
}

}  // namespace dfmp2::chem
