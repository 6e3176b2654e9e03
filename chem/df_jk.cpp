#include "chem/df_jk.hpp"
#include "linalg/name_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <type_traits>
#include <vector>

#include "chem/integrals.hpp"
#include "chem/scratch.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::ConstMatrixView;
using linalg::Index;
using linalg::Matrix;
using linalg::MatrixView;
using linalg::Stopwatch;
using linalg::Trans;

const linalg::NameTable<JkStorage>& jk_storage_names() {
  static const linalg::NameTable<JkStorage> t = {{JkStorage::automatic, "auto"},
                                                                    {JkStorage::memory, "memory"},
                                                                    {JkStorage::scratch, "scratch"},
                                                                    {JkStorage::recompute, "recompute"}};
  return t;
}

std::string jk_storage_name(JkStorage s) { return linalg::name_in(jk_storage_names(), s); }

namespace {

constexpr double kDouble = sizeof(double);

// Bytes of the per-block work of one iteration: the block of B (twice with scratch, where the next block is read
// while this one is used), its unpacked squares, X = B_Q C_occ.
double block_bytes(JkStorage s, Index q, Index nbf, Index npacked, Index nocc) {
  const double buffers = s == JkStorage::scratch ? 2.0 : 1.0;
  return kDouble * double(q) * (buffers * double(npacked) + double(nbf) * double(nbf) + double(nbf) * double(nocc));
}

// Bytes held for the whole SCF besides the blocks: B itself (memory), the half-transformed H (recompute), the packed
// density and J, the metric factor.
double fixed_bytes(JkStorage s, Index nbf, Index naux, Index npacked, Index nocc) {
  double b = kDouble * (2.0 * double(npacked) + double(naux) * double(naux) + 2.0 * double(naux));
  if (s == JkStorage::memory) b += kDouble * double(npacked) * double(naux);
  if (s == JkStorage::recompute) b += kDouble * double(naux) * double(nbf) * double(nocc);
  return b;
}

// Auxiliary functions per block beyond which the batched GEMM and SYRK gain nothing, while the unpacked squares
// (nbf^2 per function) keep growing.
constexpr Index kMaxAuxBlock = 256;

// The largest auxiliary block that fits beside the fixed part, at least one shell, at most kMaxAuxBlock and naux.
Index choose_block(JkStorage s, double budget, Index nbf, Index naux, Index npacked, Index nocc, Index max_shell) {
  const double left = budget - fixed_bytes(s, nbf, naux, npacked, nocc);
  const double per = block_bytes(s, 1, nbf, npacked, nocc);
  return std::clamp<Index>(static_cast<Index>(left / per), std::max<Index>(max_shell, 1),
                           std::max<Index>(std::min(naux, kMaxAuxBlock), max_shell));
}

}  // namespace

double df_jk_minimum_bytes(JkStorage storage, Index nbf, Index naux, Index npacked, Index nocc, Index max_shell) {
  const double blocks = block_bytes(storage, std::max<Index>(max_shell, 1), nbf, npacked, nocc);
  double fit = 0;
  if (storage == JkStorage::scratch) fit = kDouble * double(naux) * 64.0;  // fitting at least 64 rows at a time
  return fixed_bytes(storage, nbf, naux, npacked, nocc) + std::max(blocks, fit);
}

namespace {

class BlockedDfJk final : public JkBuilder {
 public:
  BlockedDfJk(const BasisSet& basis, const BasisSet& jk_basis, Index nocc, linalg::Kernels& kernels,
              const DfJkOptions& options, DfJkPlan& plan)
      : kernels_(kernels), engine_(jk_basis, basis), jk_name_(jk_basis.name) {
    nbf_ = engine_.nbf();
    naux_ = engine_.naux();
    npacked_ = engine_.npacked();
    Index max_shell = 1;
    const auto& starts = engine_.shell_starts();
    for (std::size_t s = 0; s + 1 < starts.size(); ++s) max_shell = std::max(max_shell, starts[s + 1] - starts[s]);

    Stopwatch metric_clock;
    factor_ = coulomb_metric(jk_basis);
    kernels_.record_host("scf_integrals", "metric", metric_clock.seconds(), {0, kDouble * double(factor_.size())});
    try {
      Stopwatch factor_clock;
      kernels_.cholesky("scf_fitting", linalg::Uplo::lower, linalg::view(factor_));
      // The machine's rate for the cost of recomputing (measured_choice): the factorisation's own.
      measured_flop_rate_ = double(naux_) * double(naux_) * double(naux_) / 3.0 / std::max(factor_clock.seconds(), 1e-9);
    } catch (const NumericalError& e) {
      throw NumericalError(fmt::format("JK fitting metric (P|Q) of '{}': {}", jk_basis.name, e.what()));
    }

    plan.nbf = nbf_;
    plan.naux = naux_;
    plan.npacked = npacked_;
    plan.nocc = nocc;
    decide(options, nocc, max_shell, plan);
    plan_ = plan;
    build();
  }

