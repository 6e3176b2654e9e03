#include "chem/dfmp2.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::ConstMatrixView;
using linalg::Index;
using linalg::Matrix;
using linalg::MatrixView;
using linalg::Stopwatch;
using linalg::Trans;
using linalg::Vector;

namespace {

constexpr double kDouble = sizeof(double);

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(1 << 30)); }

}  // namespace

BlockPlan plan_blocks(ThreeIndexForm form, Index nbf, Index nocc, Index nact, Index nvir, Index naux,
                      double memory_bytes) {
  BlockPlan plan;
  const double fitted = kDouble * double(nact) * double(nvir) * double(naux);
  plan.fixed_bytes = fitted + kDouble * double(naux) * double(naux) + kDouble * double(nbf) * double(nact + nvir);
  // Per auxiliary function in the transformation: the AO block and its half-transformed copy, or the MO block
  // as stored (all occupied orbitals, before the frozen core is dropped).
  const double per_aux = form == ThreeIndexForm::ao ? kDouble * double(nbf) * double(nbf + nact)
                                                    : kDouble * double(nocc) * double(nvir);
  const double pair_min = kDouble * double(nvir) * double(nvir);
  const double available = memory_bytes - plan.fixed_bytes;
  const double needed_min = plan.fixed_bytes + std::max(per_aux, pair_min);
  if (available < std::max(per_aux, pair_min)) {
    throw ResourceError(fmt::format(
        "memory: {} is too small for this calculation; it needs at least {} (fitted tensor {}, metric {}), "
        "raise 'memory'",
        gib(memory_bytes), gib(needed_min), gib(fitted), gib(kDouble * double(naux) * double(naux))));
  }
  plan.aux_block = std::clamp<Index>(static_cast<Index>(available / per_aux), 1, std::max<Index>(naux, 1));
  const double max_rows = std::sqrt(available / kDouble);
  plan.occupied_block = std::clamp<Index>(static_cast<Index>(max_rows / double(std::max<Index>(nvir, 1))), 1,
                                          std::max<Index>(nact, 1));
  const double transform = per_aux * double(plan.aux_block);
  const double pair = kDouble * std::pow(double(plan.occupied_block) * double(nvir), 2);
  plan.peak_bytes = plan.fixed_bytes + std::max(transform, pair);
  return plan;
}

std::vector<OccupiedBlockPair> occupied_block_pairs(Index nact, Index block) {
  std::vector<OccupiedBlockPair> pairs;
  for (Index i0 = 0; i0 < nact; i0 += block) {
    for (Index j0 = 0; j0 <= i0; j0 += block) {
      pairs.push_back({i0, std::min(i0 + block, nact), j0, std::min(j0 + block, nact)});
    }
  }
  return pairs;
}

