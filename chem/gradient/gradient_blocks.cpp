// The DF-MP2 gradient's three-index tensors by block of active occupied orbitals (gradient_detail.hpp), and the plan
// that sizes those blocks within `memory` (dfmp2_gradient.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "chem/gradient/gradient_detail.hpp"
#include "chem/gradient/pair_integrals.hpp"
#include "chem/integrals/integrals.hpp"
#include "chem/scf/df_jk.hpp"
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

namespace {

const std::string* folder_of(const DfMp2GradientPlan& plan, const std::string& folder) {
  return plan.on_scratch ? &folder : nullptr;
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
  const ThreeCenterEngine engine(ri, basis);
  f.aux = aux_columns(engine.blocks(plan.aux_block), naux, ranks);
  const Index col0 = f.aux.first(ranks.rank()), cols = f.aux.count(ranks.rank());
  // This rank's auxiliary columns of every block (with one rank, the whole stores).
  const bool one = ranks.size() == 1;
  std::unique_ptr<Store> ov, oo;
  ranks.checked([&] {
    const std::string* folder = folder_of(plan, scratch_folder);
    ov = make_store(f.blocks, nv, cols, folder,
                    ranks.file_name((one ? "mp2-gradient-ov" : "mp2-gradient-ov-columns") + s.spin), nullptr, !one);
    oo = make_store(f.blocks, no, cols, folder,
                    ranks.file_name((one ? "mp2-gradient-oo" : "mp2-gradient-oo-columns") + s.spin), nullptr, !one);
    std::vector<double> block;
    for (const auto& [p0, p1] : f.aux.mine) {
      const Index np = p1 - p0;
      block.resize(static_cast<std::size_t>(np * nbf * nbf));
      engine.compute_square(p0, p1, block.data());
      // The block's (P|mn) side by side are nbf x (nbf np); symmetric in m and n, so (P|mn) C_o for every P of the
      // block is one GEMM with the block transposed: `half`, (nbf np) x no, row P nbf + n.
      Matrix half(nbf * np, no), ai(nv * na, np), ij(no * na, np);
      kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{block.data(), nbf, nbf * np, nbf},
                           linalg::view(s.c_occ), 0.0, linalg::view(half));
      // Then C_v^T and C_o^T times each P's nbf rows of its active columns, batched: (P|ia) as nv x na and (P|ji)
      // as no x na per P, which are the rows (i a) and (i j) of the stores' column P.
      const ConstMatrixView half_p{half.data() + s.nf * nbf * np, nbf, na, nbf * np};
      kernels.gemm_batched<double>(kStep, Trans::yes, Trans::no, np, {0, nbf, nv * na}, 1.0, linalg::view(s.c_vir),
                                   half_p, 0.0, MatrixView{ai.data(), nv, na, nv});
      kernels.gemm_batched<double>(kStep, Trans::yes, Trans::no, np, {0, nbf, no * na}, 1.0, linalg::view(s.c_occ),
                                   half_p, 0.0, MatrixView{ij.data(), no, na, no});
      for (std::size_t b = 0; b < f.blocks.size(); ++b) {
        const Index i0 = f.blocks[b].first;
        ov->write_columns(static_cast<Index>(b), p0 - col0, np, ai.data() + i0 * nv, nv * na);
        oo->write_columns(static_cast<Index>(b), p0 - col0, np, ij.data() + i0 * no, no * na);
      }
    }
  });
  // Each block's rows A (one per (i a), a column per auxiliary function) to A L^-T, by the rank that holds it.
  auto fit = [&](MatrixView rows) {
    kernels.trsm(kStep, Side::right, Uplo::lower, Trans::yes, Diag::non_unit, 1.0, linalg::view(f.factor), rows);
  };
  const auto count = static_cast<Index>(f.blocks.size());
  if (one) {
    update_blocks(*ov, count, fit);
    update_blocks(*oo, count, fit);
    f.ov = std::move(ov);
    f.oo = std::move(oo);
    return f;
  }
  const std::vector<Index> held = held_blocks(count, ranks);
  for (auto [columns, whole, per_orbital, what] : {std::tuple{&ov, &f.ov, nv, std::string("mp2-gradient-ov")},
                                                   std::tuple{&oo, &f.oo, no, std::string("mp2-gradient-oo")}}) {
    ranks.checked([&] {
      *whole = make_store(f.blocks, per_orbital, naux, folder_of(plan, scratch_folder), ranks.file_name(what + s.spin),
                          &held, true);
    });
    columns_to_blocks(**columns, f.aux, **whole, fit, ranks);
    columns->reset();
  }
  return f;
}