  // The fp32 K lives in the exchange() of the stored tensor; recompute builds K through H's fit in fp64 only.
  bool has_fp32_exchange() const override { return plan_.storage != JkStorage::recompute; }

  void compute(const Matrix& c_occ, Matrix& j, Matrix& k, bool fp32_exchange) override {
    if (fp32_exchange && !has_fp32_exchange()) throw std::logic_error("DF-J/K: no fp32 exchange with recompute");
    const Index nocc = c_occ.cols();
    // Packed density: D_mn for m >= n, off-diagonal elements doubled (they stand for D_nm too). Only the lower
    // triangle is read, so only it is computed.
    Matrix density(nbf_, nbf_);
    kernels_.syrk("scf_jk", linalg::Uplo::lower, Trans::no, 1.0, linalg::view(c_occ), 0.0, linalg::view(density));
    const auto& pm = engine_.packed_m();
    const auto& pn = engine_.packed_n();
    Matrix dp(npacked_, 1), jp = Matrix::Zero(npacked_, 1);
    for (Index x = 0; x < npacked_; ++x) dp(x) = density(pm[x], pn[x]) * (pm[x] == pn[x] ? 1.0 : 2.0);
    k.setZero(nbf_, nbf_);
    bool first_k = true;
    linalg::MatrixF c_occ_f, k_f;
    if (fp32_exchange) {
      c_occ_f = c_occ.cast<float>();
      k_f.setZero(nbf_, nbf_);
    } else if (work_f_.squares.capacity() > 0) {
      work_f_ = {};  // the fp32 iterations are over: their buffers go before the fp64 ones (the plan counts one set)
    }

    if (plan_.storage == JkStorage::recompute) {
      compute_recompute(c_occ, dp, jp, k);
    } else {
      // B is fitted: every block gives its share of J and K on its own.
      auto contract = [&](const double* b, Index q) {
        const ConstMatrixView block{b, npacked_, q, npacked_};
        Matrix d(q, 1);
        kernels_.gemm("scf_jk", Trans::yes, Trans::no, 1.0, block, linalg::view(dp), 0.0, linalg::view(d));
        kernels_.gemm("scf_jk", Trans::no, Trans::no, 1.0, block, linalg::view(d), 1.0, linalg::view(jp));
        if (fp32_exchange) exchange<float>(b, q, c_occ_f, nocc, k_f, first_k);
        else exchange<double>(b, q, c_occ, nocc, k, first_k);
        first_k = false;
      };
      if (plan_.storage == JkStorage::memory) {
        for (const auto& [p0, p1] : blocks_) contract(b_.data() + p0 * npacked_, p1 - p0);
      } else {
        stream_scratch(contract);
      }
    }
    if (fp32_exchange) k = k_f.cast<double>();
    // J from its packed form; K from its lower triangle.
    j.setZero(nbf_, nbf_);
    for (Index x = 0; x < npacked_; ++x) j(pm[x], pn[x]) = j(pn[x], pm[x]) = jp(x);
    k.triangularView<Eigen::StrictlyUpper>() = k.transpose();
  }

