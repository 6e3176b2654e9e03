// The DF-MP2 gradient's three-index tensors by block of active occupied orbitals (gradient_detail.hpp), and the plan
// that sizes those blocks within `memory` (dfmp2_gradient.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "chem/gradient/gradient_detail.hpp"
#include "chem/integrals/integrals.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

namespace gradient_detail {

using linalg::ConstMatrixView;
using linalg::Diag;
using linalg::MatrixView;
using linalg::Side;
using linalg::Trans;
using linalg::Uplo;

std::vector<std::pair<Index, Index>> active_blocks(Index nactive, Index block) {
  std::vector<std::pair<Index, Index>> out;
  if (nactive == 0) return out;
  if (block <= 0) block = nactive;
  // As even as the block size allows: the blocks' sizes differ by one at most.
  const Index count = (nactive + block - 1) / block;
  for (Index b = 0; b < count; ++b) out.emplace_back(b * nactive / count, (b + 1) * nactive / count);
  return out;
}

std::unique_ptr<Store> make_store(const std::vector<std::pair<Index, Index>>& blocks, Index per_orbital, Index naux,
                                  const std::string* scratch_folder, const std::string& what) {
  std::vector<Index> ids, rows;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    ids.push_back(static_cast<Index>(b));
    rows.push_back((blocks[b].second - blocks[b].first) * per_orbital);
  }
  return std::make_unique<Store>(ids, rows, naux, scratch_folder, what);
}

void Ranks::sum(double* data, Index count) const {
  if (size() > 1) comm->sum(data, static_cast<std::size_t>(count));
}

void Ranks::broadcast(double* data, Index count, int from) const {
  if (size() > 1) comm->broadcast(data, sizeof(double) * static_cast<std::size_t>(count), from);
}

void Ranks::share_block(Store& store, Index b, std::vector<double>& buffer) const {
  if (size() == 1) return;
  const Index count = store.rows(b) * store.cols();
  if (store.in_memory()) return broadcast(store.data(b), count, owner(b));
  buffer.resize(static_cast<std::size_t>(count));
  checked([&] {
    if (mine(b)) store.read(b, buffer.data());
  });
  broadcast(buffer.data(), count, owner(b));
  checked([&] {
    if (!mine(b)) store.write(b, buffer.data());
  });
}

void update_blocks(Store& store, Index count, const std::function<void(MatrixView)>& update, const Ranks& ranks) {
  std::vector<double> buffer;
  for (Index b = 0; b < count; ++b) {
    ranks.checked([&] {
      if (!ranks.mine(b)) return;
      if (store.in_memory()) return update(store.view(b));
      store.block(b, buffer);
      update(MatrixView{buffer.data(), store.rows(b), store.cols(), store.rows(b)});
      store.write(b, buffer.data());
    });
    ranks.share_block(store, b, buffer);  // the update's buffer: no second block held
  }
}

namespace {

const std::string* folder_of(const DfMp2GradientPlan& plan, const std::string& folder) {
  return plan.on_scratch ? &folder : nullptr;
}

// Each block's rows A (one per (i a), a column per auxiliary function) to A L^-T.
void fit_rows(Store& store, Index count, const Matrix& factor, const Ranks& ranks, Kernels& kernels) {
  update_blocks(store, count, [&](MatrixView rows) {
    kernels.trsm(kStep, Side::right, Uplo::lower, Trans::yes, Diag::non_unit, 1.0, linalg::view(factor), rows);
  }, ranks);
}

}  // namespace

