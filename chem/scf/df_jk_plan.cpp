// The DF-J/K's plan: where its fitted three-index tensor lives (memory, scratch, or recomputed each build), chosen
// within the memory budget (measured on this machine when automatic), and its block sizes, the same on every rank.
#include "chem/scf/df_jk.hpp"
#include "chem/scf/scf_detail.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/name_table.hpp"

#include <Eigen/Cholesky>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "chem/integrals/distribution.hpp"
#include "chem/io/scratch.hpp"
#include "chem/scf/exchange_rows.hpp"
#include "chem/integrals/integrals.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using namespace scf_detail;

const linalg::NameTable<JkStorage>& jk_storage_names() {
  static const linalg::NameTable<JkStorage> t = {{JkStorage::automatic, "auto"},
                                                                    {JkStorage::memory, "memory"},
                                                                    {JkStorage::scratch, "scratch"},
                                                                    {JkStorage::recompute, "recompute"}};
  return t;
}

std::string jk_storage_name(JkStorage s) { return linalg::name_in(jk_storage_names(), s); }

Index df_jk_columns_per_rank(Index naux, Index max_shell, int ranks) {
  return ranks > 1 ? std::min(naux, (naux + ranks - 1) / ranks + std::max<Index>(max_shell, 1)) : naux;
}

namespace {

constexpr double kDouble = sizeof(double);

// The sizes that decide what the DF-J/K holds on each rank.
struct JkShape {
  Index nbf, naux, npacked, nocc, max_shell;
  int ranks;
  bool distributed_factor = false;  // the metric factor on the ranks' grid (jk_metric_on_grid)
  // The factor's bytes on one rank: all of it, or its grid share twice (as factored and laid out for the solves).
  double factor_bytes() const {
    return kDouble * double(naux) * double(naux) * (distributed_factor ? 2.0 / double(ranks) : 1.0);
  }
  // Copies of the rows a rank solves: one, and on the grid a second, its solve's padded matrix.
  double solve_copies() const { return distributed_factor ? 2.0 : 1.0; }
  Index columns() const { return df_jk_columns_per_rank(naux, max_shell, ranks); }
  // Bytes per row of a chunk the fitting solves, on one rank: its columns of the row and, with ranks, an even share
  // of the chunk's rows with all columns, received (twice on the grid, whose solve copies them into its padded
  // matrix).
  double fit_bytes_per_row() const {
    if (ranks == 1) return kDouble * double(naux);
    const double received = double((naux + ranks - 1) / ranks) * solve_copies();
    return kDouble * (double(columns()) + received);
  }
};

// Bytes of the per-block work of one iteration: the block of B (twice with scratch, where the next block is read
// while this one is used; with memory, the transposition's copy while B is stored), the larger of the exchange's
// gathered rows (chem/scf/exchange_rows.hpp, at most kMaxRows x nbf per function) and the orbital responses' unpacked
// squares (nbf^2 per function; only one of them is held at a time), and E = the rows' products (nbf nocc).
double block_bytes(JkStorage s, Index q, const JkShape& z) {
  const double buffers = s == JkStorage::scratch ? 2.0 : 1.0;
  const double rows_or_squares = double(z.nbf) * double(std::max(z.nbf, ExchangeRows::kMaxRows));
  return kDouble * double(q) * (buffers * double(z.npacked) + rows_or_squares + double(z.nbf) * double(z.nocc));
}

// Bytes held for the whole SCF besides the blocks: this rank's columns of B (memory), of the half-transformed H and,
// with ranks, its share of H's rows with all columns (recompute), the packed density and J, the metric factor, the
// exchange's row lists.
double fixed_bytes(JkStorage s, const JkShape& z) {
  double b = kDouble * (2.0 * double(z.npacked) + 2.0 * double(z.naux)) + z.factor_bytes();
  if (s != JkStorage::recompute) b += ExchangeRows::bytes(z.npacked, z.nbf);
  if (s == JkStorage::memory) b += kDouble * double(z.npacked) * double(z.columns());
  if (s == JkStorage::recompute) {
    b += kDouble * double(z.nbf) * double(z.nocc) * double(z.columns());
    // (solve_copies: the grid's solve copies it into its padded rows.)
    if (z.ranks > 1)
      b += z.solve_copies() * kDouble * double(z.nbf) * double((z.nocc + z.ranks - 1) / z.ranks) *
           double(z.naux);
  }
  return b;
}

// What building the stored B holds at its peak besides the fixed part: with ranks in memory, this rank's even
// share of the rows with all columns (twice on the grid, whose solve copies them into its padded matrix); on
// scratch, the fitting's chunk of `fit_rows` rows.
double build_bytes(JkStorage s, const JkShape& z, Index fit_rows) {
  if (s == JkStorage::memory && z.ranks > 1)
    return z.solve_copies() * kDouble * double((z.npacked + z.ranks - 1) / z.ranks) * double(z.naux);
  if (s == JkStorage::scratch) return double(fit_rows) * z.fit_bytes_per_row();
  return 0.0;
}

// Auxiliary functions per block beyond which the batched GEMM and SYRK gain nothing, while the unpacked squares
// (nbf^2 per function) keep growing.
constexpr Index kMaxAuxBlock = 256;

// The largest auxiliary block that fits beside the fixed part, at least one shell, at most kMaxAuxBlock and naux.
Index choose_block(JkStorage s, double budget, const JkShape& z) {
  const double left = budget - fixed_bytes(s, z);
  const double per = block_bytes(s, 1, z);
  return std::clamp<Index>(static_cast<Index>(left / per), std::max<Index>(z.max_shell, 1),
                           std::max<Index>(std::min(z.naux, kMaxAuxBlock), z.max_shell));
}

}  // namespace

