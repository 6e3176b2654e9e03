// DF-MP2's memory plan (chem/mp2/dfmp2.hpp plan_blocks): what each phase holds for blocks of a given size, on one
// backend and rank count, and the largest blocks that fit in the memory given.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "chem/mp2/dfmp2.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::Index;

namespace {

// Element sizes of the three precisions' parts: W for the GEMMs and the fitted tensor, F for the metric and the
// fitting.
double work_bytes(Precision p) { return p == Precision::fp64 ? 8.0 : 4.0; }
double fit_bytes(Precision p) {
  return p == Precision::fp32 || p == Precision::bf16 || p == Precision::bf16x3 ? 4.0 : 8.0;
}

// The transformation's working set per auxiliary block, at most.
constexpr double kTransformBlockBytes = 256.0 * 1024 * 1024;

Index ceil_div(Index a, Index b) { return (a + b - 1) / std::max<Index>(b, 1); }

// What the plan needs of the spaces: the rows of A and B, the orbitals held, and the largest space's orbital and
// virtual counts (a block of nb orbitals has at most nb nvir rows; the transformation works on one space at a time).
struct SpacesSize {
  Index rows = 0, nact = 0, nvir = 0, nact_total = 0, mo_stored = 0, nmo_held = 0;
  const std::vector<SpinSpace>& spaces;
  explicit SpacesSize(const std::vector<SpinSpace>& s) : spaces(s) {
    for (const SpinSpace& sp : spaces) {
      rows += sp.rows();
      nact = std::max(nact, sp.nact);
      nvir = std::max(nvir, sp.nvir);
      nact_total += sp.nact;
      mo_stored += sp.nocc * sp.nvir;
      nmo_held += sp.nact + sp.nvir;
    }
  }
  // Occupied blocks of nb orbitals over every space.
  Index blocks(Index nb) const {
    Index n = 0;
    for (const SpinSpace& sp : spaces) n += ceil_div(sp.nact, nb);
    return n;
  }
};

// What DF-MP2's phases hold for one problem on one backend and rank count, by the sizes of its blocks: plan_blocks
// chooses the blocks with it.
class BlockPlanner {
 public:
  BlockPlanner(ThreeIndexForm form, Index nbf, const std::vector<SpinSpace>& spaces, Index naux, double memory_bytes,
               Precision precision, MetricMethod metric, bool screening, double working_copies, int ranks,
               Index aux_unit, bool distributed_factor)
      : size_(spaces), naux_(naux), memory_bytes_(memory_bytes), w_(work_bytes(precision)), f_(fit_bytes(precision)),
        copies_(working_copies), ranks_(ranks), distributed_(ranks > 1), distributed_factor_(distributed_factor) {
    // The metric factor, plus the temporaries of an inverse square root (eigh: eigenvectors scaled; Newton-Schulz:
    // four iterates), which are gone before the transformation starts but count towards the peak. Every rank holds
    // the factor (the fitting is row-local), or its share of it on the grid: its block-cyclic part, and during the
    // metric step the same again laid out for the solves.
    metric_bytes_ = f_ * double(naux) * double(naux) / (distributed_factor ? double(ranks) : 1.0);
    // A backend's working copies (device models) of the factor as it is made, and again by the fitting's TRSM.
    inverse_sqrt_bytes_ = metric_bytes_ * ((distributed_factor                   ? 1.0
                                            : metric == MetricMethod::eigh            ? 1.0
                                            : metric == MetricMethod::newton_schulz ? 4.0
                                                                                    : 0.0) +
                                           copies_);
    fit_fixed_ = copies_ * metric_bytes_;
    const double orbitals = w_ * double(nbf) * double(size_.nmo_held);
    fixed_ = metric_bytes_ + orbitals;
    // The auxiliary columns one rank transforms, at most: an even share, plus one unit where a shell straddles it.
    columns_ = distributed_ ? std::min(naux, ceil_div(naux, ranks) + std::max<Index>(aux_unit, 1)) : naux;
    // Per auxiliary function in the transformation: the AO block as read (double), its converted copy and the
    // half-transformed block; or the MO block as stored (all occupied orbitals, before the frozen core is dropped).
    // Screening adds the BSR copy of the block (at most the dense size, plus edge padding). Then the transformed
    // block before it is cut into the occupied blocks' rows.
    const double w = w_, copies = copies_;
    const Index nact = size_.nact;
    per_aux_ = (form == ThreeIndexForm::ao
                    ? double(nbf) * (8.0 * double(nbf) + (w == 8.0 ? 0.0 : w * double(nbf)) + w * double(nact) +
                                     (screening ? 1.25 * w * double(nbf) : 0.0) + copies * w * double(nbf + nact))
                    : 8.0 * double(size_.mo_stored)) +
               w * double(size_.rows);
    // Fitting in row chunks needs an input and an output row buffer in F (at most), and the backend's copies of a
    // row.
    chunked_fit_ = metric != MetricMethod::cholesky || w_ != f_ || copies_ > 0;
    per_fit_row_ = chunked_fit_ ? (2.0 + copies_) * f_ * double(naux) : 0.0;
  }