FittedIntegrals fitted_integrals(const BasisSet& ri, const BasisSet& basis, const Spaces& s,
                                 const DfMp2GradientPlan& plan, const std::string& scratch_folder, const Ranks& ranks,
                                 Kernels& kernels) {
  FittedIntegrals f;
  f.factor = coulomb_metric(ri);  // then its Cholesky factor L, in the lower triangle (the solves read only that)
  try {
    kernels.cholesky(kStep, Uplo::lower, linalg::view(f.factor));
  } catch (const NumericalError& e) {
    throw NumericalError(fmt::format("DF-MP2 gradient: the RI metric of '{}': {}", ri.name, e.what()));
  }
  const Index naux = f.factor.rows(), nbf = basis.nbf(), na = s.na, nv = s.nv, no = s.no;
  f.blocks = active_blocks(na, plan.occupied_block);
  ranks.checked([&] {
    f.ov = make_store(f.blocks, nv, naux, folder_of(plan, scratch_folder), ranks.file_name("mp2-gradient-ov"));
    f.oo = make_store(f.blocks, no, naux, folder_of(plan, scratch_folder), ranks.file_name("mp2-gradient-oo"));
  });
  const ThreeCenterEngine engine(ri, basis);
  std::vector<double> block;
  const auto ranges = engine.blocks(plan.aux_block);
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const Index p0 = ranges[r].first, np = ranges[r].second - ranges[r].first;
    Matrix ai(nv * na, np), ij(no * na, np);
    // Each block of auxiliary functions transformed by one rank, then sent to the others.
    ranks.checked([&] {
      if (!ranks.mine(Index(r))) return;
      block.resize(static_cast<std::size_t>(np * nbf * nbf));
      engine.compute_square(p0, p0 + np, block.data());
      // The block's (P|mn) side by side are nbf x (nbf np); symmetric in m and n, so (P|mn) C_o for every P of the
      // block is one GEMM with the block transposed: `half`, (nbf np) x no, row P nbf + n.
      Matrix half(nbf * np, no);
      kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{block.data(), nbf, nbf * np, nbf},
                           linalg::view(s.c_occ), 0.0, linalg::view(half));
      // Then C_v^T and C_o^T times each P's nbf rows of its active columns, batched: (P|ia) as nv x na and (P|ji)
      // as no x na per P, which are the rows (i a) and (i j) of the stores' column P.
      const ConstMatrixView half_p{half.data() + s.nf * nbf * np, nbf, na, nbf * np};
      kernels.gemm_batched<double>(kStep, Trans::yes, Trans::no, np, {0, nbf, nv * na}, 1.0, linalg::view(s.c_vir),
                                   half_p, 0.0, MatrixView{ai.data(), nv, na, nv});
      kernels.gemm_batched<double>(kStep, Trans::yes, Trans::no, np, {0, nbf, no * na}, 1.0, linalg::view(s.c_occ),
                                   half_p, 0.0, MatrixView{ij.data(), no, na, no});
    });
    ranks.broadcast(ai.data(), ai.size(), ranks.owner(Index(r)));
    ranks.broadcast(ij.data(), ij.size(), ranks.owner(Index(r)));
    ranks.checked([&] {
      for (std::size_t b = 0; b < f.blocks.size(); ++b) {
        const Index i0 = f.blocks[b].first;
        f.ov->write_columns(static_cast<Index>(b), p0, np, ai.data() + i0 * nv, nv * na);
        f.oo->write_columns(static_cast<Index>(b), p0, np, ij.data() + i0 * no, no * na);
      }
    });
  }
  const auto count = static_cast<Index>(f.blocks.size());
  fit_rows(*f.ov, count, f.factor, ranks, kernels);
  fit_rows(*f.oo, count, f.factor, ranks, kernels);
  return f;
}

namespace {

// f(a, b) for every a, b < n, tile by tile (32 x 32): a loop that also reads element (b, a) of an n x n matrix
// then finds it in cache (reading it row by row took a new cache line for every element).
template <class F>
void for_tiles(Index n, const F& f) {
  constexpr Index kTile = 32;
  for (Index b0 = 0; b0 < n; b0 += kTile)
    for (Index a0 = 0; a0 < n; a0 += kTile)
      for (Index b = b0; b < std::min(b0 + kTile, n); ++b)
        for (Index a = a0; a < std::min(a0 + kTile, n); ++a) f(a, b);
}

// One pair's amplitudes from its integrals kt = (ka|ib) at a + nv b and the denominators' occupied part e_ki:
// t_ki^ab into t, T_ki^ab = 2 t^ab - t^ba over kt, the pair's opposite- and same-spin energies added to os and ss.
void pair_amplitudes(double* kt, double* t, double e_ki, const Vector& e_vir, double& os, double& ss) {
  const Index nv = e_vir.size();
  for (Index b = 0; b < nv; ++b)
    for (Index a = 0; a < nv; ++a) t[b * nv + a] = kt[b * nv + a] / (e_ki - e_vir(a) - e_vir(b));
  for_tiles(nv, [&](Index a, Index b) {
    const double kab = kt[b * nv + a], tab = t[b * nv + a], tba = t[a * nv + b];
    kt[b * nv + a] = 2.0 * tab - tba;
    os += kab * tab;
    ss += kab * (tab - tba);
  });
}

// The pair integrals (ka|ib) of row k with a block of i (from i0; B_I's rows (i b), its leading dimension) into
// `tile` at a + nv (i nv + b): one GEMM B_k B_I^T; or, keeping them, the GEMM for i >= k only, the i < k taken
// transposed from row i ((ka|ib) = (ib|ka)), the i > k kept for their own rows (na (na - 1) / 2 nv^2 doubles).
class PairIntegrals {
 public:
  PairIntegrals(bool keep, const Ranks& ranks, Index na, Index nv)
      : keep_(keep), na_(na), nv_(nv), kept_(keep ? static_cast<std::size_t>(na * (na - 1) / 2 * nv * nv) : 0) {
    if (keep && ranks.size() > 1) throw std::logic_error("PairIntegrals: rows k and i on different ranks");
  }