bool jk_metric_on_grid(const DfJkOptions& options, Index naux, int ranks) {
  return options.dense != nullptr && linalg::order_on_grid(naux, ranks, options.distributed_min_order);
}

double df_jk_minimum_bytes(JkStorage storage, Index nbf, Index naux, Index npacked, Index nocc, Index max_shell,
                           int ranks, bool distributed_factor) {
  const JkShape z{nbf, naux, npacked, nocc, max_shell, ranks, distributed_factor};
  const double blocks = block_bytes(storage, std::max<Index>(max_shell, 1), z);
  // Fitting on scratch at least 64 rows at a time.
  const double build = build_bytes(storage, z, std::min<Index>(64, npacked));
  return fixed_bytes(storage, z) + std::max(blocks, build);
}

namespace {

// The sizes of the DF-J/K of `engine` on `ranks` ranks.
JkShape shape_of(const ThreeCenterEngine& engine, Index nocc, int ranks, const DfJkOptions& options) {
  Index max_shell = 1;
  const auto& starts = engine.shell_starts();
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) max_shell = std::max(max_shell, starts[s + 1] - starts[s]);
  return {engine.nbf(), engine.naux(), engine.npacked(), nocc, max_shell, ranks,
          jk_metric_on_grid(options, engine.naux(), ranks)};
}

// The machine's rate for the fit of recompute: that of a Cholesky factorisation (n^3 / 3 flops) of a metric-like
// matrix of the metric's order, up to 1,024 (beyond it the rate no longer grows, and the whole metric would be
// naux^2 on every rank), timed.
double factor_flop_rate(Index naux) {
  const Index n = std::clamp<Index>(naux, 1, 1024);
  Matrix metric = Matrix::Identity(n, n) * double(n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) metric(i, j) += 1.0 / (1.0 + double(i > j ? i - j : j - i));
  Stopwatch clock;
  const Eigen::LLT<Eigen::Ref<Matrix>> factor(metric);
  return double(n) * double(n) * double(n) / 3.0 / std::max(clock.seconds(), 1e-9);
}