namespace {

// What a pair's T is made of (T^ab = direct t^ab - exchange t^ba) and how its energies count. Closed shell: the
// pairs of the one set of orbitals, T = (c_os + c_ss) t - c_ss t^ba. Open shell (UHF), with the same formulas read for
// one spin at a time (halved: T = T_uhf / 2, whose densities are then each spin's own): same-spin pairs
// T = c_ss (t - t^ba) / 2, opposite-spin pairs (rows of one spin, columns of the other; no t^ba) T = c_os t / 2.
struct PairKind {
  double direct = 1, exchange = 0;
  bool same_spin = true;
  double os_weight = 1, ss_weight = 1;  // what the pair sums of (ka|ib) t^ab and (ka|ib) (t^ab - t^ba) count as
};
PairKind closed_shell_pairs(SpinScales scales) {
  return {scales.opposite_spin + scales.same_spin, scales.same_spin, true, 1.0, 1.0};
}
// Every ordered same-spin pair (k, i) counts E_ss of its spin twice; the opposite-spin pairs count E_os once from
// each spin's rows (the caller takes the mean).
PairKind same_spin_pairs(SpinScales scales) { return {0.5 * scales.same_spin, 0.5 * scales.same_spin, true, 0.0, 0.5}; }
PairKind opposite_spin_pairs(SpinScales scales) { return {0.5 * scales.opposite_spin, 0.0, false, 1.0, 0.0}; }

// One pair's amplitudes from its integrals kt = (ka|ib) at a + nr b (nr = e_row.size(), the rows' virtuals a;
// e_col the columns' virtuals b) and the denominators' occupied part e_ki: t_ki^ab into t, T_ki^ab over kt, the
// pair's opposite- and same-spin sums (unscaled) added to os and ss.
// E_os = sum (ka|ib) t^ab and E_ss = sum (ka|ib) (t^ab - t^ba), so c_os E_os + c_ss E_ss = sum (ka|ib) T^ab with
// T^ab = (c_os + c_ss) t^ab - c_ss t^ba (2 t^ab - t^ba for MP2): every density and G the gradient makes from T is
// then that energy's (the Hylleraas functional is linear in T).
void pair_amplitudes(double* kt, double* t, double e_ki, const Vector& e_row, const Vector& e_col, const PairKind& kind,
                     double& os, double& ss) {
  const Index nr = e_row.size(), nc = e_col.size();
  for (Index b = 0; b < nc; ++b)
    for (Index a = 0; a < nr; ++a) t[b * nr + a] = kt[b * nr + a] / (e_ki - e_row(a) - e_col(b));
  if (!kind.same_spin) {
    for (Index e = 0; e < nr * nc; ++e) {
      os += kt[e] * t[e];
      kt[e] = kind.direct * t[e];
    }
    return;
  }
  for_tiles(nr, [&](Index a, Index b) {
    const double kab = kt[b * nr + a], tab = t[b * nr + a], tba = t[a * nr + b];
    kt[b * nr + a] = kind.direct * tab - kind.exchange * tba;
    os += kab * tab;
    ss += kab * (tab - tba);
  });
}

}  // namespace

