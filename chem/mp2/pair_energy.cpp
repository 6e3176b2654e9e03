// DF-MP2's step 4: the energy of one block pair, (ia|jb) = B_I B_J^T reduced with the orbital energies as its kind
// asks (the closed-shell formula's opposite- and same-spin parts, or the opposite-spin part of two spins' blocks).
#include "chem/mp2/dfmp2.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "chem/mp2/mp2_detail.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using namespace mp2_detail;

template <class W, class Acc>
PairEnergy block_pair_energy(const OccupiedBlockPair& pair, const MatrixT<W>& fitted, const Vector& eps_occ_in,
                             const Vector& eps_vir_in, linalg::Kernels& kernels, MatrixT<W>& workspace) {
  const Index nvir = eps_vir_in.size(), naux = fitted.cols();
  const ConstMatrixViewT<W> b = linalg::view(fitted);
  return block_pair_energy<W, Acc>(pair, b.block(pair.i0 * nvir, 0, (pair.i1 - pair.i0) * nvir, naux),
                                   b.block(pair.j0 * nvir, 0, (pair.j1 - pair.j0) * nvir, naux), eps_occ_in,
                                   eps_vir_in, kernels, workspace);
}

template <class W, class Acc>
PairEnergy block_pair_energy(const OccupiedBlockPair& pair, ConstMatrixViewT<W> b_i, ConstMatrixViewT<W> b_j,
                             const Vector& eps_occ_in, const Vector& eps_vir_in, linalg::Kernels& kernels,
                             MatrixT<W>& workspace) {
  const Index nvir = eps_vir_in.size();
  const Index ni = pair.i1 - pair.i0, nj = pair.j1 - pair.j0;
  if (workspace.rows() < ni * nvir || workspace.cols() < nj * nvir) workspace.resize(ni * nvir, nj * nvir);
  const MatrixViewT<W> g{workspace.data(), ni * nvir, nj * nvir, std::max<Index>(1, workspace.rows())};
  if (pair.diagonal()) {
    // (ia|jb) for i >= j is the lower triangle of B_I B_I^T: half the work of a GEMM.
    kernels.syrk(step_name(Mp2Step::pair_energy), linalg::Uplo::lower, Trans::no, W(1), b_i, W(0), g);
  } else {
    kernels.gemm(step_name(Mp2Step::pair_energy), Trans::no, Trans::yes, W(1), b_i, b_j, W(0), g);
  }

  Stopwatch reduce_clock;
  const VectorT<Acc> eps_occ = eps_occ_in.cast<Acc>();
  const VectorT<Acc> eps_vir = eps_vir_in.cast<Acc>();
  // One value per orbital pair (i, j), summed afterwards in pair order: the energy is bitwise the same for any
  // number of threads and any schedule (an OpenMP reduction adds the threads' partial sums in whatever order they
  // finish), which the MPI distribution needs for any number of ranks too.
  const Index npairs = ni * nj;
  std::vector<Acc> per_pair_os(static_cast<std::size_t>(npairs), Acc(0)), per_pair_ss(per_pair_os.size(), Acc(0));
#pragma omp parallel for schedule(dynamic)
  for (Index ij = 0; ij < npairs; ++ij) {
    const Index li = ij / nj, lj = ij % nj;
    if (pair.diagonal() && lj > li) continue;
    Acc& os = per_pair_os[static_cast<std::size_t>(ij)];
    Acc& ss = per_pair_ss[static_cast<std::size_t>(ij)];
    const Acc eij = eps_occ[pair.i0 + li] + eps_occ[pair.j0 + lj];
    const W* gij = &g(nvir * li, nvir * lj);
    const Index ld = g.ld;
    Acc pair_os = 0, pair_ss = 0;
    if (pair.diagonal() && li == lj) {
      // i == j: (ia|ib) is symmetric, so the same-spin term vanishes; only the lower triangle a >= b is stored.
      for (Index b_ = 0; b_ < nvir; ++b_) {
        const Acc t = gij[b_ + b_ * ld];
        pair_os += t * t / (eij - Acc(2) * eps_vir[b_]);
        for (Index a = b_ + 1; a < nvir; ++a) {
          const Acc v = gij[a + b_ * ld];
          pair_os += Acc(2) * v * v / (eij - eps_vir[a] - eps_vir[b_]);
        }
      }
      os += pair_os;
    } else {
      // In tiles of kTile x kTile: the exchange integrals (ib|ja) of a tile are the transposed tile, copied once so
      // that both are read along a (a strided read per element cost half the reduction's time).
      constexpr Index kTile = 64;
      W exch_tile[kTile * kTile];
      for (Index b0 = 0; b0 < nvir; b0 += kTile) {
        const Index nb = std::min(kTile, nvir - b0);
        for (Index a0 = 0; a0 < nvir; a0 += kTile) {
          const Index na = std::min(kTile, nvir - a0);
          for (Index a = 0; a < na; ++a)
            for (Index b_ = 0; b_ < nb; ++b_) exch_tile[a + b_ * kTile] = gij[(b0 + b_) + (a0 + a) * ld];
          for (Index b_ = 0; b_ < nb; ++b_) {
            const W* v_col = gij + a0 + (b0 + b_) * ld;  // (ia|jb) over a
            const W* x_col = exch_tile + b_ * kTile;     // (ib|ja) over a
            const Acc e_b = eij - eps_vir[b0 + b_];
            Acc tile_os = 0, tile_ss = 0;
#pragma omp simd reduction(+ : tile_os, tile_ss)
            for (Index a = 0; a < na; ++a) {
              const Acc v = v_col[a], exch = x_col[a];
              const Acc inv_d = Acc(1) / (e_b - eps_vir[a0 + a]);
              tile_os += v * v * inv_d;
              tile_ss += v * (v - exch) * inv_d;
            }
            pair_os += tile_os;
            pair_ss += tile_ss;
          }
        }
      }
      // i != j also stands for the (j, i) pair.
      os += Acc(2) * pair_os;
      ss += Acc(2) * pair_ss;
    }
  }
  Acc os = 0, ss = 0;
  for (Index ij = 0; ij < npairs; ++ij) {
    os += per_pair_os[static_cast<std::size_t>(ij)];
    ss += per_pair_ss[static_cast<std::size_t>(ij)];
  }
  const double elements = double(ni) * double(nj) * double(nvir) * double(nvir) * (pair.diagonal() ? 0.5 : 1.0);
  kernels.record_host(step_name(Mp2Step::pair_energy), kPairReduceKernel, reduce_clock.seconds(),
                      {7.0 * elements, 2.0 * sizeof(W) * elements}, dtype<Acc>());
  return {double(os), double(ss)};
}

