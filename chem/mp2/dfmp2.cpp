#include "chem/mp2/dfmp2.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <cmath>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>

#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"
#include "linalg/sparse.hpp"
#include "chem/integrals/distribution.hpp"
#include "chem/mp2/occupied_blocks.hpp"
#include "chem/io/scratch.hpp"

namespace dfmp2::chem {

using linalg::ConstMatrixViewT;
using linalg::Index;
using linalg::Matrix;
using linalg::MatrixT;
using linalg::MatrixViewT;
using linalg::Stopwatch;
using linalg::Trans;
using linalg::Vector;
using linalg::VectorT;

namespace {

template <class T>
std::string dtype() {
  return std::string(linalg::dtype_name(linalg::dtype_of<T>()));
}

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

}  // namespace

const linalg::NameTable<Precision>& precision_names() {
  static const linalg::NameTable<Precision> t = {{Precision::fp64, "fp64"},
                                                                    {Precision::fp32, "fp32"},
                                                                    {Precision::mixed, "mixed"},
                                                                    {Precision::bf16, "bf16"},
                                                                    {Precision::bf16x3, "bf16x3"}};
  return t;
}

const linalg::NameTable<MetricMethod>& metric_names() {
  static const linalg::NameTable<MetricMethod> t = {
      {MetricMethod::cholesky, "cholesky"}, {MetricMethod::eigh, "eigh"}, {MetricMethod::newton_schulz, "newton-schulz"}};
  return t;
}

const linalg::NameTable<Mp2Storage>& mp2_storage_names() {
  static const linalg::NameTable<Mp2Storage> t = {
      {Mp2Storage::automatic, "auto"}, {Mp2Storage::memory, "memory"}, {Mp2Storage::scratch, "scratch"}};
  return t;
}

std::string precision_name(Precision p) { return linalg::name_in(precision_names(), p); }
std::string metric_name(MetricMethod m) { return linalg::name_in(metric_names(), m); }
std::string mp2_storage_name(Mp2Storage s) { return linalg::name_in(mp2_storage_names(), s); }

const linalg::NameTable<Mp2Step>& mp2_step_names() {
  static const linalg::NameTable<Mp2Step> t = {{Mp2Step::metric, "metric"},
                                                                  {Mp2Step::transform, "transform"},
                                                                  {Mp2Step::fitting, "fitting"},
                                                                  {Mp2Step::pair_energy, "pair_energy"}};
  return t;
}

const std::string& step_name(Mp2Step step) {
  for (const auto& [s, name] : mp2_step_names())
    if (s == step) return name;
  throw std::logic_error("step_name: unknown step");
}

const std::string& mp2_phase_name(Mp2Step step) {
  static const linalg::NameTable<Mp2Step> t = {{Mp2Step::metric, "MP2 metric"},
                                               {Mp2Step::transform, "MP2 transform"},
                                               {Mp2Step::fitting, "MP2 fitting"},
                                               {Mp2Step::pair_energy, "MP2 pair energies"}};
  for (const auto& [s, name] : t)
    if (s == step) return name;
  throw std::logic_error("mp2_phase_name: unknown step");
}

const std::vector<std::string>& matmul_steps() {
  static const std::vector<std::string> steps = linalg::names_of(mp2_step_names());
  return steps;
}

std::map<std::string, linalg::MatmulMode> step_matmul_modes(Precision precision,
                                                            const std::map<std::string, linalg::MatmulMode>& overrides) {
  using linalg::MatmulMode;
  // Measured on water and methane (bench/README.md, "Device precisions"): operand rounding in the transformation
  // is amplified by the fitting (B = A L^-T: the inverse metric factor magnifies any error of A that is not in
  // the metric's well-conditioned span), so a bf16 transformation gives correlation energies wrong by more than
  // 100 % (water 1.9, methane 10.7 relative) even with an fp32 metric and fitting, and a bf16x3 one errors 700x
  // fp32's. The pair energies only square and sum (ia|jb): bf16 there costs about 1e-4 relative. Hence:
  //   bf16    transform bf16x3, pair energies bf16 (1.3e-5 and 1.6e-4 relative on water and methane);
  //   bf16x3  transform fp32, pair energies bf16x3 (8e-7 and 1.2e-6 relative);
  // metric and fitting fp32 in both. device.step_precision overrides any step explicitly.
  std::map<std::string, MatmulMode> modes;
  const bool device = precision == Precision::bf16 || precision == Precision::bf16x3;
  for (const auto& step : matmul_steps()) modes[step] = MatmulMode::fp32;
  if (precision == Precision::bf16) {
    modes[step_name(Mp2Step::transform)] = MatmulMode::bf16x3;
    modes[step_name(Mp2Step::pair_energy)] = MatmulMode::bf16;
  } else if (precision == Precision::bf16x3) {
    modes[step_name(Mp2Step::pair_energy)] = MatmulMode::bf16x3;
  }
  if (device)
    for (const auto& [step, mode] : overrides) modes[step] = mode;
  return modes;
}

double working_copies_of(const linalg::Backend& backend, Precision precision,
                         const std::map<std::string, linalg::MatmulMode>& step_modes) {
  double copies = 0;
  for (const auto& [step, mode] : step_matmul_modes(precision, step_modes))
    copies = std::max(copies, backend.working_copies(mode));
  return copies;
}

bool distributed_metric(MetricMethod metric, Precision precision, Index naux, int ranks, Index min_order) {
  return linalg::order_on_grid(naux, ranks, min_order) && metric == MetricMethod::cholesky &&
         precision == Precision::fp64;
}

double Mp2Layout::pair_cost(const OccupiedBlockPair& p) {
  return double(p.i1 - p.i0) * double(p.j1 - p.j0) * (p.diagonal() ? 0.5 : 1.0);
}

Mp2Layout make_layout(const ThreeIndexSource& source, Index aux_block, const std::vector<SpinSpace>& spaces,
                      Index occupied_block, int ranks, int rank) {
  Mp2Layout l;
  l.ranks = ranks;
  l.rank = rank;
  l.occupied_block = occupied_block;
  const Index naux = source.naux();
  // Auxiliary units (shells) to ranks by their middle, then each rank's run cut into blocks of at most aux_block.
  const auto runs = share_units(source.blocks(1), naux, ranks);
  l.col0.assign(static_cast<std::size_t>(ranks) + 1, naux);
  for (int r = ranks - 1; r >= 0; --r) {
    const auto& run = runs[static_cast<std::size_t>(r)];
    l.col0[static_cast<std::size_t>(r)] = run.empty() ? l.col0[static_cast<std::size_t>(r) + 1] : run.front().first;
  }
  for (int r = 0; r < ranks; ++r) {
    for (const auto& block : cut_blocks(runs[static_cast<std::size_t>(r)], aux_block)) {
      l.aux_blocks.push_back(block);
      l.aux_rank.push_back(r);
    }
  }
  // Occupied blocks of every space in turn, held in contiguous runs of about equal counts.
  for (std::size_t spin = 0; spin < spaces.size(); ++spin) {
    const Index nact = spaces[spin].nact;
    for (Index i0 = 0; i0 < nact; i0 += occupied_block) {
      l.occupied.emplace_back(i0, std::min(i0 + occupied_block, nact));
      l.occupied_spin.push_back(static_cast<int>(spin));
    }
  }
  const Index nbo = static_cast<Index>(l.occupied.size());
  for (Index b = 0; b < nbo; ++b) l.occupied_rank.push_back(static_cast<int>(b * Index(ranks) / nbo));
  // Pairs: every I >= J of one system over the blocks in order (within a space the pairs of occupied_block_pairs, in
  // its order). The systems' electrons do not meet: no pair across two.
  for (Index bi = 0; bi < nbo; ++bi) {
    for (Index bj = 0; bj <= bi; ++bj) {
      const auto& [i0, i1] = l.occupied[static_cast<std::size_t>(bi)];
      const auto& [j0, j1] = l.occupied[static_cast<std::size_t>(bj)];
      const int si = l.occupied_spin[static_cast<std::size_t>(bi)], sj = l.occupied_spin[static_cast<std::size_t>(bj)];
      const SpinSpace& space_i = spaces[static_cast<std::size_t>(si)];
      if (space_i.system != spaces[static_cast<std::size_t>(sj)].system) continue;
      const PairKind kind = si != sj ? PairKind::opposite_spin
                            : space_i.spin == SpaceSpin::both ? PairKind::closed_shell
                                                              : PairKind::same_spin;
      l.pairs.push_back({i0, i1, j0, j1, si, sj, kind});
      l.pair_blocks.emplace_back(bi, bj);
    }
  }
  // Who computes each pair (see the header): largest first, each to the less loaded of its holders, unless some
  // other rank (one that holds no block, say) is less loaded by more than the pair's cost; that rank then fetches both
  // blocks. So every rank computes pairs at any rank count, and a pair leaves its holders only where that balances.
  l.pair_rank.assign(l.pairs.size(), 0);
  std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
  std::vector<std::size_t> order(l.pairs.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return Mp2Layout::pair_cost(l.pairs[a]) > Mp2Layout::pair_cost(l.pairs[b]);
  });
  for (const std::size_t k : order) {
    const auto [bi, bj] = l.pair_blocks[k];
    const int ri = l.occupied_rank[static_cast<std::size_t>(bi)], rj = l.occupied_rank[static_cast<std::size_t>(bj)];
    const double li = load[static_cast<std::size_t>(ri)], lj = load[static_cast<std::size_t>(rj)];
    int r = li < lj || (li == lj && (bi + bj) % 2 == 1) ? ri : rj;
    const double cost = Mp2Layout::pair_cost(l.pairs[k]);
    const auto least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    if (load[static_cast<std::size_t>(least)] + cost < load[static_cast<std::size_t>(r)]) r = least;
    l.pair_rank[k] = r;
    load[static_cast<std::size_t>(r)] += cost;
  }
  const double mean = std::accumulate(load.begin(), load.end(), 0.0) / double(ranks);
  l.predicted_imbalance = mean > 0 ? *std::max_element(load.begin(), load.end()) / mean : 1.0;
  for (std::size_t k = 0; k < l.pairs.size(); ++k) {
    const auto [bi, bj] = l.pair_blocks[k];
    if (l.pair_rank[k] != l.occupied_rank[static_cast<std::size_t>(bi)] &&
        l.pair_rank[k] != l.occupied_rank[static_cast<std::size_t>(bj)])
      ++l.pairs_away;
  }
  return l;
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

namespace {

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