namespace {

// A block of B as the amplitude pass uses it: its rows, and with another rank's, the pair integrals of that rank's
// finished rows of it (`pair_rows`) with each of the current rows in turn (PairIntegrals).
struct LoadedBlock {
  std::vector<double> b;
  std::vector<double> pairs;
  Index pair_rows = 0;
};

// use(I, B_I, pairs, pair_rows) for every block I of f in turn, for the rows [k0, k1): this rank's own in place
// from memory or read from its scratch file, another rank's fetched from its holder with the pair integrals it has
// of the rows with the block (when `pairs` asks it for them; else none); the next one to load loads on another thread
// while one is used. The waits for other ranks' blocks go into the kernel table (`fetch_block`).
// (An open shell's other spin's blocks are lent under ids from `first_id` on.)
template <class Use>
void sweep_blocks(const FittedIntegrals& f, Index nv, Index k0, Index k1, const PairIntegrals& pairs,
                  const Ranks& ranks, linalg::BlockLender* lender, Index first_id, Kernels& kernels, const Use& use) {
  const Store& held = *f.ov;  // this rank's blocks only
  const auto count = static_cast<Index>(f.blocks.size());
  auto loaded = [&](Index b) { return !ranks.mine(b) || !held.in_memory(); };
  ReadAhead<LoadedBlock> ahead;
  auto start_from = [&](Index first) {
    Index b = first;
    while (b < count && !loaded(b)) ++b;
    if (b == count) return;
    ahead.start([&, b](LoadedBlock& into) {
      into.b.resize(static_cast<std::size_t>((f.blocks[std::size_t(b)].second - f.blocks[std::size_t(b)].first) *
                                             nv * held.cols()));
      into.pair_rows = 0;
      into.pairs.clear();
      if (ranks.mine(b)) return held.read(b, into.b.data());
      // One after the other: two fetches from one rank in flight at once could take each other's messages.
      const int owner = ranks.owner(b);
      lender->fetch(owner, first_id + b, into.b.data(), sizeof(double) * into.b.size())->wait();
      if (!pairs.asks(b)) return;
      lender->fetch(owner, pairs.rows_finished_request(b), &into.pair_rows, sizeof(Index))->wait();
      const std::size_t per_row = pairs.pairs_bytes(into.pair_rows);
      into.pairs.resize((k1 - k0) * per_row / sizeof(double));
      for (Index k = k0; k < k1 && per_row > 0; ++k)
        lender->fetch(owner, pairs.pairs_request(k, b), into.pairs.data() + (k - k0) * per_row / sizeof(double),
                      per_row)->wait();
    });
  };
  double waited = 0, fetched = 0;
  start_from(0);
  for (Index b = 0; b < count; ++b) {
    if (!loaded(b)) {
      use(b, held.data(b), nullptr, 0);
      continue;
    }
    linalg::Stopwatch clock;
    const LoadedBlock& block = ahead.take();  // rethrows a read's or a fetch's error
    if (!ranks.mine(b)) {
      waited += clock.seconds();
      fetched += double(sizeof(double) * (block.b.size() + block.pairs.size()));
    }
    start_from(b + 1);
    use(b, block.b.data(), block.pairs.data(), block.pair_rows);
  }
  if (fetched > 0) kernels.record_host(kStep, "fetch_block", waited, {0, fetched}, "fp64");
}

// This rank's blocks of the stores lent to the other ranks while they pass them (the first store's blocks under ids
// 0, 1, ..., the next store's after them: an open shell's two spins), and the pair integrals of its rows (requests
// with negative ids); none on one rank.
std::unique_ptr<linalg::BlockLender> lend_blocks(const std::vector<const Store*>& stores,
                                                 const std::vector<Index>& block_counts, PairIntegrals& pairs,
                                                 const Ranks& ranks) {
  if (ranks.size() == 1) return nullptr;
  return ranks.comm->lend([&, stores, block_counts](long long id, std::size_t bytes,
                                                    std::vector<std::byte>& buffer) -> const void* {
    if (id < 0) return pairs.lend(id, bytes, buffer);
    auto b = static_cast<Index>(id);
    std::size_t which = 0;
    while (which + 1 < stores.size() && b >= block_counts[which]) b -= block_counts[which++];
    const Store& store = *stores[which];
    if (bytes != sizeof(double) * std::size_t(store.rows(b) * store.cols()))
      throw std::logic_error("DF-MP2 gradient: a block asked for with the wrong size");
    if (store.in_memory()) return store.data(b);
    buffer.resize(bytes);
    store.read(b, reinterpret_cast<double*>(buffer.data()));
    return buffer.data();
  });
}

// Row k's pair amplitudes with block I of the columns (its rows of B, b_I): t_ki^ab into t_row, T_ki^ab into
// `tile`; their energies, P_ab (the rows' virtuals), P_ij (the columns' orbitals: every i up to the block's end and j
// in it) and G_k added to. `from_rank`: the pair integrals another rank sent for it (PairIntegrals). The rows' and the
// columns' orbitals are the same (closed shell, or one spin's same-spin pairs) or of the other spin (PairKind).
struct PairWork {
  const std::vector<std::pair<Index, Index>>& blocks;  // the columns'
  const Vector &e_row, &e_col;                         // active energies: the rows', the columns'
  const Vector &v_row, &v_col;                         // virtual energies
  PairKind kind;
  Index naux;
  PairIntegrals& pairs;
  Matrix& tile;
  Matrix &p_vv, &p_oo;
  double &opposite_spin, &same_spin;
  Kernels& kernels;