template <class W, class Acc>
double opposite_spin_pair_energy(const OccupiedBlockPair& pair, ConstMatrixViewT<W> b_i, ConstMatrixViewT<W> b_j,
                                 const Vector& eps_occ_i_in, const Vector& eps_vir_i_in, const Vector& eps_occ_j_in,
                                 const Vector& eps_vir_j_in, linalg::Kernels& kernels, MatrixT<W>& workspace) {
  const Index nvir_i = eps_vir_i_in.size(), nvir_j = eps_vir_j_in.size();
  const Index ni = pair.i1 - pair.i0, nj = pair.j1 - pair.j0;
  if (workspace.rows() < ni * nvir_i || workspace.cols() < nj * nvir_j) workspace.resize(ni * nvir_i, nj * nvir_j);
  const MatrixViewT<W> g{workspace.data(), ni * nvir_i, nj * nvir_j, std::max<Index>(1, workspace.rows())};
  kernels.gemm(step_name(Mp2Step::pair_energy), Trans::no, Trans::yes, W(1), b_i, b_j, W(0), g);

  Stopwatch reduce_clock;
  const VectorT<Acc> eps_occ_i = eps_occ_i_in.cast<Acc>(), eps_vir_i = eps_vir_i_in.cast<Acc>();
  const VectorT<Acc> eps_occ_j = eps_occ_j_in.cast<Acc>(), eps_vir_j = eps_vir_j_in.cast<Acc>();
  // One value per orbital pair, summed in pair order afterwards (as block_pair_energy: the same bits for any
  // thread count). Every (i, j) is a distinct pair: no symmetry to fold.
  const Index npairs = ni * nj;
  std::vector<Acc> per_pair(static_cast<std::size_t>(npairs), Acc(0));
#pragma omp parallel for schedule(dynamic)
  for (Index ij = 0; ij < npairs; ++ij) {
    const Index li = ij / nj, lj = ij % nj;
    const Acc eij = eps_occ_i[pair.i0 + li] + eps_occ_j[pair.j0 + lj];
    const W* gij = &g(nvir_i * li, nvir_j * lj);
    Acc e = 0;
    for (Index b = 0; b < nvir_j; ++b) {
      const W* v_col = gij + b * g.ld;  // (ia|jb) over a
      const Acc e_b = eij - eps_vir_j[b];
      Acc col = 0;
#pragma omp simd reduction(+ : col)
      for (Index a = 0; a < nvir_i; ++a) {
        const Acc v = v_col[a];
        col += v * v / (e_b - eps_vir_i[a]);
      }
      e += col;
    }
    per_pair[static_cast<std::size_t>(ij)] = e;
  }
  Acc os = 0;
  for (const Acc e : per_pair) os += e;
  const double elements = double(ni) * double(nj) * double(nvir_i) * double(nvir_j);
  kernels.record_host(step_name(Mp2Step::pair_energy), kPairReduceKernel, reduce_clock.seconds(),
                      {4.0 * elements, sizeof(W) * elements}, dtype<Acc>());
  return double(os);
}