// Scratch or recompute, by their measured costs over the expected iterations: one block of integrals is timed
// (and kept for the build), and a probe of the scratch folder's write rate is made with that block.
JkStorage measured_choice(const ThreeCenterEngine& engine, const JkShape& z,
                          const DfJkOptions& options, DfJkPlan& plan) {
  const double budget = options.memory_bytes;
  const double b_bytes = kDouble * double(z.npacked) * double(z.columns());
  const double recompute_need =
      df_jk_minimum_bytes(JkStorage::recompute, z.nbf, z.naux, z.npacked, z.nocc, z.max_shell, z.ranks,
                          z.distributed_factor);
  const bool recompute_fits = recompute_need <= budget;
  bool scratch_possible = !options.scratch_folder.empty();
  double free = -1;
  if (scratch_possible) {
    check_scratch_folder(options.scratch_folder);
    free = free_bytes(options.scratch_folder);
    if (free >= 0 && free < b_bytes * 1.05) scratch_possible = false;
  }
  if (!scratch_possible && recompute_fits) {
    plan.reason = fmt::format("the fitted tensor ({}) fits neither in memory nor in the scratch folder ({} free)",
                              linalg::format_bytes(b_bytes), linalg::format_bytes(free));
    return JkStorage::recompute;
  }
  if (!recompute_fits) {
    plan.reason = fmt::format("the fitted tensor ({}) does not fit in memory, and recomputing needs {} of it",
                              linalg::format_bytes(b_bytes), linalg::format_bytes(recompute_need));
    return JkStorage::scratch;
  }
  // Time one block of integrals, and the scratch folder's write rate on it.
  const auto probe = engine.blocks(std::max<Index>(z.max_shell, z.naux / 16)).front();
  std::vector<double> block(static_cast<std::size_t>((probe.second - probe.first) * z.npacked));
  Stopwatch integral_clock;
  engine.compute_packed(probe.first, probe.second, block.data());
  // One rank's pass: its share of the functions.
  const double per_pass =
      integral_clock.seconds() * double(z.columns()) / double(probe.second - probe.first);
  double rate = 0;
  {
    ScratchFile test(options.scratch_folder, "probe");
    Stopwatch io_clock;
    test.write(block.data(), block.size(), 0);
    test.sync();  // the disk's rate, not the page cache's
    rate = kDouble * double(block.size()) / std::max(io_clock.seconds(), 1e-6);
  }
  // Recompute: two passes of integrals and the fit of H (naux^2 nbf nocc flops at the metric factor's rate,
  // shared by the ranks).
  const double fit_rate = std::max(1e9, factor_flop_rate(z.naux));
  const double recompute = options.expected_iterations *
                           (2.0 * per_pass + double(z.naux) * double(z.naux) * double(z.nbf) * double(z.nocc) /
                                                 double(z.ranks) / fit_rate);
  // Scratch: one pass, written once, read and written once by the fitting and once more by the transposition to
  // the exchange's layout, read once per iteration.
  const double scratch = per_pass + (5.0 + options.expected_iterations) * b_bytes / rate;
  plan.reason = fmt::format(
      "the fitted tensor ({}) does not fit in memory; measured: integrals {:.2f} s per pass, scratch writes {:.2f} "
      "GB/s, so over {} iterations scratch {:.1f} s against recompute {:.1f} s",
      linalg::format_bytes(b_bytes), per_pass, rate / 1e9, options.expected_iterations, scratch, recompute);
  return scratch <= recompute ? JkStorage::scratch : JkStorage::recompute;
}