  void operator()(Index k, ConstMatrixView b_k, double* t_row, MatrixView g_k, Index I, const double* b_I,
                  const double* from_rank, Index from_rank_rows) {
    const Index nr = v_row.size(), nc = v_col.size(), na = e_col.size(), i0 = blocks[std::size_t(I)].first;
    const Index ni = blocks[std::size_t(I)].second - i0, cols = ni * nc, pair = nr * nc;
    const ConstMatrixView b_i{b_I, cols, naux, cols};
    pairs.tile(k, I, b_k, b_i, from_rank, from_rank_rows, tile.data(), kernels);
    double os = 0, ss = 0;
#pragma omp parallel for reduction(+ : os, ss)
    for (Index i = 0; i < ni; ++i)
      pair_amplitudes(tile.data() + i * pair, t_row + (i0 + i) * pair, e_row(k) + e_col(i0 + i), v_row, v_col, kind,
                      os, ss);
    opposite_spin += kind.os_weight * os;
    same_spin += kind.ss_weight * ss;
    const ConstMatrixView t_i{t_row + i0 * pair, nr, cols, nr}, tt_i{tile.data(), nr, cols, nr};
    kernels.gemm(kStep, Trans::no, Trans::yes, 2.0, t_i, tt_i, 1.0, linalg::view(p_vv));
    // P_ij for every i up to this block's end and j in it (the rest is its mirror: P_ij is symmetric).
    kernels.gemm(kStep, Trans::yes, Trans::no, -2.0, ConstMatrixView{t_row, pair, i0 + ni, pair},
                 ConstMatrixView{tile.data(), pair, ni, pair}, 1.0, MatrixView{p_oo.data() + i0 * na, i0 + ni, ni, na});
    kernels.gemm(kStep, Trans::no, Trans::no, 1.0, tt_i, b_i, 1.0, g_k);
  }
};

// P_ij's lower blocks from its upper ones (the amplitude pass makes P_ij for i up to each block J's end, j in J).
void mirror_blocks(Matrix& p_oo, const std::vector<std::pair<Index, Index>>& blocks) {
  const Index na = p_oo.rows();
  for (const auto& [j0, j1] : blocks)
    for (Index j = j0; j < j1; ++j)
      for (Index i = j1; i < na; ++i) p_oo(i, j) = p_oo(j, i);
}

}  // namespace

namespace {

// The pass's sums over the ranks, P_ij's mirrored blocks, its B released (but an open shell's alpha pass's), Gamma by
// this rank's auxiliary columns for the AO passes (one rank: as it is), and V = L^-T (B^T G) L^-1.
void finish_pass(AmplitudePass& out, FittedIntegrals& f, const Spaces& s, const DfMp2GradientPlan& plan,
                 const OppositeSpin* opposite, std::unique_ptr<Store> gamma, const std::string& scratch_folder,
                 const Ranks& ranks, Kernels& kernels) {
  for (double* x : {&out.opposite_spin, &out.same_spin}) ranks.sum(x, 1);
  for (Matrix* m : {&out.p_oo, &out.p_vv, &out.y_vv, &out.y_ov, &out.v}) ranks.sum(*m);
  if (opposite != nullptr) {
    ranks.sum(out.p_oo_opposite);
    mirror_blocks(out.p_oo_opposite, opposite->f->blocks);
  }
  if (opposite == nullptr || !opposite->keep_b) f.ov.reset();
  f.oo.reset();
  out.gamma = ranks.size() == 1 ? std::move(gamma)
                                : blocks_to_columns(*gamma, f.blocks, s.nv, f.aux, folder_of(plan, scratch_folder),
                                                    "mp2-gradient-gamma" + s.spin, ranks);
  mirror_blocks(out.p_oo, f.blocks);
  out.v = 0.5 * (out.v + out.v.transpose()).eval();
  kernels.trsm(kStep, Side::left, Uplo::lower, Trans::yes, Diag::non_unit, 1.0, linalg::view(f.factor),
               linalg::view(out.v));
  kernels.trsm(kStep, Side::right, Uplo::lower, Trans::no, Diag::non_unit, 1.0, linalg::view(f.factor),
               linalg::view(out.v));
}

}  // namespace