template double opposite_spin_pair_energy<double, double>(const OccupiedBlockPair&, linalg::ConstMatrixView,
                                                          linalg::ConstMatrixView, const Vector&, const Vector&,
                                                          const Vector&, const Vector&, linalg::Kernels&, Matrix&);
template double opposite_spin_pair_energy<float, double>(const OccupiedBlockPair&, linalg::ConstMatrixViewF,
                                                         linalg::ConstMatrixViewF, const Vector&, const Vector&,
                                                         const Vector&, const Vector&, linalg::Kernels&,
                                                         linalg::MatrixF&);
template double opposite_spin_pair_energy<float, float>(const OccupiedBlockPair&, linalg::ConstMatrixViewF,
                                                        linalg::ConstMatrixViewF, const Vector&, const Vector&,
                                                        const Vector&, const Vector&, linalg::Kernels&,
                                                        linalg::MatrixF&);

template PairEnergy block_pair_energy<double, double>(const OccupiedBlockPair&, const Matrix&, const Vector&,
                                                      const Vector&, linalg::Kernels&, Matrix&);
template PairEnergy block_pair_energy<float, double>(const OccupiedBlockPair&, const linalg::MatrixF&, const Vector&,
                                                     const Vector&, linalg::Kernels&, linalg::MatrixF&);
template PairEnergy block_pair_energy<float, float>(const OccupiedBlockPair&, const linalg::MatrixF&, const Vector&,
                                                    const Vector&, linalg::Kernels&, linalg::MatrixF&);
template PairEnergy block_pair_energy<double, double>(const OccupiedBlockPair&, linalg::ConstMatrixView,
                                                      linalg::ConstMatrixView, const Vector&, const Vector&,
                                                      linalg::Kernels&, Matrix&);
template PairEnergy block_pair_energy<float, double>(const OccupiedBlockPair&, linalg::ConstMatrixViewF,
                                                     linalg::ConstMatrixViewF, const Vector&, const Vector&,
                                                     linalg::Kernels&, linalg::MatrixF&);
template PairEnergy block_pair_energy<float, float>(const OccupiedBlockPair&, linalg::ConstMatrixViewF,
                                                    linalg::ConstMatrixViewF, const Vector&, const Vector&,
                                                    linalg::Kernels&, linalg::MatrixF&);

}  // namespace dfmp2::chem