 private:
  // The storage, the auxiliary block and what is held, within options.memory_bytes.
  void decide(const DfJkOptions& options, Index nocc, Index max_shell, DfJkPlan& plan) {
    const double budget = options.memory_bytes;
    auto minimum = [&](JkStorage s) { return df_jk_minimum_bytes(s, nbf_, naux_, npacked_, nocc, max_shell); };
    const double b_bytes = kDouble * double(npacked_) * double(naux_);
    JkStorage s = options.storage;
    if (s == JkStorage::automatic) {
      if (minimum(JkStorage::memory) <= budget) {
        s = JkStorage::memory;
        plan.reason = fmt::format("the fitted tensor ({}) fits in memory", linalg::format_bytes(b_bytes));
      } else {
        s = measured_choice(options, nocc, max_shell, plan);
      }
    } else {
      plan.reason = "asked for (scf.jk_storage)";
    }
    if (minimum(s) > budget) {
      throw PhaseTooLarge(fmt::format("SCF J/K ({} storage)", jk_storage_name(s)), minimum(s), fmt::format(
          "memory: {} is too small for the SCF's J/K with storage '{}' ({} auxiliary x {} packed functions); it needs at "
          "least {}, raise 'memory'{}",
          linalg::format_bytes(budget), jk_storage_name(s), naux_, npacked_, linalg::format_bytes(minimum(s)),
          s == JkStorage::memory ? " or let scf.jk_storage be auto" : ""));
    }
    if (s == JkStorage::scratch) {
      check_scratch_folder(options.scratch_folder);
      const double free = free_bytes(options.scratch_folder);
      if (free >= 0 && free < b_bytes * 1.05) {
        throw ResourceError(fmt::format("scratch: the SCF's J/K needs {} in '{}', which has {} free; use another "
                                        "folder (key 'scratch') or scf.jk_storage: recompute",
                                        linalg::format_bytes(b_bytes), options.scratch_folder,
                                        linalg::format_bytes(free)));
      }
      scratch_folder_ = options.scratch_folder;
      plan.scratch_bytes = b_bytes;
    }
    plan.storage = s;
    plan.aux_block = choose_block(s, budget, nbf_, naux_, npacked_, nocc, max_shell);
    blocks_ = engine_.blocks(plan.aux_block);
    Index largest = 0;
    for (const auto& [p0, p1] : blocks_) largest = std::max(largest, p1 - p0);
    plan.aux_block = largest;
    plan.memory_bytes = fixed_bytes(s, nbf_, naux_, npacked_, nocc) + block_bytes(s, largest, nbf_, npacked_, nocc);
    if (s == JkStorage::scratch) {
      // The fitting reads all auxiliary functions of a range of rows: as many rows as the budget allows.
      const double left = budget - fixed_bytes(s, nbf_, naux_, npacked_, nocc);
      plan.fit_rows = std::clamp<Index>(static_cast<Index>(left / (kDouble * double(naux_))), 1, npacked_);
      plan.memory_bytes = std::max(plan.memory_bytes, fixed_bytes(s, nbf_, naux_, npacked_, nocc) +
                                                          kDouble * double(plan.fit_rows) * double(naux_));
    }
  }