// For each active k (a block K of them at a time, its rows of B, B_oo and G held), the pair amplitudes with every
// active i, block I by block I as the store streams them: t_ki^ab in t_row(a, i nv + b), kept for the whole row
// since P_ij pairs t_ki with T_kj across blocks; T_ki^ab = 2 t_ki^ab - t_ki^ba in `tile` for block I only. Then
// E = sum (ka|ib) T_ki^ab, P_ab = 2 sum t_ki^ac T_ki^bc, P_ij = -2 sum t_ki^ab T_kj^ab, G_ka^Q = sum T_ki^ab B_ib^Q.
// With the plan's keep_pair_integrals, each pair's (ka|ib) computed once (PairIntegrals).
// With several ranks, each does the rows k of the blocks it holds, the other ranks' blocks I fetched from them as
// the row passes them (a row's flops are about 6 nv per element fetched), with the pair integrals of row k that the
// other rank has made; its G, V and Gamma rows are its own.
// An open shell's pass for one spin (`opposite`): the same-spin pairs so, then each row k with every active i of the
// other spin (their B fetched from their holders alike), G_k summing both (PairKind).
AmplitudePass amplitude_pass(FittedIntegrals& f, const Spaces& s, const DfMp2GradientPlan& plan, SpinScales scales,
                             const OppositeSpin* opposite, const std::string& scratch_folder, const Ranks& ranks,
                             Kernels& kernels) {
  const Index naux = f.factor.rows(), na = s.na, nv = s.nv, no = s.no;
  AmplitudePass out;
  out.p_oo = Matrix::Zero(na, na);
  out.p_vv = Matrix::Zero(nv, nv);
  out.y_vv = Matrix::Zero(nv, nv);
  out.y_ov = Matrix::Zero(no, nv);
  out.v = Matrix::Zero(naux, naux);
  out.aux = f.aux;
  const bool one = ranks.size() == 1;
  const auto count = static_cast<Index>(f.blocks.size());
  const std::vector<Index> held = held_blocks(count, ranks);
  std::unique_ptr<Store> gamma;  // Gamma's rows of the blocks this rank holds
  ranks.checked([&] {
    gamma = make_store(f.blocks, nv, naux, folder_of(plan, scratch_folder),
                       ranks.file_name((one ? "mp2-gradient-gamma" : "mp2-gradient-gamma-blocks") + s.spin), &held,
                       !one);
  });
  const Vector e_act = s.e.segment(s.nf, na), e_vir = s.e.tail(nv);
  Index largest = 0;
  for (const auto& [i0, i1] : f.blocks) largest = std::max(largest, i1 - i0);
  const Index group = std::max<Index>(plan.amplitude_rows, 1);
  // The other spin's orbitals (columns of the opposite-spin pairs): none for a closed shell.
  const Spaces* os = opposite != nullptr ? opposite->s : nullptr;
  const Index na_os = os != nullptr ? os->na : 0, nv_os = os != nullptr ? os->nv : 0;
  const Vector e_act_os = os != nullptr ? Vector(os->e.segment(os->nf, na_os)) : Vector(),
               e_vir_os = os != nullptr ? Vector(os->e.tail(nv_os)) : Vector();
  Index largest_os = 0;
  if (os != nullptr)
    for (const auto& [i0, i1] : opposite->f->blocks) largest_os = std::max(largest_os, i1 - i0);
  Matrix t_rows(nv, group * std::max(na * nv, na_os * nv_os)), tile(nv, std::max(largest * nv, largest_os * nv_os)), g;
  std::vector<double> ov_buffer, oo_buffer;
  PairIntegrals pairs(plan.keep_pair_integrals, f.blocks, ranks, nv);
  const PairKind same = os != nullptr ? same_spin_pairs(scales) : closed_shell_pairs(scales);
  PairWork work{f.blocks, e_act, e_act, e_vir, e_vir, same, naux, pairs, tile, out.p_vv, out.p_oo,
                out.opposite_spin, out.same_spin, kernels};
  std::vector<const Store*> lent = {f.ov.get()};
  std::vector<Index> lent_counts = {count};
  std::unique_ptr<PairIntegrals> os_pairs;
  std::optional<PairWork> os_work;
  if (os != nullptr) {
    out.p_oo_opposite = Matrix::Zero(na_os, na_os);
    os_pairs = std::make_unique<PairIntegrals>(false, opposite->f->blocks, ranks, nv);
    os_work.emplace(PairWork{opposite->f->blocks, e_act, e_act_os, e_vir, e_vir_os, opposite_spin_pairs(scales), naux,
                             *os_pairs, tile, out.p_vv, out.p_oo_opposite, out.opposite_spin, out.same_spin, kernels});
    lent.push_back(opposite->f->ov.get());
    lent_counts.push_back(static_cast<Index>(opposite->f->blocks.size()));
  }
  std::unique_ptr<linalg::BlockLender> lender = lend_blocks(lent, lent_counts, pairs, ranks);
  ranks.checked([&] {
    for (const Index K : held) {
      const Index k0 = f.blocks[static_cast<std::size_t>(K)].first, rows = f.ov->rows(K), nk = rows / nv;
      const double* b_K = f.ov->block(K, ov_buffer);
      const double* oo_K = f.oo->block(K, oo_buffer);
      g.setZero(rows, naux);  // G's rows (k a) of block K
      // The rows a group at a time, each block of B loaded once for the group.
      for (Index r0 = 0; r0 < nk; r0 += group) {
        const Index r1 = std::min(nk, r0 + group);
        auto b_k = [&](Index kk) { return ConstMatrixView{b_K + kk * nv, nv, naux, rows}; };
        auto g_k = [&](Index kk) { return MatrixView{g.data() + kk * nv, nv, naux, rows}; };
        auto pairs_of = [&](PairWork& w, Index row_pair) {
          return [&, row_pair](Index I, const double* b_I, const double* from_rank, Index from_rank_rows) {
            for (Index kk = r0; kk < r1; ++kk) {
              const double* sent = from_rank_rows > 0 ? from_rank + (kk - r0) * from_rank_rows * nv * nv : nullptr;
              w(k0 + kk, b_k(kk), t_rows.data() + (kk - r0) * row_pair, g_k(kk), I, b_I, sent, from_rank_rows);
            }
          };
        };
        sweep_blocks(f, nv, k0 + r0, k0 + r1, pairs, ranks, lender.get(), 0, kernels, pairs_of(work, na * nv * nv));
        if (os != nullptr)
          sweep_blocks(*opposite->f, nv_os, k0 + r0, k0 + r1, *os_pairs, ranks, lender.get(), count, kernels,
                       pairs_of(*os_work, na_os * nv * nv_os));
        for (Index kk = r0; kk < r1; ++kk) {
          pairs.finished(k0 + kk);  // its pair integrals with later rows kept: other ranks may take them
          // y_vv(b, a) = 4 sum_Q B_kb^Q G_ka^Q and y_ov(j, a) = 4 sum_Q B_kj^Q G_ka^Q, summed over k.
          kernels.gemm(kStep, Trans::no, Trans::yes, 4.0, b_k(kk), ConstMatrixView(g_k(kk)), 1.0,
                       linalg::view(out.y_vv));
          kernels.gemm(kStep, Trans::no, Trans::yes, 4.0, ConstMatrixView{oo_K + kk * no, no, naux, nk * no},
                       ConstMatrixView(g_k(kk)), 1.0, linalg::view(out.y_ov));
        }
      }
      // The metric's V = sum_ka B_ka G_ka^T, and Gamma = G L^-1 for the AO passes.
      kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{b_K, rows, naux, rows}, linalg::view(g), 1.0,
                   linalg::view(out.v));
      kernels.trsm(kStep, Side::right, Uplo::lower, Trans::no, Diag::non_unit, 1.0, linalg::view(f.factor),
                   linalg::view(g));
      gamma->write(K, g.data());
    }
  });
  if (lender) lender->finish();
  g.resize(0, 0);
  finish_pass(out, f, s, plan, opposite, std::move(gamma), scratch_folder, ranks, kernels);
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