Matrix fitted_3index(const DfMp2Input& in, const DfMp2Options& options, const BlockPlan& plan,
                     linalg::Kernels& kernels) {
  const ThreeIndexSource& source = *in.three_index;
  const Index nocc = in.nocc;
  const Index nmo = in.orbital_energies->size();
  const Index nvir = nmo - nocc;
  const Index nfrozen = options.nfrozen;
  const Index nact = nocc - nfrozen;
  const Index naux = source.naux();

  // 1. metric: J = L L^T
  Matrix factor = *in.metric;
  try {
    kernels.cholesky("metric", linalg::Uplo::lower, linalg::view(factor));
  } catch (const NumericalError& e) {
    throw NumericalError(fmt::format("metric (P|Q): {}; the auxiliary basis is linearly dependent", e.what()));
  }

  // 2. AO -> MO transformation, one block of auxiliary functions at a time.
  Matrix fitted(nact * nvir, naux);
  std::vector<double> buffer;
  std::vector<double> half;  // (i | P m) for one block, nact x (nbf * block)
  for (Index p0 = 0; p0 < naux; p0 += plan.aux_block) {
    const Index np = std::min(plan.aux_block, naux - p0);
    double* out = fitted.data() + p0 * nact * nvir;
    const bool direct = source.form() == ThreeIndexForm::mo && nfrozen == 0;  // file order is already B's order
    Stopwatch read_clock;
    if (direct) {
      source.read_block(p0, np, out);
    } else {
      buffer.resize(static_cast<std::size_t>(np * source.block_stride()));
      source.read_block(p0, np, buffer.data());
    }
    const double stored = kDouble * double(np) * double(source.block_stride());
    kernels.record_host("transform", "read_3index", read_clock.seconds(), {0, stored});

    if (source.form() == ThreeIndexForm::mo) {
      if (!direct) {
        for (Index p = 0; p < np; ++p) {
          std::copy_n(buffer.data() + p * source.block_stride() + nfrozen * nvir, nact * nvir, out + p * nact * nvir);
        }
      }
      continue;
    }
    const Matrix& c = *in.mo_coefficients;
    const Index nbf = c.rows();
    const ConstMatrixView c_act{c.data() + nbf * nfrozen, nbf, nact, nbf};
    const ConstMatrixView c_vir{c.data() + nbf * nocc, nbf, nvir, nbf};
    // (P|mn) as an nbf x (nbf*np) matrix: rows n, columns m + nbf*P.
    const ConstMatrixView ao{buffer.data(), nbf, nbf * np, nbf};
    half.resize(static_cast<std::size_t>(nact * nbf * np));
    const MatrixView half_view{half.data(), nact, nbf * np, nact};
    kernels.gemm("transform", Trans::yes, Trans::no, 1.0, c_act, ao, 0.0, half_view);
    // For each P: A_P (nvir x nact, column P of `fitted`) = C_vir^T (i|P m)^T.
    kernels.gemm_batched("transform", Trans::yes, Trans::yes, np, {0, nact * nbf, nact * nvir}, 1.0, c_vir,
                         ConstMatrixView{half.data(), nact, nbf, nact}, 0.0, MatrixView{out, nvir, nact, nvir});
  }

  // 3. fitting: B = A L^-T
  kernels.trsm("fitting", linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
               linalg::view(factor), linalg::view(fitted));
  return fitted;
}

PairEnergy block_pair_energy(const OccupiedBlockPair& pair, const Matrix& fitted, const Vector& eps_occ,
                             const Vector& eps_vir, linalg::Kernels& kernels, Matrix& workspace) {
  const Index nvir = eps_vir.size();
  const Index naux = fitted.cols();
  const Index ni = pair.i1 - pair.i0, nj = pair.j1 - pair.j0;
  const ConstMatrixView b = linalg::view(fitted);
  const ConstMatrixView b_i = b.block(pair.i0 * nvir, 0, ni * nvir, naux);
  if (workspace.rows() < ni * nvir || workspace.cols() < nj * nvir) workspace.resize(ni * nvir, nj * nvir);
  const MatrixView g{workspace.data(), ni * nvir, nj * nvir, workspace.rows()};
  if (pair.diagonal()) {
    // (ia|jb) for i >= j is the lower triangle of B_I B_I^T: half the work of a GEMM.
    kernels.syrk("pair_energy", linalg::Uplo::lower, Trans::no, 1.0, b_i, 0.0, g);
  } else {
    kernels.gemm("pair_energy", Trans::no, Trans::yes, 1.0, b_i, b.block(pair.j0 * nvir, 0, nj * nvir, naux), 0.0, g);
  }

  Stopwatch reduce_clock;
  double os = 0, ss = 0;
  const Index npairs = ni * nj;
#pragma omp parallel for schedule(dynamic) reduction(+ : os, ss)
  for (Index ij = 0; ij < npairs; ++ij) {
    const Index li = ij / nj, lj = ij % nj;
    if (pair.diagonal() && lj > li) continue;
    const double eij = eps_occ[pair.i0 + li] + eps_occ[pair.j0 + lj];
    const double* gij = &g(nvir * li, nvir * lj);
    const Index ld = g.ld;
    double pair_os = 0, pair_ss = 0;
    if (pair.diagonal() && li == lj) {
      // i == j: (ia|ib) is symmetric, so the same-spin term vanishes; only the lower triangle a >= b is stored.
      for (Index b_ = 0; b_ < nvir; ++b_) {
        const double t = gij[b_ + b_ * ld];
        pair_os += t * t / (eij - 2.0 * eps_vir[b_]);
        for (Index a = b_ + 1; a < nvir; ++a) {
          const double v = gij[a + b_ * ld];
          pair_os += 2.0 * v * v / (eij - eps_vir[a] - eps_vir[b_]);
        }
      }
      os += pair_os;
    } else {
      for (Index b_ = 0; b_ < nvir; ++b_) {
        for (Index a = 0; a < nvir; ++a) {
          const double v = gij[a + b_ * ld];       // (ia|jb)
          const double exch = gij[b_ + a * ld];    // (ib|ja)
          const double inv_d = 1.0 / (eij - eps_vir[a] - eps_vir[b_]);
          pair_os += v * v * inv_d;
          pair_ss += v * (v - exch) * inv_d;
        }
      }
      // i != j also stands for the (j, i) pair.
      os += 2.0 * pair_os;
      ss += 2.0 * pair_ss;
    }
  }
  const double elements = double(ni) * double(nj) * double(nvir) * double(nvir) * (pair.diagonal() ? 0.5 : 1.0);
  kernels.record_host("pair_energy", "pair_reduce", reduce_clock.seconds(), {7.0 * elements, 16.0 * elements});
  return {os, ss};
}