  void tile(Index k, Index i0, ConstMatrixView b_k, ConstMatrixView b_I, double* tile, Kernels& kernels) {
    const Index nv = nv_, ni = b_I.rows / nv;
    const Index computed = keep_ ? std::clamp<Index>(k - i0, 0, ni) : 0;  // the first i >= k
    if (computed < ni) {
      const Index skip = computed * nv;
      kernels.gemm(kStep, Trans::no, Trans::yes, 1.0, b_k,
                   ConstMatrixView{b_I.data + skip, b_I.rows - skip, b_I.cols, b_I.ld}, 0.0,
                   MatrixView{tile + skip * nv, nv, b_I.rows - skip, nv});
    }
    if (!keep_) return;
#pragma omp parallel for
    for (Index i = 0; i < ni; ++i) {
      double* kt = tile + i * nv * nv;
      if (i < computed) {
        const double* mirror = kept(i0 + i, k);  // (ib|ka) at b + nv a
        for_tiles(nv, [&](Index a, Index b) { kt[b * nv + a] = mirror[a * nv + b]; });
      } else if (i0 + i > k) {
        std::copy_n(kt, nv * nv, kept(k, i0 + i));
      }
    }
  }

 private:
  double* kept(Index k, Index i) {  // (ka|ib) of k < i at a + nv b
    return kept_.data() + ((k * (2 * na_ - k - 1)) / 2 + (i - k - 1)) * nv_ * nv_;
  }
  bool keep_;
  Index na_, nv_;
  std::vector<double> kept_;
};

}  // namespace