  BlockPlan plan_for(Mp2Storage s) const {
    BlockPlan plan;
    plan.storage = s;
    plan.ranks = ranks_;
    plan.fixed_bytes = fixed_;
    const bool scratch = s == Mp2Storage::scratch;
    // The A store: this rank's columns of every block (on one rank, the fitted tensor itself).
    const double a_store = scratch ? 0.0 : w_ * double(size_.rows) * double(columns_);
    const double available = memory_bytes_ - fixed_;
    refuse_unless_the_least_fits(s, a_store);
    // Blocks beyond kTransformBlockBytes gain nothing in GEMM speed (the transformation's GEMMs are already
    // nact x (nbf * block) wide) but cost fresh pages the kernel must clear, and leave the caches cold: measured on
    // (H2O)16 in mixed precision, one 2.4 GB block spent 1.5 s of 9 s clearing pages. With ranks, at most one share
    // of the columns, so that every rank has blocks to transform.
    const Index by_bytes = std::max<Index>(1, static_cast<Index>(kTransformBlockBytes / std::max(per_aux_, 1.0)));
    const Index share = distributed_ ? ceil_div(naux_, ranks_) : naux_;
    plan.aux_block = std::clamp<Index>(
        std::min({static_cast<Index>((available - a_store) / per_aux_), by_bytes, share}), 1, std::max<Index>(naux_, 1));
    const Index nb = occupied_block(scratch, a_store, available);
    plan.occupied_block = nb;
    const Sizes at_one_row = sizes(nb, 1, scratch, a_store);
    plan.fit_rows = fit_rows_for(nb, at_one_row.fitting - (chunked_fit_ ? per_fit_row_ + fit_fixed_ : 0.0), available);
    const Sizes sz = sizes(nb, plan.fit_rows, scratch, a_store);
    plan.metric_bytes = fixed_ + inverse_sqrt_bytes_;
    plan.transform_bytes = fixed_ + a_store + per_aux_ * double(plan.aux_block);
    plan.fitting_bytes = fixed_ + std::max(sz.redistribute, sz.fitting);
    plan.pair_bytes = fixed_ + sz.pairs;
    plan.peak_bytes = std::max({plan.metric_bytes, plan.transform_bytes, plan.fitting_bytes, plan.pair_bytes});
    // On scratch: the A file of this rank's columns and, with ranks, the B file of the blocks it holds.
    if (scratch) {
      const Index held = distributed_ ? held_rows(nb) : 0;
      plan.scratch_bytes = w_ * double(size_.rows) * double(columns_) + w_ * double(held) * double(naux_);
    }
    return plan;
  }

 private:
  // What the phases after the transformation hold, for occupied blocks of nb orbitals fitted fit_rows at a time.
  struct Sizes {
    double redistribute, fitting, pairs;
  };

  // The rows of B one rank holds with blocks of nb orbitals.
  Index held_rows(Index nb) const { return std::min(size_.rows, ceil_div(size_.blocks(nb), ranks_) * nb * size_.nvir); }

  Sizes sizes(Index nb, Index fit_rows, bool scratch, double a_store) const {
    const double w = w_;
    const Index nvir = size_.nvir;
    const Index held = distributed_ ? held_rows(nb) : size_.rows;
    const double block = w * double(nb) * double(nvir) * double(naux_);
    const double b_store = scratch ? 0.0 : distributed_ ? w * double(held) * double(naux_) : a_store;
    const double g = w * std::pow(double(nb) * double(nvir), 2);
    // A backend's working copies cover the product G and both of its operand blocks.
    const double copied = copies_ * (g + 2.0 * block);
    const double fit_work = chunked_fit_ ? per_fit_row_ * double(fit_rows) + fit_fixed_ : 0.0;
    Sizes out;
    // Redistribution: in memory both stores at once; on scratch, one round at a time: this rank's piece of each
    // holder's block, and the block it receives.
    out.redistribute = !distributed_ ? 0.0
                       : scratch     ? w * double(nb * nvir) * double(columns_ * ranks_) + block
                                     : a_store + b_store;
    // A distributed solve copies this rank's block into the grid's padded rows.
    out.fitting = (scratch ? block : b_store) + fit_work + (distributed_factor_ ? block : 0.0);
    // Pairs: the anchor block (scratch), two partner blocks (the next one arrives while the current one is
    // used; local blocks in memory need none), and on scratch with ranks a block read to lend to another rank.
    // With ranks, a fetched anchor too (a pair of two other ranks' blocks, Mp2Layout).
    const double partners = scratch ? 2.0 * block : distributed_ ? 3.0 * block : 0.0;
    out.pairs = (scratch ? block : b_store) + partners + (scratch && distributed_ ? block : 0.0) + g + copied;
    return out;
  }