// The storage, the auxiliary block and what is held within options.memory_bytes on each rank.
void decide_storage(const ThreeCenterEngine& engine, const JkShape& z,
                    const DfJkOptions& options, DfJkPlan& plan) {
  const double budget = options.memory_bytes;
  auto minimum = [&](JkStorage s) {
    return df_jk_minimum_bytes(s, z.nbf, z.naux, z.npacked, z.nocc, z.max_shell, z.ranks, z.distributed_factor);
  };
  const double b_bytes = kDouble * double(z.npacked) * double(z.columns());  // this rank's share
  JkStorage s = options.storage;
  if (s == JkStorage::automatic) {
    if (minimum(JkStorage::memory) <= budget) {
      s = JkStorage::memory;
      plan.reason = fmt::format("the fitted tensor ({}{}) fits in memory", linalg::format_bytes(b_bytes),
                                z.ranks > 1 ? " on each rank" : "");
    } else {
      s = measured_choice(engine, z, options, plan);
    }
  } else {
    plan.reason = "asked for (scf.jk_storage)";
  }
  if (minimum(s) > budget) {
    throw PhaseTooLarge(fmt::format("SCF J/K ({} storage)", jk_storage_name(s)), minimum(s), fmt::format(
        "memory: {} is too small for the SCF's J/K with storage '{}' ({} auxiliary x {} packed functions); it needs at "
        "least {}, raise 'memory'{}",
        linalg::format_bytes(budget), jk_storage_name(s), z.naux, z.npacked, linalg::format_bytes(minimum(s)),
        s == JkStorage::memory ? " or let scf.jk_storage be auto" : ""));
  }
  if (s == JkStorage::scratch) plan.scratch_bytes = b_bytes;
  plan.storage = s;
  plan.aux_block = choose_block(s, budget, z);
  Index largest = 0;
  for (const auto& [p0, p1] : engine.blocks(plan.aux_block)) largest = std::max(largest, p1 - p0);
  plan.aux_block = largest;
  plan.memory_bytes = fixed_bytes(s, z) + block_bytes(s, largest, z);
  if (s == JkStorage::scratch) {
    // The fitting reads all auxiliary functions of a range of rows: as many rows as the budget allows.
    const double left = budget - fixed_bytes(s, z);
    plan.fit_rows = std::clamp<Index>(static_cast<Index>(left / z.fit_bytes_per_row()), 1, z.npacked);
  }
  plan.memory_bytes = std::max(plan.memory_bytes, fixed_bytes(s, z) + build_bytes(s, z, plan.fit_rows));
  // The blocks and the fitting's chunk are cut to the budget, so a plan over it is a miscount here, not the user's.
  if (plan.memory_bytes > budget)
    throw std::logic_error(fmt::format("DF-J/K plan: {} storage holds {} within a budget of {}", jk_storage_name(s),
                                       linalg::format_bytes(plan.memory_bytes), linalg::format_bytes(budget)));
}

// Rank 0's plan to every rank.
void share_plan(DfJkPlan& plan, linalg::Comm& comm) {
  if (comm.size() == 1) return;
  struct Wire {
    int storage;
    Index aux_block, fit_rows;
    double memory_bytes, scratch_bytes;
    char reason[1024];
  } w{};
  w.storage = static_cast<int>(plan.storage);
  w.aux_block = plan.aux_block;
  w.fit_rows = plan.fit_rows;
  w.memory_bytes = plan.memory_bytes;
  w.scratch_bytes = plan.scratch_bytes;
  std::strncpy(w.reason, plan.reason.c_str(), sizeof w.reason - 1);
  comm.broadcast(&w, sizeof w, 0);
  plan.storage = static_cast<JkStorage>(w.storage);
  plan.aux_block = w.aux_block;
  plan.fit_rows = w.fit_rows;
  plan.memory_bytes = w.memory_bytes;
  plan.scratch_bytes = w.scratch_bytes;
  plan.reason = w.reason;
}

}  // namespace

DfJkPlan plan_df_jk(const ThreeCenterEngine& engine, const BasisSet& /*jk_basis: the engine has it*/, Index nocc,
                    const DfJkOptions& options) {
  linalg::SerialComm alone;
  linalg::Comm& comm = options.comm != nullptr ? *options.comm : alone;
  const JkShape z = shape_of(engine, nocc, comm.size(), options);
  DfJkPlan plan;
  plan.nbf = z.nbf;
  plan.naux = z.naux;
  plan.npacked = z.npacked;
  plan.nocc = nocc;
  plan.ranks = z.ranks;
  // Decided by rank 0 for all: the automatic choice measures this machine, and every rank must cut alike.
  comm.checked([&] {
    if (comm.rank() == 0) decide_storage(engine, z, options, plan);
  });
  share_plan(plan, comm);
  return plan;
}

}  // namespace dfmp2::chem