// For each active k (a block K of them at a time, its rows of B, B_oo and G held), the pair amplitudes with every
// active i, block I by block I as the store streams them: t_ki^ab in t_row(a, i nv + b), kept for the whole row
// since P_ij pairs t_ki with T_kj across blocks; T_ki^ab = 2 t_ki^ab - t_ki^ba in `tile` for block I only. Then
// E = sum (ka|ib) T_ki^ab, P_ab = 2 sum t_ki^ac T_ki^bc, P_ij = -2 sum t_ki^ab T_kj^ab, G_ka^Q = sum T_ki^ab B_ib^Q.
// With the plan's keep_pair_integrals, row k computes (ka|ib) for i >= k only and keeps those with i > k; row i
// takes (ia|kb) = (kb|ia) for k < i from there, transposed.
AmplitudePass amplitude_pass(FittedIntegrals& f, const Spaces& s, const DfMp2GradientPlan& plan,
                             const std::string& scratch_folder, const Ranks& ranks, Kernels& kernels) {
  const Index naux = f.factor.rows(), na = s.na, nv = s.nv, no = s.no;
  AmplitudePass out;
  out.p_oo = Matrix::Zero(na, na);
  out.p_vv = Matrix::Zero(nv, nv);
  out.y_vv = Matrix::Zero(nv, nv);
  out.y_ov = Matrix::Zero(no, nv);
  out.v = Matrix::Zero(naux, naux);
  ranks.checked([&] {
    out.gamma = make_store(f.blocks, nv, naux, folder_of(plan, scratch_folder), ranks.file_name("mp2-gradient-gamma"));
  });
  const Vector e_act = s.e.segment(s.nf, na), e_vir = s.e.tail(nv);
  Index largest = 0;
  std::vector<Index> order;
  for (std::size_t b = 0; b < f.blocks.size(); ++b) {
    largest = std::max(largest, f.blocks[b].second - f.blocks[b].first);
    order.push_back(static_cast<Index>(b));
  }
  Matrix t_row(nv, na * nv), tile(nv, largest * nv), g;
  std::vector<double> ov_buffer, oo_buffer;
  PairIntegrals pairs(plan.keep_pair_integrals, ranks, na, nv);
  for (const Index K : order) {
    const Index k0 = f.blocks[static_cast<std::size_t>(K)].first, nk = f.ov->rows(K) / nv;
    const Index rows = nk * nv;
    const double* b_K = nullptr;
    g.setZero(rows, naux);  // G's rows (k a) of block K
    ranks.checked([&] {
      b_K = f.ov->block(K, ov_buffer);
      const double* oo_K = f.oo->block(K, oo_buffer);
      for (Index kk = 0; kk < nk; ++kk) {
        const Index k = k0 + kk;
        if (!ranks.mine(k)) continue;  // the orbitals k are dealt to the ranks in turn
        const ConstMatrixView b_k{b_K + kk * nv, nv, naux, rows};
        const MatrixView g_k{g.data() + kk * nv, nv, naux, rows};
        f.ov->for_each(order, [&](Index I, const double* b_I) {
          const Index i0 = f.blocks[static_cast<std::size_t>(I)].first, cols = f.ov->rows(I), ni = cols / nv;
          const ConstMatrixView b_i{b_I, cols, naux, cols};
          pairs.tile(k, i0, b_k, b_i, tile.data(), kernels);
          double os = 0, ss = 0;
  #pragma omp parallel for reduction(+ : os, ss)
          for (Index i = 0; i < ni; ++i) {
            pair_amplitudes(tile.data() + i * nv * nv, t_row.data() + (i0 + i) * nv * nv, e_act(k) + e_act(i0 + i),
                            e_vir, os, ss);
          }
          out.opposite_spin += os;
          out.same_spin += ss;
          const ConstMatrixView t_i{t_row.data() + i0 * nv * nv, nv, cols, nv}, tt_i{tile.data(), nv, cols, nv};
          kernels.gemm(kStep, Trans::no, Trans::yes, 2.0, t_i, tt_i, 1.0, linalg::view(out.p_vv));
          // P_ij for every i up to this block's end and j in it (the rest is its mirror: P_ij is symmetric).
          kernels.gemm(kStep, Trans::yes, Trans::no, -2.0, ConstMatrixView{t_row.data(), nv * nv, i0 + ni, nv * nv},
                       ConstMatrixView{tile.data(), nv * nv, ni, nv * nv}, 1.0,
                       MatrixView{out.p_oo.data() + i0 * na, i0 + ni, ni, na});
          kernels.gemm(kStep, Trans::no, Trans::no, 1.0, tt_i, b_i, 1.0, g_k);
        });
        // y_vv(b, a) = 4 sum_Q B_kb^Q G_ka^Q and y_ov(j, a) = 4 sum_Q B_kj^Q G_ka^Q, summed over k.
        kernels.gemm(kStep, Trans::no, Trans::yes, 4.0, b_k, ConstMatrixView(g_k), 1.0, linalg::view(out.y_vv));
        kernels.gemm(kStep, Trans::no, Trans::yes, 4.0, ConstMatrixView{oo_K + kk * no, no, naux, nk * no},
                     ConstMatrixView(g_k), 1.0, linalg::view(out.y_ov));
      }
    });
    // G's rows of every rank's k; then, by the block's owner, the metric's V = sum_ka B_ka G_ka^T and Gamma = G L^-1
    // for the AO passes, sent to the other ranks.
    ranks.sum(g);
    ranks.checked([&] {
      if (!ranks.mine(K)) return;
      kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{b_K, rows, naux, rows}, linalg::view(g), 1.0,
                   linalg::view(out.v));
      kernels.trsm(kStep, Side::right, Uplo::lower, Trans::no, Diag::non_unit, 1.0, linalg::view(f.factor),
                   linalg::view(g));
    });
    // Gamma's block from its owner to the others, through G's own rows (nothing more held, nothing read back).
    ranks.broadcast(g.data(), g.size(), ranks.owner(K));
    ranks.checked([&] { out.gamma->write(K, g.data()); });
  }
  for (double* x : {&out.opposite_spin, &out.same_spin}) ranks.sum(x, 1);
  for (Matrix* m : {&out.p_oo, &out.p_vv, &out.y_vv, &out.y_ov, &out.v}) ranks.sum(*m);
  f.ov.reset();
  f.oo.reset();
  for (std::size_t J = 0; J < f.blocks.size(); ++J)  // the lower blocks from the upper ones
    for (Index j = f.blocks[J].first; j < f.blocks[J].second; ++j)
      for (Index i = f.blocks[J].second; i < na; ++i) out.p_oo(i, j) = out.p_oo(j, i);
  out.v = 0.5 * (out.v + out.v.transpose()).eval();
  kernels.trsm(kStep, Side::left, Uplo::lower, Trans::yes, Diag::non_unit, 1.0, linalg::view(f.factor),
               linalg::view(out.v));
  kernels.trsm(kStep, Side::right, Uplo::lower, Trans::no, Diag::non_unit, 1.0, linalg::view(f.factor),
               linalg::view(out.v));
  return out;
}

}  // namespace gradient_detail