  // Scratch or recompute, by their measured costs over the expected iterations: one block of integrals is timed
  // (and kept for the build), and a probe of the scratch folder's write rate is made with that block.
  JkStorage measured_choice(const DfJkOptions& options, Index nocc, Index max_shell, DfJkPlan& plan) {
    const double b_bytes = kDouble * double(npacked_) * double(naux_);
    const bool recompute_fits =
        df_jk_minimum_bytes(JkStorage::recompute, nbf_, naux_, npacked_, nocc, max_shell) <= options.memory_bytes;
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
                                linalg::format_bytes(b_bytes),
                                linalg::format_bytes(df_jk_minimum_bytes(JkStorage::recompute, nbf_, naux_, npacked_,
                                                                         nocc, max_shell)));
      return JkStorage::scratch;
    }
    // Time one block of integrals, and the scratch folder's write rate on it.
    const auto probe = engine_.blocks(std::max<Index>(max_shell, naux_ / 16)).front();
    std::vector<double> block(static_cast<std::size_t>((probe.second - probe.first) * npacked_));
    Stopwatch integral_clock;
    engine_.compute_packed(probe.first, probe.second, block.data());
    const double per_pass = integral_clock.seconds() * double(naux_) / double(probe.second - probe.first);
    double rate = 0;
    {
      ScratchFile test(options.scratch_folder, "probe");
      Stopwatch io_clock;
      test.write(block.data(), block.size(), 0);
      test.sync();  // the disk's rate, not the page cache's
      rate = kDouble * double(block.size()) / std::max(io_clock.seconds(), 1e-6);
    }
    // Recompute: two passes of integrals and the fit of H (naux^2 nbf nocc flops at the metric factor's rate).
    const double fit_rate = std::max(1e9, measured_flop_rate_);
    const double recompute = options.expected_iterations *
                             (2.0 * per_pass + double(naux_) * double(naux_) * double(nbf_) * double(nocc) / fit_rate);
    // Scratch: one pass, written once, read and written once by the fitting, read once per iteration.
    const double scratch = per_pass + (3.0 + options.expected_iterations) * b_bytes / rate;
    plan.reason = fmt::format(
        "the fitted tensor ({}) does not fit in memory; measured: integrals {:.2f} s per pass, scratch writes {:.2f} "
        "GB/s, so over {} iterations scratch {:.1f} s against recompute {:.1f} s",
        linalg::format_bytes(b_bytes), per_pass, rate / 1e9, options.expected_iterations, scratch, recompute);
    return scratch <= recompute ? JkStorage::scratch : JkStorage::recompute;
  }

  // Computes and fits what the plan stores.
  void build() {
    Stopwatch clock;
    if (plan_.storage == JkStorage::memory) {
      b_.resize(npacked_, naux_);
      for (const auto& [p0, p1] : blocks_) engine_.compute_packed(p0, p1, b_.data() + p0 * npacked_);
      kernels_.record_host("scf_integrals", "three_center", clock.seconds(), {0, kDouble * double(b_.size())});
      // B = A L^-T: rows (packed pairs) are independent right-hand sides.
      kernels_.trsm("scf_fitting", linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                    linalg::view(factor_), linalg::view(b_));
    } else if (plan_.storage == JkStorage::scratch) {
      file_ = std::make_unique<ScratchFile>(scratch_folder_, "scf-jk");
      std::vector<double> block;
      block.reserve(static_cast<std::size_t>(plan_.aux_block * npacked_));
      double seconds = 0;
      for (const auto& [p0, p1] : blocks_) {
        block.resize(static_cast<std::size_t>((p1 - p0) * npacked_));
        Stopwatch c;
        engine_.compute_packed(p0, p1, block.data());
        seconds += c.seconds();
        write(block.data(), block.size(), static_cast<std::size_t>(p0 * npacked_), "scf_integrals");
      }
      kernels_.record_host("scf_integrals", "three_center", seconds, {0, kDouble * double(npacked_) * double(naux_)});
      std::vector<double>().swap(block);  // the fitting's chunk takes the memory the blocks had
      // Fitting in row chunks: rows [r0, r1) of every column, solved, written back in place.
      Matrix chunk;
      for (Index r0 = 0; r0 < npacked_; r0 += plan_.fit_rows) {
        const Index nr = std::min(plan_.fit_rows, npacked_ - r0);
        chunk.resize(nr, naux_);
        for (Index p = 0; p < naux_; ++p) read(chunk.col(p).data(), nr, p * npacked_ + r0, "scf_fitting");
        kernels_.trsm("scf_fitting", linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                      linalg::view(factor_), linalg::view(chunk));
        for (Index p = 0; p < naux_; ++p) write(chunk.col(p).data(), nr, p * npacked_ + r0, "scf_fitting");
      }
    } else {
      // Recompute: nothing is stored; the first iteration computes what it needs.
      kernels_.record_host("scf_integrals", "three_center", clock.seconds(), {0, 0});
    }
  }

  void write(const double* data, Index count, Index offset, const char* step) {
    Stopwatch c;
    file_->write(data, static_cast<std::size_t>(count), static_cast<std::size_t>(offset));
    kernels_.record_host(step, "scratch_write", c.seconds(), {0, kDouble * double(count)});
  }
  void read(double* data, Index count, Index offset, const char* step) {
    Stopwatch c;
    file_->read(data, static_cast<std::size_t>(count), static_cast<std::size_t>(offset));
    kernels_.record_host(step, "scratch_read", c.seconds(), {0, kDouble * double(count)});
  }

  // Each block of B read from scratch while the previous one is contracted.
  template <class Contract>
  void stream_scratch(const Contract& contract) {
    std::vector<double> current, next;
    current.reserve(static_cast<std::size_t>(plan_.aux_block * npacked_));  // no growth, so no transient copies
    next.reserve(current.capacity());
    auto load = [&](std::size_t i, std::vector<double>& buffer) {
      const auto [p0, p1] = blocks_[i];
      buffer.resize(static_cast<std::size_t>((p1 - p0) * npacked_));
      file_->read(buffer.data(), buffer.size(), static_cast<std::size_t>(p0 * npacked_));
    };
    Stopwatch wait;
    load(0, current);
    double waited = wait.seconds(), bytes = kDouble * double(current.size());
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      std::future<void> pending;
      if (i + 1 < blocks_.size()) pending = std::async(std::launch::async, [&, i] { load(i + 1, next); });
      contract(current.data(), blocks_[i].second - blocks_[i].first);
      if (pending.valid()) {
        Stopwatch w;
        pending.get();  // rethrows a read error
        waited += w.seconds();
        bytes += kDouble * double(next.size());
        std::swap(current, next);
      }
    }
    // Only the time the contraction waited for the disk is the read's cost here; the rest overlapped.
    kernels_.record_host("scf_jk", "scratch_read", waited, {0, bytes});
  }

  // K += sum over the block's Q of (B_Q C_occ)(B_Q C_occ)^T, B_Q unpacked to a symmetric nbf x nbf square, in
  // element type T (float: the mixed-precision SCF's early iterations; B is rounded as it is unpacked).
  template <class T>
  void exchange(const double* b, Index q, const linalg::MatrixT<T>& c_occ, Index nocc, linalg::MatrixT<T>& k,
                bool first) {
    Work<T>& w = work<T>();
    std::vector<T>& squares = w.squares;
    std::vector<T>& half = w.half;
    Stopwatch unpack_clock;
    squares.reserve(static_cast<std::size_t>(plan_.aux_block * nbf_ * nbf_));
    half.reserve(static_cast<std::size_t>(plan_.aux_block * nbf_ * nocc));
    squares.resize(static_cast<std::size_t>(nbf_ * nbf_ * q));
    // Every square has the same pattern of stored pairs, so the elements of the pairs screened out are zeroed once,
    // when a square slot is first used, and no later unpack writes them (zeroing all of it every time cost more
    // than the scatter itself).
    if (q > w.zeroed) {
      std::fill(squares.begin() + w.zeroed * nbf_ * nbf_, squares.begin() + q * nbf_ * nbf_, T(0));
      w.zeroed = q;
    }
    const auto& pm = engine_.packed_m();
    const auto& pn = engine_.packed_n();
#pragma omp parallel for schedule(static)
    for (Index p = 0; p < q; ++p) {
      T* square = squares.data() + p * nbf_ * nbf_;
      const double* column = b + p * npacked_;
      for (Index x = 0; x < npacked_; ++x)
        square[pm[x] + nbf_ * pn[x]] = square[pn[x] + nbf_ * pm[x]] = static_cast<T>(column[x]);
    }
    kernels_.record_host("scf_jk", "unpack", unpack_clock.seconds(), {0, double(sizeof(T)) * double(nbf_ * nbf_ * q)},
                         std::is_same_v<T, float> ? "fp32" : "");
    half.resize(static_cast<std::size_t>(nbf_ * nocc * q));
    kernels_.gemm_batched<T>("scf_jk", Trans::no, Trans::no, q, {nbf_ * nbf_, 0, nbf_ * nocc}, T(1),
                             linalg::ConstMatrixViewT<T>{squares.data(), nbf_, nbf_, nbf_}, linalg::view(c_occ), T(0),
                             linalg::MatrixViewT<T>{half.data(), nbf_, nocc, nbf_});
    kernels_.syrk<T>("scf_jk", linalg::Uplo::lower, Trans::no, T(1),
                     linalg::ConstMatrixViewT<T>{half.data(), nbf_, nocc * q, nbf_}, first ? T(0) : T(1),
                     linalg::view(k));
  }

  // The exchange's work arrays of each element type (the fp32 ones exist only in a mixed-precision SCF).
  template <class T>
  struct Work {
    std::vector<T> squares, half;
    Index zeroed = 0;  // leading squares whose screened-out elements are zero
  };
  template <class T>
  Work<T>& work() {
    if constexpr (std::is_same_v<T, float>) return work_f_;
    else return work_d_;
  }

  // No stored tensor: pass 1 gives c = A D and H = (P|mi) for all P; pass 2 gives J = A (J^-1 c).
  void compute_recompute(const Matrix& c_occ, const Matrix& dp, Matrix& jp, Matrix& k) {
    const Index nocc = c_occ.cols();
    const auto& pm = engine_.packed_m();
    const auto& pn = engine_.packed_n();
    Matrix c(naux_, 1);
    std::vector<double> h(static_cast<std::size_t>(naux_ * nbf_ * nocc));
    std::vector<double> block;
    block.reserve(static_cast<std::size_t>(plan_.aux_block * npacked_));
    squares_.reserve(static_cast<std::size_t>(plan_.aux_block * nbf_ * nbf_));
    double seconds = 0;
    for (const auto& [p0, p1] : blocks_) {
      const Index q = p1 - p0;
      block.resize(static_cast<std::size_t>(q * npacked_));
      Stopwatch clock;
      engine_.compute_packed(p0, p1, block.data());
      seconds += clock.seconds();
      const ConstMatrixView a{block.data(), npacked_, q, npacked_};
      kernels_.gemm("scf_jk", Trans::yes, Trans::no, 1.0, a, linalg::view(dp), 0.0,
                    MatrixView{c.data() + p0, q, 1, q});
      squares_.assign(static_cast<std::size_t>(nbf_ * nbf_ * q), 0.0);
      for (Index p = 0; p < q; ++p) {
        double* square = squares_.data() + p * nbf_ * nbf_;
        const double* column = block.data() + p * npacked_;
        for (Index x = 0; x < npacked_; ++x) square[pm[x] + nbf_ * pn[x]] = square[pn[x] + nbf_ * pm[x]] = column[x];
      }
      kernels_.gemm_batched("scf_jk", Trans::no, Trans::no, q, {nbf_ * nbf_, 0, nbf_ * nocc}, 1.0,
                            ConstMatrixView{squares_.data(), nbf_, nbf_, nbf_}, linalg::view(c_occ), 0.0,
                            MatrixView{h.data() + p0 * nbf_ * nocc, nbf_, nocc, nbf_});
    }
    // d = J^-1 c = L^-T L^-1 c.
    kernels_.trsm("scf_jk", linalg::Side::left, linalg::Uplo::lower, Trans::no, linalg::Diag::non_unit, 1.0,
                  linalg::view(factor_), linalg::view(c));
    kernels_.trsm("scf_jk", linalg::Side::left, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                  linalg::view(factor_), linalg::view(c));
    // K = Y Y^T with Y = H L^-T: H as (nbf nocc) x naux for the solve, as nbf x (nocc naux) for the product.
    kernels_.trsm("scf_jk", linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                  linalg::view(factor_), MatrixView{h.data(), nbf_ * nocc, naux_, nbf_ * nocc});
    kernels_.syrk("scf_jk", linalg::Uplo::lower, Trans::no, 1.0, ConstMatrixView{h.data(), nbf_, nocc * naux_, nbf_},
                  0.0, linalg::view(k));
    for (const auto& [p0, p1] : blocks_) {
      const Index q = p1 - p0;
      block.resize(static_cast<std::size_t>(q * npacked_));
      Stopwatch clock;
      engine_.compute_packed(p0, p1, block.data());
      seconds += clock.seconds();
      kernels_.gemm("scf_jk", Trans::no, Trans::no, 1.0, ConstMatrixView{block.data(), npacked_, q, npacked_},
                    ConstMatrixView{c.data() + p0, q, 1, q}, 1.0, linalg::view(jp));
    }
    kernels_.record_host("scf_jk", "three_center", seconds, {0, 2.0 * kDouble * double(npacked_) * double(naux_)});
  }

  linalg::Kernels& kernels_;
  ThreeCenterEngine engine_;
  std::string jk_name_;
  Index nbf_ = 0, naux_ = 0, npacked_ = 0;
  Matrix factor_;  // Cholesky factor L of the metric
  DfJkPlan plan_;
  std::vector<std::pair<Index, Index>> blocks_;
  std::string scratch_folder_;
  double measured_flop_rate_ = 0;
  Matrix b_;                           // memory: fitted B, npacked x naux
  std::unique_ptr<ScratchFile> file_;  // scratch: the same, on disk
  Work<double> work_d_;
  Work<float> work_f_;
  std::vector<double> squares_;  // recompute's unpacked squares
};

}  // namespace

std::unique_ptr<JkBuilder> make_df_jk(const BasisSet& basis, const BasisSet& jk_basis, Index nocc,
                                      linalg::Kernels& kernels, const DfJkOptions& options, DfJkPlan& plan) {
  return std::make_unique<BlockedDfJk>(basis, jk_basis, nocc, kernels, options, plan);
}

}  // namespace dfmp2::chem