DfMp2Result run_dfmp2(const DfMp2Input& in, const DfMp2Options& options, linalg::Kernels& kernels) {
  const Vector& eps = *in.orbital_energies;
  const Index nmo = eps.size(), nocc = in.nocc, nvir = nmo - nocc;
  if (options.nfrozen < 0 || options.nfrozen >= nocc) {
    throw std::logic_error(fmt::format("run_dfmp2: nfrozen {} outside 0..{}", options.nfrozen, nocc - 1));
  }
  const Index nact = nocc - options.nfrozen;
  const Vector eps_occ = eps.segment(options.nfrozen, nact);
  const Vector eps_vir = eps.tail(nvir);
  // MP2 denominators must stay negative; a HOMO at or above the LUMO means the orbitals are not a valid
  // closed-shell reference (or not sorted), and the energy would be meaningless.
  if (eps_occ.maxCoeff() >= eps_vir.minCoeff()) {
    throw NumericalError(fmt::format(
        "orbital energies: highest occupied ({:.6f}) is not below lowest virtual ({:.6f}); MP2 denominators "
        "would vanish",
        eps_occ.maxCoeff(), eps_vir.minCoeff()));
  }

  DfMp2Result result;
  result.nfrozen = options.nfrozen;
  result.nact = nact;
  result.nvir = nvir;
  result.naux = in.three_index->naux();
  const bool ao = in.three_index->form() == ThreeIndexForm::ao;
  if (ao && in.mo_coefficients == nullptr) throw std::logic_error("run_dfmp2: AO-form integrals need MO coefficients");
  const Index nbf = ao ? in.mo_coefficients->rows() : 0;
  result.plan = plan_blocks(in.three_index->form(), nbf, nocc, nact, nvir, result.naux, options.memory_bytes);

  const Matrix fitted = fitted_3index(in, options, result.plan, kernels);

  const auto pairs = occupied_block_pairs(nact, result.plan.occupied_block);
  result.block_pairs = static_cast<Index>(pairs.size());
  Matrix workspace;
  PairEnergy total;
  for (const auto& pair : pairs) total += block_pair_energy(pair, fitted, eps_occ, eps_vir, kernels, workspace);
  result.opposite_spin = total.opposite_spin;
  result.same_spin = total.same_spin;
  return result;
}

}  // namespace dfmp2::chem