using linalg::Index;

namespace {

// The gradient's peak (bytes) with blocks of `n` active orbitals and AO blocks of `m` auxiliary functions, its
// three-index tensors in memory or on scratch; the passes run one after another, each beside what it keeps.
struct GradientBytes {
  double peak = 0, scratch = 0;
};

GradientBytes gradient_bytes(const DfMp2GradientSizes& z, double n, double m, bool scratch, RotationProducts kept,
                             bool keep_pairs) {
  const double nbf = double(z.nbf), no = double(z.nocc), na = double(z.nocc - z.nfrozen), nv = double(z.nbf - z.nocc);
  const double naux = double(z.naux);
  const double ov = naux * na * nv, oo = naux * na * no;  // B and Gamma; B_oo
  const double in_memory = scratch ? 0.0 : 1.0;
  // Matrices of nbf^2 (orbitals, X, densities, W and their AO forms) and of naux^2 (the metric's factor, V).
  const double fixed = 14.0 * nbf * nbf + 2.0 * naux * naux;
  // The AO block (P|mn) and its products: half-transformed rows, (P|ia) and (P|ji); or Gamma^P's slab and
  // C_v Gamma^P twice (side by side, then stacked).
  const double ao = m * nbf * nbf + std::max(m * nbf * no + m * na * (nv + no), m * na * nv + 2.0 * m * nbf * na);
  const double transform = in_memory * (ov + oo) + ao + (scratch ? n * std::max(nv, no) * naux : 0.0);
  // The amplitudes: t for one k with every i, T for one block, the block's rows of B, B_oo and G (B and B_oo read
  // from scratch, and the next block of B read while one is used).
  const double pairs = keep_pairs ? 0.5 * na * (na - 1.0) * nv * nv : 0.0;
  const double pass = na * nv * nv + n * nv * nv + n * nv * naux + pairs +
                      (scratch ? n * (nv + no) * naux + 2.0 * n * nv * naux : in_memory * (2.0 * ov + oo));
  // The three-index derivatives: on each thread one auxiliary shell's density and Gamma slab.
  const double shell = double(std::max<Index>(z.largest_aux_shell, 1));
  const double derivative = double(z.threads) * (shell * (2.0 * nbf * nbf + na * nv) + 2.0 * nbf * nbf);
  const double gamma_held = in_memory * ov + ao;
  // The Z-vector: with a DF-SCF, its fitting basis's integrals in the orbitals' basis kept across its iterations,
  // as many of them as the plan allows.
  const double naux_jk = double(z.naux_jk);
  const double zvector = rotation_products_bytes(kept, z.nbf, z.nocc, z.nbf - z.nocc, z.naux_jk) / 8.0;
  // The SCF-like separable part: its fitted half-transformed integrals H (nbf no naux_jk) by the same blocks; while
  // they are made, a block of (Q|mn) with (Q|mn) C_o twice (computed, then as columns); then one block's C_o^T H and
  // P H beside them, and on each thread a shell's slab of H and its two densities.
  const double h = nbf * no * naux_jk;
  const double separable_transform = m * nbf * nbf + 2.0 * m * nbf * no;
  const double separable = in_memory * h + (scratch ? n * nbf * naux_jk : 0.0) +
                           std::max(separable_transform, n * (nbf + no) * naux_jk +
                                                             double(z.threads) * shell * (nbf * no + 2.0 * nbf * nbf));
  GradientBytes out;
  out.peak = 8.0 * (fixed + std::max({transform, pass, gamma_held + derivative, zvector, separable}));
  out.scratch = scratch ? 8.0 * std::max(2.0 * ov + oo, h) : 0.0;
  return out;
}

}  // namespace