// The most of a three-index store one of `ranks` holds (README "MPI"): by blocks, whole blocks of at most n of
// `orbitals` dealt in turn; by columns, a run of the AO blocks of at most m functions, which whole shells (at most
// `shell` functions) fill to more than m - shell each.
double block_share(double orbitals, double n, int ranks) {
  if (ranks <= 1 || orbitals <= 0) return 1.0;
  const double blocks = std::ceil(orbitals / n);
  return std::min(1.0, std::ceil(blocks / ranks) * n / orbitals);
}
double column_share(double naux, double m, double shell, int ranks) {
  if (ranks <= 1 || naux <= 0) return 1.0;
  const double ao_blocks = std::ceil(naux / std::max(m - shell + 1.0, 1.0));
  return std::min(1.0, std::ceil(ao_blocks / ranks) * std::max(m, shell) / naux);
}

GradientBytes gradient_bytes(const DfMp2GradientSizes& z, double n, double m, double group, bool scratch,
                             RotationProducts kept, bool keep_pairs) {
  const double nbf = double(z.nbf), no = double(z.nocc), na = double(z.nocc - z.nfrozen), nv = double(z.nbf - z.nocc);
  const double naux = double(z.naux);
  const double in_memory = scratch ? 0.0 : 1.0;
  const double shell = double(std::max<Index>(z.largest_aux_shell, 1));
  // B and Gamma, B_oo: this rank's blocks (rows) and its auxiliary functions (columns); one rank: whole, one store.
  const bool one = z.ranks <= 1;
  const double rows = block_share(na, n, z.ranks), cols = column_share(naux, m, shell, z.ranks);
  // An open shell holds both spins' tensors (counted as two of the alpha spin's, the larger), and its Z-vector the
  // products of both spins' orbitals.
  const double spins = z.nocc_beta > 0 ? 2.0 : 1.0;
  const double ov = spins * naux * na * nv * rows, oo = spins * naux * na * no * rows;
  const double ov_cols = spins * naux * na * nv * cols, oo_cols = spins * naux * na * no * cols;
  // Matrices of nbf^2 (orbitals, X, densities, W and their AO forms; and the SCF, unrelaxed and relaxed AO densities
  // of both spins the result keeps, DfMp2Gradient::scf_densities and the others) and of naux^2 (the metric's factor, V).
  const double fixed = (14.0 * spins + 6.0) * nbf * nbf + 2.0 * naux * naux;
  // The AO block (P|mn) and its products: half-transformed rows, (P|ia) and (P|ji); or Gamma^P's slab and
  // C_v Gamma^P twice (side by side, then stacked).
  const double ao = m * nbf * nbf + std::max(m * nbf * no + m * na * (nv + no), m * na * nv + 2.0 * m * nbf * na);
  // With ranks, each rank's columns of B and B_oo, then its blocks, a round at a time: the columns given up as they
  // leave and the blocks' pages touched as they arrive (separate allocations), so that the two shapes together hold
  // the larger one and a round's blocks (two, whole or in pieces).
  const double round = 2.0 * n * std::max(nv, no) * naux;
  const double transform =
      one ? in_memory * (ov + oo) + ao + (scratch ? n * std::max(nv, no) * naux : 0.0)
          : std::max(in_memory * (ov_cols + oo_cols) + ao,
                     in_memory * (std::max(ov_cols, ov) + std::max(oo_cols, oo)) + round);
  // The amplitudes: t for a group of rows k with every i, T for one block, the block's rows of B, B_oo and G (B and
  // B_oo read from scratch, and the next block of B read or fetched from another rank while one is used, with the
  // group's pair integrals another rank has); then, with ranks, Gamma from blocks to columns.
  // The kept pair integrals: of this rank's rows (one rank: all rows); with ranks, those of another rank's block
  // fetched beside its B (two in flight).
  const double pairs = keep_pairs ? gradient_detail::kept_pair_doubles(z.nocc - z.nfrozen, z.nbf - z.nocc,
                                                                       static_cast<Index>(n), z.ranks)
                                  : 0.0;
  const double ahead =
      (scratch || !one ? 2.0 * n * nv * naux : 0.0) + (keep_pairs && !one ? 2.0 * group * n * nv * nv : 0.0);
  const double pass = group * na * nv * nv + n * nv * nv + n * nv * naux + pairs + ahead +
                      (scratch ? n * (nv + no) * naux : in_memory * (2.0 * ov + oo));
  const double regather = one ? 0.0 : in_memory * std::max(ov, ov_cols) + 2.0 * n * nv * naux;
  // The three-index derivatives: on each thread one auxiliary shell's density and Gamma slab.
  const double derivative = double(z.threads) * (shell * (2.0 * nbf * nbf + na * nv) + 2.0 * nbf * nbf);
  const double gamma_held = in_memory * ov_cols + ao;
  // The Z-vector: with a DF-SCF, its fitting basis's integrals in the orbitals' basis kept across its iterations,
  // as many of them as the plan allows.
  const double naux_jk = double(z.naux_jk);
  // With ranks, each keeps the products of its own fitting functions.
  const double zvector_aux = df_jk_columns_per_rank(z.naux_jk, z.largest_aux_shell, z.ranks);
  double zvector = rotation_products_bytes(kept, z.nbf, z.nocc, z.nbf - z.nocc, zvector_aux) / 8.0;
  if (z.nocc_beta > 0)
    zvector += rotation_products_bytes(kept, z.nbf, z.nocc_beta, z.nbf - z.nocc_beta, zvector_aux) / 8.0;
  // The SCF-like separable part: its fitted half-transformed integrals H (nbf no naux_jk) by the same blocks; while
  // they are made, a block of (Q|mn) with (Q|mn) C_o twice (computed, then as columns); then one block's C_o^T H and
  // P H beside them, and on each thread a shell's slab of H and its two densities.
  // With ranks, H by blocks or by columns, changing shape a round at a time as B does.
  const double h_whole = spins * nbf * no * naux_jk;
  const double h =
      one ? h_whole : h_whole * std::max(block_share(no, n, z.ranks), column_share(naux_jk, m, shell, z.ranks));
  const double separable_transform = m * nbf * nbf + 2.0 * m * nbf * no;
  const double separable = in_memory * h + (one ? (scratch ? n * nbf * naux_jk : 0.0) : 2.0 * n * nbf * naux_jk) +
                           std::max(separable_transform, n * (nbf + no) * naux_jk +
                                                             double(z.threads) * shell * (nbf * no + 2.0 * nbf * nbf));
  GradientBytes out;
  out.peak = 8.0 * (fixed + std::max({transform, pass, regather, gamma_held + derivative, zvector, separable}));
  out.scratch = scratch ? 8.0 * std::max(one ? 2.0 * ov + oo : ov_cols + oo_cols + 2.0 * ov + oo, h) : 0.0;
  return out;
}