  // PhaseTooLarge, naming the phase whose smallest blocks do not fit, unless every phase fits with one orbital per
  // block and one auxiliary function per transformation block.
  void refuse_unless_the_least_fits(Mp2Storage s, double a_store) const {
    const bool scratch = s == Mp2Storage::scratch;
    const Sizes least = sizes(1, 1, scratch, a_store);
    const double transform_least = a_store + per_aux_;
    const double phase_min =
        std::max({transform_least, least.redistribute, least.fitting, least.pairs, inverse_sqrt_bytes_});
    if (memory_bytes_ - fixed_ >= phase_min) return;
    const std::string& phase = mp2_phase_name(phase_min == transform_least      ? Mp2Step::transform
                                               : phase_min == least.pairs        ? Mp2Step::pair_energy
                                               : phase_min == inverse_sqrt_bytes_ ? Mp2Step::metric
                                                                                  : Mp2Step::fitting);
    const std::string store = scratch ? std::string()
                                      : fmt::format("fitted tensor {}{}, ", linalg::format_bytes(a_store),
                                                    distributed_ ? " (this rank's share)" : "");
    throw PhaseTooLarge(
        fmt::format("{} ({} storage)", phase, mp2_storage_name(s)), fixed_ + phase_min,
        fmt::format("memory: {} is too small for the {} ({} storage); it needs at least {} ({}metric {}), raise "
                    "'memory'{}",
                    linalg::format_bytes(memory_bytes_), phase, mp2_storage_name(s),
                    linalg::format_bytes(fixed_ + phase_min), store, linalg::format_bytes(metric_bytes_),
                    scratch ? "" : " or set mp2_storage: scratch"));
  }

  // At least four occupied blocks (ten block pairs) once there are 32 or more active orbitals, and with ranks at
  // least two blocks per rank where the blocks' size allows it: the pair list is the unit of work (each pair's GEMM
  // and reduction use the backend's threads; the ranks share the pairs, and only ranks that hold blocks compute
  // pairs) and of progress reporting. A block keeps at least 8 orbitals or 1024 rows (orbitals x nvir), whichever is
  // fewer orbitals, so that the pair GEMMs stay large enough to run near the DGEMM rate. Then as large as fits.
  Index occupied_block(bool scratch, double a_store, double available) const {
    const Index nvir = size_.nvir;
    const Index smallest = std::max<Index>(1, std::min<Index>(8, ceil_div(1024, std::max<Index>(nvir, 1))));
    const Index balanced =
        std::max<Index>(smallest, ceil_div(size_.nact_total, std::max<Index>(4, 2 * Index(ranks_))));
    Index nb = std::min<Index>(std::max<Index>(size_.nact, 1), balanced);
    auto need = [&](Index n) {
      const Sizes sz = sizes(n, 1, scratch, a_store);
      return std::max({sz.redistribute, sz.fitting, sz.pairs});
    };
    while (nb > 1 && need(nb) > available) --nb;
    return nb;
  }

  Index fit_rows_for(Index nb, double store, double available) const {
    if (!chunked_fit_) return nb * size_.nvir;  // TRSM in place
    // Fitting chunks beyond a few thousand rows gain nothing in GEMM speed.
    return std::clamp<Index>(static_cast<Index>((available - store - fit_fixed_) / std::max(per_fit_row_, 1.0)), 1,
                             std::clamp<Index>(nb * size_.nvir, 1, 8192));
  }

  const SpacesSize size_;
  const Index naux_;
  const double memory_bytes_, w_, f_, copies_;
  const int ranks_;
  const bool distributed_, distributed_factor_;
  double metric_bytes_ = 0, inverse_sqrt_bytes_ = 0, fit_fixed_ = 0, fixed_ = 0, per_aux_ = 0, per_fit_row_ = 0;
  Index columns_ = 0;
  bool chunked_fit_ = false;
};

}  // namespace

BlockPlan plan_blocks(ThreeIndexForm form, Index nbf, const std::vector<SpinSpace>& spaces, Index naux,
                      double memory_bytes, Precision precision, MetricMethod metric, bool screening,
                      Mp2Storage storage, double working_copies, int ranks, Index aux_unit, bool distributed_factor) {
  const BlockPlanner planner(form, nbf, spaces, naux, memory_bytes, precision, metric, screening, working_copies,
                             ranks, aux_unit, distributed_factor);
  BlockPlan plan;
  if (storage != Mp2Storage::automatic) {
    plan = planner.plan_for(storage);
  } else {
    try {
      plan = planner.plan_for(Mp2Storage::memory);
    } catch (const ResourceError&) {
      plan = planner.plan_for(Mp2Storage::scratch);  // its own error names what scratch storage needs
    }
  }
  plan.spaces = spaces;
  return plan;
}

std::vector<SpinSpace> system_spaces(int system, bool open_shell, Index nmo, Index nfrozen, Index nocc_alpha,
                                     Index nocc_beta) {
  if (!open_shell) return {SpinSpace{nocc_alpha, nocc_alpha - nfrozen, nmo - nocc_alpha, system, SpaceSpin::both}};
  return {SpinSpace{nocc_alpha, nocc_alpha - nfrozen, nmo - nocc_alpha, system, SpaceSpin::alpha},
          SpinSpace{nocc_beta, nocc_beta - nfrozen, nmo - nocc_beta, system, SpaceSpin::beta}};
}

}  // namespace dfmp2::chem