DfMp2GradientPlan plan_dfmp2_gradient(const DfMp2GradientSizes& z, double budget, Mp2Storage storage) {
  const Index na = z.nocc - z.nfrozen;
  // Candidate AO blocks: 64 auxiliary functions, fewer when memory is short (never below one shell).
  std::vector<Index> aux_blocks;
  for (Index m = 64; m >= 8; m /= 2) aux_blocks.push_back(std::max(m, z.largest_aux_shell));
  DfMp2GradientPlan least;
  // In memory before scratch; the Z-vector's kept products before their rebuild each iteration (each iteration
  // would pass over the J/K's tensor), the amplitude pass's kept pair integrals (a quarter of its flops) only beside
  // all of them (or with an exact SCF, whose J/K keeps nothing); then the largest blocks: the first that fits.
  const std::pair<RotationProducts, bool> kept_in_turn[] = {
      {RotationProducts::mo, true}, {RotationProducts::mo, false}, {RotationProducts::occupied, false},
      {RotationProducts::none, true}, {RotationProducts::none, false}};
  for (const bool scratch : {false, true}) {
    if ((scratch && storage == Mp2Storage::memory) || (!scratch && storage == Mp2Storage::scratch)) continue;
    for (const auto& [keep, keep_pairs] : kept_in_turn) {
      if (z.naux_jk == 0 && keep != RotationProducts::none) continue;  // an exact SCF's J/K keeps nothing
      if (keep_pairs && (z.ranks > 1 || (keep == RotationProducts::none && z.naux_jk > 0))) continue;
      // Block sizes that cut the active orbitals evenly, largest first; with several ranks, a block for each at least
      // (the blocks' fits and metric densities are dealt to the ranks by block).
      const Index fewest = std::clamp<Index>(z.ranks, 1, std::max<Index>(na, 1));
      for (Index count = fewest; count <= std::max<Index>(na, 1); ++count) {
        const Index n = std::max<Index>((na + count - 1) / count, 1);
        if (count > fewest && n == (na + count - 2) / (count - 1)) continue;  // the size of one fewer block
        for (const Index m : aux_blocks) {
          const GradientBytes bytes = gradient_bytes(z, double(n), double(m), scratch, keep, keep_pairs);
          DfMp2GradientPlan plan{n, m, scratch, keep, keep_pairs, bytes.peak, bytes.scratch, ""};
          if (least.memory_bytes == 0 || plan.memory_bytes < least.memory_bytes) least = plan;
          if (bytes.peak > budget) continue;
          plan.reason = storage != Mp2Storage::automatic ? "asked for (mp2_storage)"
                        : scratch ? "its three-index tensors do not fit in memory beside the blocks"
                                  : "its three-index tensors fit in memory";
          if (keep == RotationProducts::occupied)
            plan.reason += "; the Z-vector keeps b_oo and b_vo only (a pass over the J/K's tensor each iteration)";
          if (keep == RotationProducts::none && z.naux_jk > 0)
            plan.reason += "; the Z-vector's J/K rebuilt each iteration";
          if (keep_pairs) plan.reason += "; the pair integrals (ka|ib) kept for their mirror pairs";
          return plan;
        }
      }
    }
  }
  throw PhaseTooLarge(fmt::format("MP2 gradient ({} storage)", least.on_scratch ? "scratch" : "memory"),
                      least.memory_bytes, "the MP2 gradient's smallest blocks do not fit");
}

}  // namespace dfmp2::chem