// Why the plan is what it is, for the memory plan's table.
std::string plan_reason(const DfMp2GradientPlan& plan, const DfMp2GradientSizes& z, Mp2Storage storage) {
  std::string reason = storage != Mp2Storage::automatic ? "asked for (mp2_storage)"
                       : plan.on_scratch ? "its three-index tensors do not fit in memory beside the blocks"
                                         : "its three-index tensors fit in memory";
  if (plan.zvector_products == RotationProducts::occupied)
    reason += "; the Z-vector keeps b_oo and b_vo only (a pass over the J/K's tensor each iteration)";
  if (plan.zvector_products == RotationProducts::none && z.naux_jk > 0)
    reason += "; the Z-vector's J/K rebuilt each iteration";
  if (plan.keep_pair_integrals) reason += "; the pair integrals (ka|ib) kept for their mirror pairs";
  if (plan.amplitude_rows > 1)
    reason += fmt::format("; {} rows' amplitudes at once (each block of B {} once for them)", plan.amplitude_rows,
                          plan.on_scratch ? (z.ranks > 1 ? "read or fetched" : "read") : "fetched");
  return reason;
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
      if (keep_pairs && keep == RotationProducts::none && z.naux_jk > 0) continue;
      // Block sizes that cut the active orbitals evenly, largest first; with several ranks, a block for each at least
      // (the blocks' fits and metric densities are dealt to the ranks by block).
      const Index fewest = std::clamp<Index>(z.ranks, 1, std::max<Index>(na, 1));
      // Rows whose amplitudes are made together: where blocks of B are loaded (read from scratch or fetched from
      // another rank), up to 4 share each load; one process in memory loads none.
      const std::vector<Index> groups = z.ranks > 1 || scratch ? std::vector<Index>{4, 2, 1} : std::vector<Index>{1};
      for (Index count = fewest; count <= std::max<Index>(na, 1); ++count) {
        const Index n = std::max<Index>((na + count - 1) / count, 1);
        if (count > fewest && n == (na + count - 2) / (count - 1)) continue;  // the size of one fewer block
        for (const Index m : aux_blocks) {
          for (const Index group : groups) {
            if (group > n) continue;
            const GradientBytes bytes = gradient_bytes(z, double(n), double(m), double(group), scratch, keep, keep_pairs);
            DfMp2GradientPlan plan{n, m, scratch, keep, keep_pairs, group, bytes.peak, bytes.scratch, ""};
            if (least.memory_bytes == 0 || plan.memory_bytes < least.memory_bytes) least = plan;
            if (bytes.peak > budget) continue;
            plan.reason = plan_reason(plan, z, storage);
            return plan;
          }
        }
      }
    }
  }
  throw PhaseTooLarge(fmt::format("MP2 gradient ({} storage)", least.on_scratch ? "scratch" : "memory"),
                      least.memory_bytes, "the MP2 gradient's smallest blocks do not fit");
}

}  // namespace dfmp2::chem
