#include "chem/mp2/dfmp2.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>

#include "linalg/errors.hpp"
#include "linalg/sparse.hpp"
#include "chem/mp2/mp2_detail.hpp"
#include "chem/mp2/occupied_blocks.hpp"

namespace dfmp2::chem {

using namespace mp2_detail;

namespace {

// Copies (and converts) `count` elements, recording the time as host work when the types differ.
template <class To, class From>
void convert(const From* from, Index count, To* to, linalg::Kernels& kernels, const std::string& step) {
  if constexpr (std::is_same_v<To, From>) {
    std::copy_n(from, count, to);
  } else {
    Stopwatch clock;
    std::transform(from, from + count, to, [](From x) { return static_cast<To>(x); });
    kernels.record_host(step, "convert", clock.seconds(), {0, double(count) * (sizeof(To) + sizeof(From))},
                        dtype<To>());
  }
}

// A non-finite number at any step makes every energy after it meaningless: stop there and name the step (an
// overflow from integrals of absurd magnitude, a metric that underflows, NaN from a damaged input).
template <class T>
void require_finite(const std::string& step, const char* what, const T* data, Index count) {
  for (Index i = 0; i < count; ++i) {
    if (!std::isfinite(data[i])) {
      throw NumericalError(fmt::format("DF-MP2 step '{}': {} holds a non-finite value ({}, element {}); the numbers "
                                       "overflowed (are the integrals of a sensible magnitude?)",
                                       step, what, double(data[i]), i));
    }
  }
}

// Step 1: the metric factor L (cholesky) or J^-1/2 (eigh, newton-schulz), in F.
template <class F>
MatrixT<F> metric_factor(const Matrix& metric, const DfMp2Options& options, linalg::Kernels& kernels,
                         linalg::InverseSqrtReport& report) {
  MatrixT<F> factor = metric.cast<F>();
  try {
    switch (options.metric) {
      case MetricMethod::cholesky: kernels.cholesky(step_name(Mp2Step::metric), linalg::Uplo::lower, linalg::view(factor)); break;
      case MetricMethod::eigh:
        report = linalg::inverse_sqrt_eigh(kernels, step_name(Mp2Step::metric), linalg::view(factor), options.eigh_threshold);
        break;
      case MetricMethod::newton_schulz:
        report = linalg::inverse_sqrt_newton_schulz(kernels, step_name(Mp2Step::metric), linalg::view(factor), options.newton_schulz);
        break;
    }
  } catch (const NumericalError& e) {
    throw NumericalError(fmt::format("metric (P|Q), {}: {}", metric_name(options.metric), e.what()));
  }
  require_finite(step_name(Mp2Step::metric), "the metric factor", factor.data(), factor.size());
  return factor;
}

// Step 1 on the grid: J = L L^T, distributed, laid out for the fitting's row solves. The metric's tiles are computed
// on each rank where the source can (molecule input), else copied from the whole metric it holds.
linalg::DistributedMatrix distributed_metric_factor(const DfMp2Input& input, Index n, linalg::DenseGrid& grid,
                                                    linalg::Comm& comm, linalg::Kernels& kernels) {
  linalg::DistributedMatrix factor = grid.matrix(n);
  comm.checked([&] {
    if (input.metric_tiles) input.metric_tiles(factor);
    else factor.copy_from(linalg::view(*input.metric));
  });
  Stopwatch clock;
  grid.cholesky(factor, "metric (P|Q)");
  linalg::DistributedMatrix on_rows = grid.for_row_solves(factor);
  kernels.record_host(step_name(Mp2Step::metric), fmt::format("{} cholesky", dense_library_name(grid.cholesky_library(n))),
                      clock.seconds(), {double(n) * double(n) * double(n) / 3.0, 8.0 * double(factor.local.size())}, "fp64");
  return on_rows;
}

// The orbitals of one space (SpinSpace) as the kernel uses them: its energies and coefficients, and where its rows
// start in A and B.
struct SpaceOrbitals {
  SpinSpace space;
  const Vector* eps = nullptr;
  const Matrix* c = nullptr;
  Index row0 = 0;
};

// Every system's spaces (alpha, or alpha then beta), stacked in that order.
std::vector<SpaceOrbitals> spaces_of(const std::vector<Mp2System>& systems) {
  std::vector<SpaceOrbitals> out;
  for (std::size_t k = 0; k < systems.size(); ++k) {
    const DfMp2Input& in = systems[k].input;
    const Index nfrozen = systems[k].nfrozen;
    const std::vector<SpinSpace> spaces = system_spaces(static_cast<int>(k), in.unrestricted(),
                                                        in.orbital_energies->size(), nfrozen, in.nocc, in.nocc_beta);
    for (const SpinSpace& sp : spaces) {
      const bool beta = sp.spin == SpaceSpin::beta;
      out.push_back({sp, beta ? in.orbital_energies_beta : in.orbital_energies,
                     beta ? in.mo_coefficients_beta : in.mo_coefficients,
                     out.empty() ? 0 : out.back().row0 + out.back().space.rows()});
    }
  }
  return out;
}

// Step 2: columns of A (the rows of every space, stacked, x naux) in W, for the auxiliary `blocks` given (this
// rank's), a block at a time: `written(p0, np, block)` is given each block [p0, p0 + np) (np contiguous columns of
// every space's rows) to store. An AO block is read once and transformed with each space's orbitals.
template <class W>
void transform(const ThreeIndexSource& source, const std::vector<SpaceOrbitals>& spaces, const DfMp2Options& options,
               const std::vector<std::pair<Index, Index>>& blocks, linalg::Kernels& kernels,
               ScreeningReport& screening, const std::function<void(Index, Index, const W*)>& written) {
  const Index rows = spaces.back().row0 + spaces.back().space.rows();
  Index nact_max = 0;
  for (const auto& sp : spaces) nact_max = std::max(nact_max, sp.space.nact);
  std::vector<double> buffer;     // as read
  std::vector<W> converted;       // in W, when W is not double
  std::vector<W> half;            // (i | P m) for one block, nact x (nbf * block)
  std::vector<MatrixT<W>> c;      // each space's orbitals in W
  if (source.form() == ThreeIndexForm::ao)
    for (const auto& sp : spaces) c.push_back(sp.c->cast<W>());
  // Buffers sized once for the largest block: blocks of whole shells differ in size, and a std::vector that grows
  // holds its old and new storage at once (a transient that the memory plan does not have).
  Index largest = 0;
  for (const auto& [p0, p1] : blocks) largest = std::max(largest, p1 - p0);
  const Index stride0 = source.block_stride();
  buffer.reserve(static_cast<std::size_t>(largest * stride0));
  if (!std::is_same_v<W, double>) converted.reserve(static_cast<std::size_t>(largest * stride0));
  if (source.form() == ThreeIndexForm::ao) half.reserve(static_cast<std::size_t>(largest * nact_max * c[0].rows()));
  std::vector<W> transformed;  // one block of A
  transformed.reserve(static_cast<std::size_t>(largest * rows));
  long long done = 0;
  for (const auto& block : blocks) {
    const Index p0 = block.first, np = block.second - block.first;  // not a structured binding: lambdas use p0
    transformed.resize(static_cast<std::size_t>(np * rows));
    W* out = transformed.data();
    auto one_block = [&] {
      const Index stride = source.block_stride();
      // The file's order is already A's order when nothing is converted and no core is dropped.
      const bool direct =
          std::is_same_v<W, double> && source.form() == ThreeIndexForm::mo && spaces[0].space.nfrozen() == 0;
      Stopwatch read_clock;
      if constexpr (std::is_same_v<W, double>) {
        if (direct) source.read_block(p0, np, out);
      }
      if (!direct) {
        buffer.resize(static_cast<std::size_t>(np * stride));
        source.read_block(p0, np, buffer.data());
      }
      kernels.record_host(step_name(Mp2Step::transform), kRead3IndexKernel, read_clock.seconds(), {0, 8.0 * double(np) * double(stride)});
      if (direct) return;

      if (source.form() == ThreeIndexForm::mo) {  // one space (run_dfmp2 checks)
        const SpinSpace& sp = spaces[0].space;
        for (Index p = 0; p < np; ++p) {
          convert(buffer.data() + p * stride + sp.nfrozen() * sp.nvir, sp.rows(), out + p * rows, kernels,
                  step_name(Mp2Step::transform));
        }
        return;
      }
      const W* ao_data = nullptr;
      if constexpr (std::is_same_v<W, double>) {
        ao_data = buffer.data();
      } else {
        converted.resize(buffer.size());
        convert(buffer.data(), np * stride, converted.data(), kernels, step_name(Mp2Step::transform));
        ao_data = converted.data();
      }
      const Index nbf = c[0].rows();
      // (P|mn) as an nbf x (nbf*np) matrix: rows n, columns m + nbf*P.
      const ConstMatrixViewT<W> ao{ao_data, nbf, nbf * np, nbf};
      // Screening: the tiles of the block kept, made once for every space.
      std::optional<linalg::BsrMatrix<W>> tiles;
      if (options.screening.enabled) {
        Stopwatch screen_clock;
        tiles = linalg::bsr_from_dense(ao, options.screening.block, options.screening.block,
                                       options.screening.threshold);
        kernels.record_host(step_name(Mp2Step::transform), "screen", screen_clock.seconds(),
                            {0, double(sizeof(W)) * double(nbf * nbf * np)}, dtype<W>());
        screening.blocks_kept += tiles->nblocks();
        screening.blocks_total += static_cast<long long>(tiles->block_row_count()) * tiles->block_col_count();
      }
      for (std::size_t s = 0; s < spaces.size(); ++s) {
        const Index nocc = spaces[s].space.nocc, nact = spaces[s].space.nact, nvir = spaces[s].space.nvir;
        if (nact == 0) continue;
        const ConstMatrixViewT<W> c_act{c[s].data() + nbf * spaces[s].space.nfrozen(), nbf, nact, nbf};
        const ConstMatrixViewT<W> c_vir{c[s].data() + nbf * nocc, nbf, nvir, nbf};
        // A_P of this space: nvir x nact at row0 of column P (batch stride `rows`).
        const MatrixViewT<W> a_space{out + spaces[s].row0, nvir, nact, nvir};
        half.resize(static_cast<std::size_t>(nact * nbf * np));
        if (tiles) {
          // (i | P m) transposed, (m + nbf*P) x i, = op(S)^T C_act with S the screened block: the dropped tiles are
          // never multiplied. Then A_P = C_vir^T (rows m + nbf*P of it), one GEMM per P.
          const MatrixViewT<W> half_t{half.data(), nbf * np, nact, nbf * np};
          kernels.spmm(step_name(Mp2Step::transform), Trans::yes, W(1), *tiles, c_act, W(0), half_t);
          kernels.gemm_batched(step_name(Mp2Step::transform), Trans::yes, Trans::no, np, {0, nbf, rows}, W(1), c_vir,
                               ConstMatrixViewT<W>{half.data(), nbf, nact, nbf * np}, W(0), a_space);
          continue;
        }
        // (i | P m) transposed, (m + nbf*P) x i = ao^T C_act: the long dimension (nbf np) as the rows and the
        // occupied orbitals as the columns, which the packed kernels' tiles (24 or 12 rows, 8 or 4 columns) divide
        // evenly where nact x (nbf np) left a sixth of each tile empty (80 occupied orbitals in tiles of 24 rows).
        const MatrixViewT<W> half_t{half.data(), nbf * np, nact, nbf * np};
        kernels.gemm(step_name(Mp2Step::transform), Trans::yes, Trans::no, W(1), ao, c_act, W(0), half_t);
        // For each P: A_P (nvir x nact) = C_vir^T (rows m + nbf*P of the above).
        kernels.gemm_batched(step_name(Mp2Step::transform), Trans::yes, Trans::no, np, {0, nbf, rows}, W(1), c_vir,
                             ConstMatrixViewT<W>{half.data(), nbf, nact, nbf * np}, W(0), a_space);
      }
    };
    one_block();
    require_finite(step_name(Mp2Step::transform), "the transformed integrals (P|ia)", out, rows * np);
    written(p0, np, out);
    ++done;
    if (options.progress) options.progress(mp2_phase_name(Mp2Step::transform), done, static_cast<long long>(blocks.size()));
  }
}

// Step 3: B = A L^-T or A J^-1/2, in place in `a`. The solve runs in F; rows are independent, so A is fitted in
// row chunks whenever a buffer is needed (a GEMM cannot work in place; a conversion needs a copy).
template <class W, class F>
void fit(MatrixViewT<W> a, const MatrixT<F>& factor, MetricMethod metric, Index fit_rows, linalg::Kernels& kernels) {
  const Index rows = a.rows, naux = a.cols;
  if constexpr (std::is_same_v<W, F>) {
    if (metric == MetricMethod::cholesky && fit_rows >= rows) {
      kernels.trsm(step_name(Mp2Step::fitting), linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, F(1),
                   linalg::view(factor), a);
      return;
    }
  }
  const Index chunk = std::max<Index>(1, std::min(fit_rows, rows));
  MatrixT<F> in(chunk, naux), out(chunk, naux);
  for (Index r0 = 0; r0 < rows; r0 += chunk) {
    const Index nr = std::min(chunk, rows - r0);
    const auto a_block = a.block(r0, 0, nr, naux);
    MatrixViewT<F> in_view{in.data(), nr, naux, chunk};
    for (Index j = 0; j < naux; ++j) convert(&a_block(0, j), nr, &in_view(0, j), kernels, step_name(Mp2Step::fitting));
    MatrixViewT<F> result = in_view;
    if (metric == MetricMethod::cholesky) {
      kernels.trsm(step_name(Mp2Step::fitting), linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, F(1),
                   linalg::view(factor), in_view);
    } else {
      result = MatrixViewT<F>{out.data(), nr, naux, chunk};
      kernels.gemm(step_name(Mp2Step::fitting), Trans::no, Trans::no, F(1), in_view, linalg::view(factor), F(0), result);
    }
    for (Index j = 0; j < naux; ++j) convert(&result(0, j), nr, &a_block(0, j), kernels, step_name(Mp2Step::fitting));
  }
}

// Screening is judged over every rank's tiles: a threshold that drops them all would make every energy 0.
void judge_screening(const ScreeningOptions& options, ScreeningReport& report, linalg::Comm& comm) {
  double tiles[2] = {double(report.blocks_kept), double(report.blocks_total)};
  comm.sum(tiles, 2);
  report.blocks_kept = static_cast<long long>(tiles[0]);
  report.blocks_total = static_cast<long long>(tiles[1]);
  comm.checked([&] {
    if (options.enabled && report.blocks_kept == 0) {
      throw NumericalError(fmt::format("DF-MP2 step 'transform': screening threshold {:.3e} drops all {} tiles of "
                                       "(P|mn); every energy would be 0 (lower screening.threshold)",
                                       options.threshold, report.blocks_total));
    }
  });
}

// The per-rank table of one run (README "MPI"): each step's time (given), its kernels' flops, and the traffic the
// communicator counted under the step's phase during this run.
std::vector<linalg::PhaseStats> step_stats(std::vector<linalg::PhaseStats> stats, const linalg::KernelLog& log,
                                           const std::map<std::string, linalg::CommTraffic>& before,
                                           const std::map<std::string, linalg::CommTraffic>& after) {
  for (const auto& [step, name] : mp2_step_names()) {
    linalg::PhaseStats& st = stats[static_cast<std::size_t>(step)];
    for (const auto& r : log.records())
      if (r.step == name) st.flops += r.flops;
    linalg::CommTraffic t;
    if (auto it = after.find(mp2_phase_name(step)); it != after.end()) t = it->second;
    if (auto it = before.find(mp2_phase_name(step)); it != before.end()) {
      t.bytes_sent -= it->second.bytes_sent;
      t.bytes_received -= it->second.bytes_received;
      t.messages_sent -= it->second.messages_sent;
      t.messages_received -= it->second.messages_received;
      t.wait_seconds -= it->second.wait_seconds;
    }
    st.bytes_sent = t.bytes_sent;
    st.bytes_received = t.bytes_received;
    st.messages = double(t.messages_sent + t.messages_received);
    st.wait_seconds = t.wait_seconds;
  }
  return stats;
}

// The fitting with the metric factored on the ranks' grid (fp64 only). Collective: every rank solves in each
// round, with an empty block when it holds none then.
template <class W>
void fit_on_grid(OccupiedBlocks<W>& blocks, const linalg::DistributedMatrix& grid_factor, const DfMp2Options& options,
                 Index naux, linalg::Comm& comm, linalg::Kernels& kernels) {
  blocks.fit_each_collectively([&](MatrixViewT<W> block) {
    Stopwatch clock;
    if constexpr (std::is_same_v<W, double>) options.dense->solve_rows(grid_factor, block);
    kernels.record_host(step_name(Mp2Step::fitting), "pdtrsm", clock.seconds(),
                        {double(block.rows) * double(naux) * double(naux), 8.0 * double(block.rows * naux)}, "fp64");
    comm.checked([&] {
      require_finite(step_name(Mp2Step::fitting), "the fitted tensor B", block.data, block.rows * block.cols);
    });
  });
}

// The opposite- and same-spin energies of one block pair, as its kind (PairKind) counts them.
template <class W, class Acc>
PairEnergy pair_energy(const OccupiedBlockPair& pair, ConstMatrixViewT<W> b_i, ConstMatrixViewT<W> b_j,
                       const std::vector<Vector>& eps_occ, const std::vector<Vector>& eps_vir,
                       linalg::Kernels& kernels, MatrixT<W>& workspace) {
  const auto si = static_cast<std::size_t>(pair.space_i), sj = static_cast<std::size_t>(pair.space_j);
  PairEnergy out;
  switch (pair.kind) {
    case PairKind::opposite_spin:
      out.opposite_spin = opposite_spin_pair_energy<W, Acc>(pair, b_i, b_j, eps_occ[si], eps_vir[si], eps_occ[sj],
                                                            eps_vir[sj], kernels, workspace);
      return out;
    case PairKind::closed_shell:
      return block_pair_energy<W, Acc>(pair, b_i, b_j, eps_occ[si], eps_vir[si], kernels, workspace);
    case PairKind::same_spin:
      // One spin's space: half the closed-shell formula's same-spin part is that spin's, and its opposite-spin
      // part is not a pair of that spin's (the opposite-spin pairs are the cross-space ones).
      out.same_spin = 0.5 * block_pair_energy<W, Acc>(pair, b_i, b_j, eps_occ[si], eps_vir[si], kernels, workspace)
                                .same_spin;
      return out;
  }
  throw std::logic_error("pair_energy: unknown pair kind");
}

// The sums over each system's block pairs in pair order, in Acc (an fp32 run accumulates as fp32 arithmetic would):
// the same bits for any number of ranks. `energies` holds (os, ss) of every pair, summed over the ranks.
template <class Acc>
void sum_pair_energies(const std::vector<Mp2System>& systems, const std::vector<SpinSpace>& spaces,
                       const Mp2Layout& layout, const std::vector<double>& energies,
                       std::vector<DfMp2Result>& results) {
  const std::size_t npairs = layout.pairs.size();
  std::vector<Acc> os(systems.size(), Acc(0)), ss(spaces.size(), Acc(0));
  for (std::size_t k = 0; k < npairs; ++k) {
    const auto si = static_cast<std::size_t>(layout.pairs[k].space_i);
    os[static_cast<std::size_t>(spaces[si].system)] += Acc(energies[2 * k]);
    ss[si] += Acc(energies[2 * k + 1]);
  }
  for (std::size_t s = 0; s < systems.size(); ++s) {
    DfMp2Result& result = results[s];
    // An open shell's system has a space of each spin; a closed shell's one of both.
    bool open = false;
    Acc ss_alpha(0), ss_beta(0);
    for (std::size_t i = 0; i < spaces.size(); ++i) {
      if (spaces[i].system != static_cast<int>(s)) continue;
      if (spaces[i].spin == SpaceSpin::beta) ss_beta = ss[i];
      else ss_alpha = ss[i];
      open = open || spaces[i].spin != SpaceSpin::both;
    }
    result.opposite_spin = double(os[s]);
    result.same_spin = double(ss_alpha + ss_beta);
    result.same_spin_alpha = open ? double(ss_alpha) : 0.5 * result.same_spin;
    result.same_spin_beta = open ? double(ss_beta) : 0.5 * result.same_spin;
    result.block_pairs = static_cast<Index>(npairs);
    result.pair_imbalance = layout.predicted_imbalance;
    result.pairs_away = layout.pairs_away;
    const double sums[] = {result.opposite_spin, result.same_spin};
    require_finite(step_name(Mp2Step::pair_energy), "the pair-energy sum", sums, 2);
  }
}

// DF-MP2 in the element types of a precision: W for the GEMMs and the fitted tensor, F for the metric and the
// fitting, Acc for the energy sums. The four steps of chem/mp2/dfmp2.hpp, on this rank's share of the work (Mp2Layout);
// where the blocks of the tensor live is OccupiedBlocks' business.
template <class W, class F, class Acc>
void run_typed(const std::vector<Mp2System>& systems, const DfMp2Options& options, linalg::Kernels& kernels,
               std::vector<DfMp2Result>& results) {
  linalg::SerialComm alone;
  linalg::Comm& comm = options.comm != nullptr ? *options.comm : alone;
  const DfMp2Input& shared = systems.front().input;  // the metric and integrals every system shares
  const std::vector<SpaceOrbitals> orbitals = spaces_of(systems);
  const std::vector<SpinSpace> spaces = mp2_spaces(systems);
  const Index rows = orbitals.back().row0 + orbitals.back().space.rows();
  const Index naux = shared.three_index->naux();
  const BlockPlan& plan = results.front().plan;
  const Mp2Layout layout = make_layout(*shared.three_index, plan.aux_block, spaces, plan.occupied_block, comm.size(),
                                       comm.rank());
  std::vector<linalg::PhaseStats> stats(mp2_step_names().size());
  const auto traffic_before = comm.traffic();
  // Each step: its traffic counted under its phase, its time for the per-rank table, its peak memory measured.
  auto step = [&](Mp2Step s, const auto& body) {
    comm.set_phase(mp2_phase_name(s));
    Stopwatch clock;
    body();
    stats[static_cast<std::size_t>(s)].seconds += clock.seconds();
    if (options.phase_done) options.phase_done(s);
  };

  // 1. The metric factor L (or J^-1/2), on every rank, or distributed over them.
  MatrixT<F> factor;
  linalg::DistributedMatrix grid_factor;
  linalg::InverseSqrtReport metric_report;
  const bool on_grid = std::is_same_v<W, double> && std::is_same_v<F, double> &&
                       options.dense != nullptr &&
                       distributed_metric(options.metric, options.precision, naux, comm.size(),
                                          options.distributed_min_order);
  step(Mp2Step::metric, [&] {
    if (on_grid) grid_factor = distributed_metric_factor(shared, naux, *options.dense, comm, kernels);
    else comm.checked([&] { factor = metric_factor<F>(*shared.metric, options, kernels, metric_report); });
  });

  // 2. A = (P|ia) for this rank's auxiliary blocks, into the occupied blocks' rows.
  std::unique_ptr<OccupiedBlocks<W>> blocks;
  ScreeningReport screening{options.screening.enabled, options.screening.threshold, options.screening.block, 0, 0};
  step(Mp2Step::transform, [&] {
    comm.checked([&] {
      blocks = std::make_unique<OccupiedBlocks<W>>(layout, spaces, naux, plan, options.scratch_folder, comm, kernels);
      transform<W>(*shared.three_index, orbitals, options, blocks->aux_blocks(), kernels, screening,
                   [&](Index p0, Index np, const W* a) { blocks->store_columns(p0, np, a, rows); });
    });
    judge_screening(options.screening, screening, comm);
  });

  // 3. B = A L^-T (or A J^-1/2), block by block.
  step(Mp2Step::fitting, [&] {
    if (on_grid) {
      fit_on_grid(*blocks, grid_factor, options, naux, comm, kernels);
      grid_factor = {};
      return;
    }
    blocks->fit_each([&](MatrixViewT<W> block) {
      fit<W, F>(block, factor, options.metric, plan.fit_rows, kernels);
      require_finite(step_name(Mp2Step::fitting), "the fitted tensor B", block.data, block.rows * block.cols);
    });
  });

  // 4. The pair energies of every occupied block pair (I, J): (ia|jb) = B_I B_J^T, then the energy sums.
  std::vector<Vector> eps_occ, eps_vir;  // per space: active occupied, virtual
  for (const auto& o : orbitals) {
    eps_occ.push_back(o.eps->segment(o.space.nfrozen(), o.space.nact));
    eps_vir.push_back(o.eps->tail(o.space.nvir));
  }
  // A system of two spaces is an open shell (one spin each); of one, closed (both spins alike).
  const std::size_t npairs = layout.pairs.size();
  std::vector<double> energies(2 * npairs, 0.0);  // (os, ss) per pair: this rank's, then summed over the ranks
  step(Mp2Step::pair_energy, [&] {
    MatrixT<W> workspace;
    long long done = 0;
    const long long mine = static_cast<long long>(std::count(layout.pair_rank.begin(), layout.pair_rank.end(),
                                                             comm.rank()));
    blocks->for_each_pair([&](std::size_t k, ConstMatrixViewT<W> b_i, ConstMatrixViewT<W> b_j) {
      const PairEnergy e = pair_energy<W, Acc>(layout.pairs[k], b_i, b_j, eps_occ, eps_vir, kernels, workspace);
      energies[2 * k] = e.opposite_spin;
      energies[2 * k + 1] = e.same_spin;
      if (options.progress) options.progress(mp2_phase_name(Mp2Step::pair_energy), ++done, mine);
    });
    // Each pair's energies come from the one rank that computed it (the others add exact zeros).
    comm.sum(energies.data(), energies.size());
  });

  const auto rank_stats = comm.gather(step_stats(stats, kernels.log(), traffic_before, comm.traffic()));
  sum_pair_energies<Acc>(systems, spaces, layout, energies, results);
  for (DfMp2Result& result : results) {
    result.metric_report = metric_report;
    result.screening = screening;
    result.ranks = rank_stats;
  }
}

}  // namespace

std::vector<SpinSpace> mp2_spaces(const std::vector<Mp2System>& systems) {
  std::vector<SpinSpace> spaces;
  for (const auto& o : spaces_of(systems)) spaces.push_back(o.space);
  return spaces;
}

BlockPlan plan_for(const DfMp2Input& in, const DfMp2Options& options, const linalg::Backend& backend,
                   double memory_bytes, Mp2Storage storage, int ranks) {
  const bool ao = in.three_index->form() == ThreeIndexForm::ao;
  return plan_blocks(in.three_index->form(), ao ? in.mo_coefficients->rows() : 0,
                     mp2_spaces({{in, options.nfrozen}}), in.three_index->naux(), memory_bytes, options.precision,
                     options.metric, options.screening.enabled, storage,
                     working_copies_of(backend, options.precision, options.step_modes), ranks,
                     in.three_index->largest_block(1));
}

namespace {

// The orbitals of one system can be correlated: a frozen core that leaves at least one alpha orbital, and every
// active occupied orbital below every virtual one.
void check_orbitals(const std::vector<SpaceOrbitals>& spaces, const std::vector<Mp2System>& systems) {
  for (std::size_t s = 0; s < spaces.size(); ++s) {
    const SpaceOrbitals& o = spaces[s];
    const Index nocc = o.space.nocc, nact = o.space.nact, nvir = o.space.nvir, nfrozen = o.space.nfrozen();
    const bool beta = o.space.spin == SpaceSpin::beta;
    // The frozen core leaves at least one alpha orbital to correlate; the beta space may be left with none (a
    // doublet with one beta electron in its core, or none at all).
    const Index most = beta ? nocc : nocc - 1;
    if (nfrozen < 0 || nfrozen > most) {
      throw std::logic_error(fmt::format("run_dfmp2: nfrozen {} outside 0..{}", nfrozen, most));
    }
    if (nact == 0) continue;
    // MP2 denominators must stay negative; a HOMO at or above the LUMO means the orbitals are not a valid
    // reference (or not sorted), and the energy would be meaningless.
    const double homo = o.eps->segment(nfrozen, nact).maxCoeff(), lumo = o.eps->tail(nvir).minCoeff();
    if (homo >= lumo) {
      throw NumericalError(fmt::format(
          "orbital energies{}{}: highest occupied ({:.6f}) is not below lowest virtual ({:.6f}); MP2 denominators "
          "would vanish",
          systems.size() > 1 ? fmt::format(" of system {}", o.space.system + 1) : std::string(),
          o.space.spin == SpaceSpin::both ? "" : (beta ? " (beta)" : " (alpha)"), homo, lumo));
    }
  }
}

}  // namespace

DfMp2Result run_dfmp2(const DfMp2Input& in, const BlockPlan& plan, const DfMp2Options& options,
                      linalg::Kernels& kernels) {
  return run_dfmp2(std::vector<Mp2System>{{in, options.nfrozen}}, plan, options, kernels).front();
}

std::vector<DfMp2Result> run_dfmp2(const std::vector<Mp2System>& systems, const BlockPlan& plan,
                                   const DfMp2Options& options, linalg::Kernels& kernels) {
  if (systems.empty()) throw std::logic_error("run_dfmp2: no system");
  const DfMp2Input& shared = systems.front().input;
  const bool ao = shared.three_index->form() == ThreeIndexForm::ao;
  for (const Mp2System& sys : systems) {
    const DfMp2Input& in = sys.input;
    if (in.unrestricted() && !ao) throw std::logic_error("run_dfmp2: open-shell orbitals need AO-form integrals");
    if (ao && in.mo_coefficients == nullptr) throw std::logic_error("run_dfmp2: AO-form integrals need MO coefficients");
    if (!ao && systems.size() > 1) throw std::logic_error("run_dfmp2: several systems need AO-form integrals");
  }
  const std::vector<SpaceOrbitals> spaces = spaces_of(systems);
  check_orbitals(spaces, systems);
  if (options.screening.enabled && !ao) {
    throw std::logic_error("run_dfmp2: screening applies to AO-form integrals only");
  }
  linalg::SerialComm alone;
  const linalg::Comm& comm = options.comm != nullptr ? *options.comm : alone;
  if (plan.ranks != comm.size() || plan.occupied_block < 1 || plan.aux_block < 1) {
    throw std::logic_error(fmt::format("run_dfmp2: a plan for {} ranks run on {}", plan.ranks, comm.size()));
  }

  // The plan is for these spaces (plan_blocks records them); a plan made by hand for tests records none.
  if (!plan.spaces.empty() && plan.spaces != mp2_spaces(systems)) {
    throw std::logic_error("run_dfmp2: a plan made for other spaces (occupied, active or virtual counts, spins)");
  }

  std::vector<DfMp2Result> results(systems.size());
  for (std::size_t s = 0; s < systems.size(); ++s) {
    const DfMp2Input& in = systems[s].input;
    DfMp2Result& result = results[s];
    result.unrestricted = in.unrestricted();
    for (const linalg::Vector* terms : {in.singles_alpha, in.singles_beta})
      if (terms != nullptr) result.singles += terms->tail(terms->size() - systems[s].nfrozen).sum();
    result.nfrozen = systems[s].nfrozen;
    // The system's first space (alpha, or both spins) and its last (beta, or the same one).
    const SpinSpace *alpha = nullptr, *last = nullptr;
    for (const SpaceOrbitals& o : spaces) {
      if (o.space.system != static_cast<int>(s)) continue;
      if (alpha == nullptr) alpha = &o.space;
      last = &o.space;
    }
    result.nact = alpha->nact;
    result.nvir = alpha->nvir;
    result.nact_beta = last->nact;
    result.nvir_beta = last->nvir;
    result.naux = shared.three_index->naux();
    result.precision = options.precision;
    result.metric = options.metric;
    result.step_modes = step_matmul_modes(options.precision, options.step_modes);
    result.eigh_threshold = options.eigh_threshold;
    result.plan = plan;
  }
  switch (options.precision) {
    case Precision::fp64: run_typed<double, double, double>(systems, options, kernels, results); break;
    case Precision::fp32: run_typed<float, float, float>(systems, options, kernels, results); break;
    case Precision::mixed: run_typed<float, double, double>(systems, options, kernels, results); break;
    case Precision::bf16:
    case Precision::bf16x3: {
      // The Kernels object applies each step's mode to the backend before each call, so nothing is left set
      // on the backend for the next run. UnsupportedError here on a backend without the mode.
      for (const auto& [step, mode] : results.front().step_modes)
        kernels.set_step_matmul_mode(step, mode);
      run_typed<float, float, float>(systems, options, kernels, results);
      break;
    }
  }
  return results;
}

}  // namespace dfmp2::chem
