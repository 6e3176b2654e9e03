#include "chem/scf/df_jk.hpp"
#include "chem/scf/scf_detail.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/name_table.hpp"

#include <Eigen/Cholesky>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "chem/integrals/distribution.hpp"
#include "chem/scf/exchange_rows.hpp"
#include "chem/integrals/integrals.hpp"
#include "chem/io/block_store.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::ConstMatrixView;
using linalg::MatrixView;
using namespace scf_detail;

namespace {

constexpr double kDouble = sizeof(double);

class BlockedDfJk final : public JkBuilder {
 public:
  BlockedDfJk(std::unique_ptr<ThreeCenterEngine> engine, const BasisSet& jk_basis, Index nocc,
              linalg::Kernels& kernels, const DfJkOptions& options, const DfJkPlan& plan)
      : kernels_(&kernels), engine_(std::move(engine)), comm_(options.comm != nullptr ? *options.comm : alone_) {
    nbf_ = engine_->nbf();
    naux_ = engine_->naux();
    npacked_ = engine_->npacked();
    if (plan.ranks != comm_.size() || plan.npacked != npacked_ || plan.nocc != nocc) {
      throw std::logic_error("DF-J/K: built on a plan made for another problem or rank count");
    }
    plan_ = plan;
    scratch_folder_ = options.scratch_folder;

    // The metric and its factor on every rank (each fits its share of the rows with all of it), or on the ranks'
    // grid, each rank computing and holding its tiles only.
    grid_ = jk_metric_on_grid(options, naux_, comm_.size()) ? options.dense : nullptr;
    if (grid_ != nullptr) {
      factor_on_grid(jk_basis);
    } else {
      comm_.checked([&] {
        Stopwatch metric_clock;
        factor_ = coulomb_metric(jk_basis);
        kernels_->record_host(step_name(ScfStep::integrals), "metric", metric_clock.seconds(), {0, kDouble * double(factor_.size())});
        try {
          kernels_->cholesky(step_name(ScfStep::fitting), linalg::Uplo::lower, linalg::view(factor_));
        } catch (const NumericalError& e) {
          throw NumericalError(fmt::format("JK fitting metric (P|Q) of '{}': {}", jk_basis.name, e.what()));
        }
      });
    }

    // Each rank's contiguous share of the auxiliary shells.
    const auto runs = share_units(engine_->blocks(1), naux_, comm_.size());
    col0_.assign(static_cast<std::size_t>(comm_.size()) + 1, naux_);
    for (int r = comm_.size() - 1; r >= 0; --r) {
      const auto& run = runs[static_cast<std::size_t>(r)];
      col0_[static_cast<std::size_t>(r)] = run.empty() ? col0_[static_cast<std::size_t>(r) + 1] : run.front().first;
    }
    my_col0_ = col0_[static_cast<std::size_t>(comm_.rank())];
    my_cols_ = columns(comm_.rank());
    blocks_ = cut_blocks(runs[static_cast<std::size_t>(comm_.rank())], plan_.aux_block);
    if (plan_.storage != JkStorage::recompute)
      rows_ = std::make_unique<ExchangeRows>(engine_->packed_m(), engine_->packed_n(), nbf_);
    build();
  }

  // J[M] and K[M] C from the stored B in one pass (recompute: the default, through compute_symmetric).
  void compute_response(const Matrix& m, const Matrix& c, Matrix& j, Matrix& kc) override {
    if (plan_.storage == JkStorage::recompute || c.cols() > plan_.nocc) {
      JkBuilder::compute_response(m, c, j, kc);
      return;
    }
    const auto& pm = engine_->packed_m();
    const auto& pn = engine_->packed_n();
    Matrix dp(npacked_, 1), jp = Matrix::Zero(npacked_, 1);
    for (Index x = 0; x < npacked_; ++x) dp(x) = m(pm[x], pn[x]) * (pm[x] == pn[x] ? 1.0 : 2.0);
    kc.setZero(nbf_, c.cols());
    comm_.checked([&] {
      auto contract = [&](const double* b, Index q) {
        coulomb(b, q, dp, jp);
        exchange_times(b, q, m, c, kc);
      };
      for_each_stored_block(contract);
    });
    summed(step_name(ScfStep::jk), jp.data(), npacked_);
    summed(step_name(ScfStep::jk), kc.data(), kc.size());
    response_ = {};
    j.setZero(nbf_, nbf_);
    for (Index x = 0; x < npacked_; ++x) j(pm[x], pn[x]) = j(pn[x], pm[x]) = jp(x);
  }
  void use_kernels(linalg::Kernels& kernels) override { kernels_ = &kernels; }
  std::optional<RotationSource> rotation_source(const Matrix& c_occ) override {
    if (plan_.storage == JkStorage::recompute || c_occ.cols() > plan_.nocc) return std::nullopt;
    return RotationSource{
        my_cols_,
        [this](const RotationResponse::SquareVisitor& visit) {
          for_each_stored_block([&](const double* b, Index q) { visit(unpack(b, q).data(), q); });
        },
        kernels_, [this](const std::function<void()>& work, Matrix& out) {
          comm_.checked(work);
          summed(step_name(ScfStep::jk), out.data(), out.size());
        }};
  }
  void release_response() override {
    JkBuilder::release_response();
    response_ = {};
  }

  // The fp32 K lives in the exchange() of the stored tensor; recompute builds K through H's fit in fp64 only.
  bool has_fp32_exchange() const override { return plan_.storage != JkStorage::recompute; }
  // The plan's buffers (recompute's H, the K build's work) are sized for the SCF's occupied orbitals.
  Index max_columns() const override { return plan_.nocc; }

  void compute(const Matrix& c_occ, Matrix& j, Matrix& k, bool fp32_exchange, int /*density*/) override {
    if (fp32_exchange && !has_fp32_exchange()) throw std::logic_error("DF-J/K: no fp32 exchange with recompute");
    const auto& pm = engine_->packed_m();
    const auto& pn = engine_->packed_n();
    Matrix dp(npacked_, 1), jp = Matrix::Zero(npacked_, 1);
    k.setZero(nbf_, nbf_);
    Matrix c_t;  // C_occ^T: each function's occupied coefficients contiguous, as the exchange gathers them
    linalg::MatrixF c_t_f, k_f;
    comm_.checked([&] {
      // Packed density: D_mn for m >= n, off-diagonal elements doubled (they stand for D_nm too). Only the lower
      // triangle is read, so only it is computed.
      Matrix density(nbf_, nbf_);
      kernels_->syrk(step_name(ScfStep::jk), linalg::Uplo::lower, Trans::no, 1.0, linalg::view(c_occ), 0.0, linalg::view(density));
      for (Index x = 0; x < npacked_; ++x) dp(x) = density(pm[x], pn[x]) * (pm[x] == pn[x] ? 1.0 : 2.0);
      if (fp32_exchange) {
        c_t_f = c_occ.transpose().cast<float>();
        k_f.setZero(nbf_, nbf_);
      } else {
        c_t = c_occ.transpose();
        if (work_f_.half.capacity() > 0) work_f_ = {};  // the fp32 iterations are over: their buffers go before the
                                                        // fp64 ones (the plan counts one set)
      }
    });

    if (plan_.storage == JkStorage::recompute) {
      compute_recompute(c_occ, dp, jp, k);
    } else {
      comm_.checked([&] {
        // B is fitted: every block gives its share of J and K on its own.
        bool first_k = true;
        auto contract = [&](const double* b, Index q) {
          coulomb(b, q, dp, jp);
          if (fp32_exchange) exchange<float>(b, q, c_t_f, k_f, first_k);
          else exchange<double>(b, q, c_t, k, first_k);
          first_k = false;
        };
        for_each_stored_block(contract);
      });
      // Each rank's blocks gave their share: J and K are the sums.
      summed(step_name(ScfStep::jk), jp.data(), npacked_);
      if (fp32_exchange) summed(step_name(ScfStep::jk), k_f.data(), nbf_ * nbf_);
      else summed(step_name(ScfStep::jk), k.data(), nbf_ * nbf_);
    }
    if (fp32_exchange) k = k_f.cast<double>();
    // J from its packed form; K from its lower triangle.
    j.setZero(nbf_, nbf_);
    for (Index x = 0; x < npacked_; ++x) j(pm[x], pn[x]) = j(pn[x], pm[x]) = jp(x);
    k.triangularView<Eigen::StrictlyUpper>() = k.transpose();
  }

 private:
  Index columns(int r) const { return col0_[static_cast<std::size_t>(r) + 1] - col0_[static_cast<std::size_t>(r)]; }

  // Sums over the ranks, timed under `step` (nothing to do on one rank).
  template <class T>
  void summed(const std::string& step, T* data, Index count) {
    if (comm_.size() == 1) return;
    Stopwatch clock;
    comm_.sum(data, static_cast<std::size_t>(count));
    kernels_->record_host(step, "sum_ranks", clock.seconds(), {0, double(sizeof(T)) * double(count)});
  }

  // The metric's tiles computed on each rank, factored on the grid and laid out for the row solves.
  void factor_on_grid(const BasisSet& jk_basis) {
    Stopwatch metric_clock;
    linalg::DistributedMatrix metric = grid_->matrix(naux_);
    comm_.checked([&] { coulomb_metric_tiles(jk_basis, metric); });
    kernels_->record_host(step_name(ScfStep::integrals), "metric", metric_clock.seconds(),
                         {0, kDouble * double(metric.local.size())});
    Stopwatch clock;
    grid_->cholesky(metric, fmt::format("JK fitting metric (P|Q) of '{}'", jk_basis.name));
    grid_factor_ = grid_->for_row_solves(metric);
    const double n = double(naux_);
    kernels_->record_host(step_name(ScfStep::fitting), fmt::format("{} cholesky", dense_library_name(grid_->cholesky_library(naux_))),
                         clock.seconds(), {n * n * n / 3.0, kDouble * double(metric.local.size())}, "fp64");
  }

  // X L^T = B for this rank's rows (`rows` may be empty): the backend's TRSM with the replicated factor, or the
  // grid's (collective: every rank calls it, outside `checked`).
  void solve_fitting(const std::string& step, MatrixView rows) {
    if (grid_ == nullptr) {
      kernels_->trsm(step, linalg::Side::right, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                    linalg::view(factor_), rows);
      return;
    }
    Stopwatch clock;
    grid_->solve_rows(grid_factor_, rows);
    kernels_->record_host(step, "pdtrsm", clock.seconds(),
                         {double(rows.rows) * double(naux_) * double(naux_), kDouble * double(rows.rows * naux_)}, "fp64");
  }

  // c = J^-1 c = L^-T L^-1 c, the same on every rank (each holds all of c).
  void solve_metric(Matrix& c) {
    if (grid_ == nullptr) {
      comm_.checked([&] {
        kernels_->trsm(step_name(ScfStep::jk), linalg::Side::left, linalg::Uplo::lower, Trans::no, linalg::Diag::non_unit, 1.0,
                      linalg::view(factor_), linalg::view(c));
        kernels_->trsm(step_name(ScfStep::jk), linalg::Side::left, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                      linalg::view(factor_), linalg::view(c));
      });
      return;
    }
    // As a row: c^T L^-T, then (c^T L^-T) L^-1 = (J^-1 c)^T; every rank solves its own copy.
    Stopwatch clock;
    linalg::MatrixView row{c.data(), 1, naux_, 1};
    grid_->solve_rows(grid_factor_, row);
    grid_->solve_rows(grid_factor_, row, true);
    kernels_->record_host(step_name(ScfStep::jk), "pdtrsm", clock.seconds(), {2.0 * double(naux_) * double(naux_), 0}, "fp64");
  }

  // B = A L^-T for `nr` rows of A of which this rank holds its columns at `mine` (leading dimension ld): on one
  // rank in place; with ranks each rank solves an even share of the rows with every column, sent there and back.
  void fit_rows(double* mine, Index nr, Index ld) {
    auto solve = [&](MatrixView rows) { solve_fitting(step_name(ScfStep::fitting), rows); };
    const int ranks = comm_.size(), me = comm_.rank();
    if (ranks == 1) {
      comm_.checked([&] { solve(MatrixView{mine, nr, naux_, ld}); });
      return;
    }
    const Index r0 = even_start(nr, ranks, me), my_rows = even_start(nr, ranks, me + 1) - r0;
    Matrix rows(my_rows, naux_);
    std::vector<linalg::StridedBlock> to_rows, from_cols;  // column shares out, row shares in
    for (int r = 0; r < ranks; ++r) {
      const Index s0 = even_start(nr, ranks, r), sn = even_start(nr, ranks, r + 1) - s0;
      if (sn > 0 && my_cols_ > 0)
        to_rows.push_back({r, mine + s0, std::size_t(sn), std::size_t(my_cols_), std::size_t(ld), sizeof(double)});
      if (my_rows > 0 && columns(r) > 0)
        from_cols.push_back({r, rows.data() + col0_[static_cast<std::size_t>(r)] * my_rows, std::size_t(my_rows),
                             std::size_t(columns(r)), std::size_t(my_rows), sizeof(double)});
    }
    redistribute(step_name(ScfStep::fitting), to_rows, from_cols);
    if (grid_ != nullptr) solve(linalg::view(rows));
    else comm_.checked([&] {
      if (my_rows > 0) solve(linalg::view(rows));
    });
    redistribute(step_name(ScfStep::fitting), from_cols, to_rows);  // and back: the same blocks, sent the other way
  }

  // An exchange between the ranks, timed under `step` with the bytes this rank sends.
  void redistribute(const std::string& step, const std::vector<linalg::StridedBlock>& sends,
                    const std::vector<linalg::StridedBlock>& receives) {
    Stopwatch clock;
    comm_.exchange(sends, receives);
    double bytes = 0;
    for (const auto& b : sends) bytes += double(b.bytes());
    kernels_->record_host(step, "redistribute", clock.seconds(), {0, bytes});
  }

  // Computes and fits this rank's share of what the plan stores.
  void build() {
    Stopwatch clock;
    if (plan_.storage == JkStorage::memory) {
      comm_.checked([&] {
        store_ = make_store(nullptr);
        for (std::size_t k = 0; k < blocks_.size(); ++k)
          engine_->compute_packed(blocks_[k].first, blocks_[k].second, store_->data(Index(k)));
        kernels_->record_host(step_name(ScfStep::integrals), "three_center", clock.seconds(),
                             {0, kDouble * double(store_->size())});
      });
      // B = A L^-T: rows (packed pairs) are independent right-hand sides.
      fit_rows(store_->all(), npacked_, npacked_);
      // Then each block auxiliary index fastest, as the exchange gathers it.
      comm_.checked([&] {
        Stopwatch c;
        std::vector<double> copy;
        for (std::size_t k = 0; k < blocks_.size(); ++k) {
          double* block = store_->data(Index(k));
          const Index q = blocks_[k].second - blocks_[k].first;
          copy.assign(block, block + q * npacked_);
          transpose_block(copy.data(), npacked_, q, block);
        }
        kernels_->record_host(step_name(ScfStep::fitting), "transpose", c.seconds(),
                             {0, 2.0 * kDouble * double(store_->size())});
      });
    } else if (plan_.storage == JkStorage::scratch) {
      comm_.checked([&] {
        store_ = make_store(&scratch_folder_);
        std::vector<double> block;
        block.reserve(static_cast<std::size_t>(plan_.aux_block * npacked_));
        double seconds = 0;
        for (const auto& [p0, p1] : blocks_) {
          block.resize(static_cast<std::size_t>((p1 - p0) * npacked_));
          Stopwatch c;
          engine_->compute_packed(p0, p1, block.data());
          seconds += c.seconds();
          write(block.data(), block.size(), static_cast<std::size_t>((p0 - my_col0_) * npacked_), step_name(ScfStep::integrals));
        }
        kernels_->record_host(step_name(ScfStep::integrals), "three_center", seconds,
                             {0, kDouble * double(npacked_) * double(my_cols_)});
      });
      // Fitting in row chunks (the same on every rank): rows [r0, r1) of this rank's columns, solved, written back in
      // place.
      Matrix chunk;
      for (Index r0 = 0; r0 < npacked_; r0 += plan_.fit_rows) {
        const Index nr = std::min(plan_.fit_rows, npacked_ - r0);
        comm_.checked([&] {
          chunk.resize(nr, my_cols_);
          for (Index p = 0; p < my_cols_; ++p) read(chunk.col(p).data(), nr, p * npacked_ + r0, step_name(ScfStep::fitting));
        });
        fit_rows(chunk.data(), nr, nr);
        comm_.checked([&] {
          for (Index p = 0; p < my_cols_; ++p) write(chunk.col(p).data(), nr, p * npacked_ + r0, step_name(ScfStep::fitting));
        });
      }
      // Then each block auxiliary index fastest, as the exchange gathers it: read, transposed, written back.
      comm_.checked([&] {
        chunk.resize(0, 0);
        std::vector<double> block, transposed;
        for (const auto& [p0, p1] : blocks_) {
          const Index count = (p1 - p0) * npacked_, offset = (p0 - my_col0_) * npacked_;
          block.resize(static_cast<std::size_t>(count));
          transposed.resize(block.size());
          read(block.data(), count, offset, step_name(ScfStep::fitting));
          Stopwatch c;
          transpose_block(block.data(), npacked_, p1 - p0, transposed.data());
          kernels_->record_host(step_name(ScfStep::fitting), "transpose", c.seconds(), {0, 2.0 * kDouble * double(count)});
          write(transposed.data(), count, offset, step_name(ScfStep::fitting));
        }
      });
    } else {
      // Recompute: nothing is stored; the first iteration computes what it needs.
      kernels_->record_host(step_name(ScfStep::integrals), "three_center", clock.seconds(), {0, 0});
    }
  }

  void write(const double* data, Index count, Index offset, const std::string& step) {
    Stopwatch c;
    store_->write_span(static_cast<std::size_t>(offset), static_cast<std::size_t>(count), data);
    kernels_->record_host(step, "scratch_write", c.seconds(), {0, kDouble * double(count)});
  }
  void read(double* data, Index count, Index offset, const std::string& step) {
    Stopwatch c;
    store_->read_span(static_cast<std::size_t>(offset), static_cast<std::size_t>(count), data);
    kernels_->record_host(step, "scratch_read", c.seconds(), {0, kDouble * double(count)});
  }

  // K += sum over the block's Q of (B_Q C_occ)(B_Q C_occ)^T, row by row over the significant pairs only
  // (chem/scf/exchange_rows.hpp): each group of rows gathers its stored B values and the occupied coefficients they meet
  // and multiplies them into its columns of E; then K += E^T E. In element type T (float: the mixed-precision SCF's
  // early iterations; B is rounded as it is gathered). c_t is C_occ^T (nocc x nbf).
  template <class T>
  void exchange(const double* bt, Index q, const linalg::MatrixT<T>& c_t, linalg::MatrixT<T>& k, bool first) {
    Work<T>& w = work<T>();
    std::vector<T>().swap(w.squares);  // the responses' squares are not held beside the gathered rows
    w.zeroed = 0;
    const Index nocc = c_t.rows(), column = nocc * q;  // E's column: (i, Q), i fastest
    w.half.reserve(static_cast<std::size_t>(plan_.aux_block * nbf_ * nocc));
    w.half.resize(static_cast<std::size_t>(column * nbf_));
    w.gathered.reserve(static_cast<std::size_t>(plan_.aux_block * rows_->max_gathered()));
    double gather_seconds = 0, gathered = 0;
    for (const ExchangeRowGroup& g : rows_->groups()) {
      const Index width = q * g.rows;
      T* e = w.half.data() + column * g.first;
      if (g.partners == 0) {  // nothing survived screening with these functions
        std::fill(e, e + column * g.rows, T(0));
        continue;
      }
      Stopwatch clock;
      w.gathered.resize(static_cast<std::size_t>(width * g.partners));
      w.occupied.resize(static_cast<std::size_t>(nocc * g.partners));
      rows_->gather_block<T>(g, bt, q, w.gathered.data(), kernels_->backend().openmp_threads());
      rows_->gather_occupied<T>(g, c_t.data(), nocc, w.occupied.data());
      gather_seconds += clock.seconds();
      gathered += double(width * g.partners);
      kernels_->gemm<T>(step_name(ScfStep::jk), Trans::no, Trans::yes, T(1),
                       linalg::ConstMatrixViewT<T>{w.occupied.data(), nocc, g.partners, nocc},
                       linalg::ConstMatrixViewT<T>{w.gathered.data(), width, g.partners, width}, T(0),
                       linalg::MatrixViewT<T>{e, nocc, width, nocc});
    }
    kernels_->record_host(step_name(ScfStep::jk), "gather", gather_seconds, {0, 2.0 * double(sizeof(T)) * gathered},
                         std::is_same_v<T, float> ? "fp32" : "");
    kernels_->syrk<T>(step_name(ScfStep::jk), linalg::Uplo::lower, Trans::yes, T(1),
                     linalg::ConstMatrixViewT<T>{w.half.data(), column, nbf_, column}, first ? T(0) : T(1),
                     linalg::view(k));
  }

  // contract(b, q) for every block of this rank's stored B, in order: in place from memory, or read from scratch
  // with the next block read while this one is contracted (BlockStore::for_each).
  template <class Contract>
  void for_each_stored_block(const Contract& contract) {
    if (blocks_.empty()) return;
    std::vector<Index> order(blocks_.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = Index(k);
    const auto streamed = store_->for_each(order, [&](Index k, const double* b) {
      contract(b, blocks_[std::size_t(k)].second - blocks_[std::size_t(k)].first);
    });
    // Only the time the contraction waited for the disk is the read's cost here; the rest overlapped.
    if (!store_->in_memory())
      kernels_->record_host(step_name(ScfStep::jk), "scratch_read", streamed.waited_seconds, {0, streamed.bytes});
  }

  // This rank's B, its auxiliary blocks laid end to end (block k: q_k x npacked once fitted and transposed), in
  // memory or in a scratch file in `*scratch_folder`.
  std::unique_ptr<BlockStore<double>> make_store(const std::string* scratch_folder) const {
    std::vector<Index> ids, rows;
    for (std::size_t k = 0; k < blocks_.size(); ++k) {
      ids.push_back(Index(k));
      rows.push_back(blocks_[k].second - blocks_[k].first);
    }
    return std::make_unique<BlockStore<double>>(ids, rows, npacked_, scratch_folder,
                                                comm_.size() > 1 ? fmt::format("scf-jk-r{}", comm_.rank()) : "scf-jk");
  }

  // J's share of a block of B (stored transposed, q x npacked): jp += B (B^T dp) for the packed density dp.
  void coulomb(const double* bt, Index q, const Matrix& dp, Matrix& jp) {
    const ConstMatrixView block{bt, q, npacked_, q};
    Matrix d(q, 1);
    kernels_->gemm(step_name(ScfStep::jk), Trans::no, Trans::no, 1.0, block, linalg::view(dp), 0.0, linalg::view(d));
    kernels_->gemm(step_name(ScfStep::jk), Trans::yes, Trans::no, 1.0, block, linalg::view(d), 1.0, linalg::view(jp));
  }

  // KC += sum over the block's Q of B_Q M (B_Q C): the orbital response's exchange, times the orbitals it is read
  // with, from the same squares (compute_response).
  void exchange_times(const double* b, Index q, const Matrix& m, const Matrix& c, Matrix& kc) {
    Work<double>& w = work<double>();
    const std::vector<double>& squares = unpack(b, q);
    const Index ncol = c.cols();
    w.half.resize(static_cast<std::size_t>(nbf_ * ncol * q));
    kernels_->gemm_batched(step_name(ScfStep::jk), Trans::no, Trans::no, q, {nbf_ * nbf_, 0, nbf_ * ncol}, 1.0,
                          ConstMatrixView{squares.data(), nbf_, nbf_, nbf_}, linalg::view(c), 0.0,
                          MatrixView{w.half.data(), nbf_, ncol, nbf_});
    // M (B_Q C) for every Q in one GEMM (the B_Q C side by side), then restacked as (nbf q) x ncol so that the sum
    // over Q is one GEMM with the squares side by side as nbf x (nbf q).
    response_.resize(static_cast<std::size_t>(2 * nbf_ * ncol * q));
    double* side_by_side = response_.data() + nbf_ * ncol * q;
    kernels_->gemm(step_name(ScfStep::jk), Trans::no, Trans::no, 1.0, linalg::view(m),
                  ConstMatrixView{w.half.data(), nbf_, ncol * q, nbf_}, 0.0, MatrixView{side_by_side, nbf_, ncol * q, nbf_});
#pragma omp parallel for schedule(static)
    for (Index p = 0; p < q; ++p)
      for (Index i = 0; i < ncol; ++i)
        std::copy_n(side_by_side + (p * ncol + i) * nbf_, nbf_, response_.data() + p * nbf_ + i * nbf_ * q);
    kernels_->gemm(step_name(ScfStep::jk), Trans::no, Trans::no, 1.0, ConstMatrixView{squares.data(), nbf_, nbf_ * q, nbf_},
                  ConstMatrixView{response_.data(), nbf_ * q, ncol, nbf_ * q}, 1.0, linalg::view(kc));
  }

  // The block's B_Q (stored transposed, bt[p + q x]) unpacked to symmetric nbf x nbf squares, for the orbital
  // responses.
  const std::vector<double>& unpack(const double* bt, Index q) {
    Work<double>& w = work<double>();
    std::vector<double>& squares = w.squares;
    std::vector<double>().swap(w.gathered);  // the exchange's gathered rows are not held beside the squares
    Stopwatch unpack_clock;
    squares.reserve(static_cast<std::size_t>(plan_.aux_block * nbf_ * nbf_));
    squares.resize(static_cast<std::size_t>(nbf_ * nbf_ * q));
    // Every square has the same pattern of stored pairs, so the elements of the pairs screened out are zeroed once,
    // when a square slot is first used, and no later unpack writes them (zeroing all of it every time cost more
    // than the scatter itself).
    if (q > w.zeroed) {
      std::fill(squares.begin() + w.zeroed * nbf_ * nbf_, squares.begin() + q * nbf_ * nbf_, 0.0);
      w.zeroed = q;
    }
    const auto& pm = engine_->packed_m();
    const auto& pn = engine_->packed_n();
    const Index square = nbf_ * nbf_;
#pragma omp parallel for schedule(static)
    for (Index x = 0; x < npacked_; ++x) {
      const double* values = bt + q * x;
      const Index mn = pm[x] + nbf_ * pn[x], nm = pn[x] + nbf_ * pm[x];
      for (Index p = 0; p < q; ++p) squares[p * square + mn] = squares[p * square + nm] = values[p];
    }
    kernels_->record_host(step_name(ScfStep::jk), "unpack", unpack_clock.seconds(), {0, kDouble * double(square * q)});
    return squares;
  }

  // The exchange's work arrays of each element type (the fp32 ones exist only in a mixed-precision SCF).
  std::vector<double> response_;  // compute_response's M (B_Q C), one block's worth
  template <class T>
  struct Work {
    std::vector<T> half;                // E (exchange) or B_Q C side by side (responses)
    std::vector<T> gathered, occupied;  // the exchange's gathered rows of B and occupied coefficients
    std::vector<T> squares;             // the responses' unpacked B_Q
    Index zeroed = 0;                   // leading squares whose screened-out elements are zero
  };
  template <class T>
  Work<T>& work() {
    if constexpr (std::is_same_v<T, float>) return work_f_;
    else return work_d_;
  }

  // (P|mn) of functions [p0, p1), packed, into `block`; returns the seconds it took.
  double integrals(Index p0, Index p1, std::vector<double>& block) const {
    block.resize(static_cast<std::size_t>((p1 - p0) * npacked_));
    Stopwatch clock;
    engine_->compute_packed(p0, p1, block.data());
    return clock.seconds();
  }

  // No stored tensor: pass 1 gives c = A D and H = (P|mi) for this rank's P; pass 2 gives J = A (J^-1 c).
  void compute_recompute(const Matrix& c_occ, const Matrix& dp, Matrix& jp, Matrix& k) {
    const Index nocc = c_occ.cols();
    const int ranks = comm_.size(), me = comm_.rank();
    const auto& pm = engine_->packed_m();
    const auto& pn = engine_->packed_n();
    Matrix c = Matrix::Zero(naux_, 1);
    std::vector<double> h;  // this rank's columns of H as (nbf nocc) x columns
    std::vector<double> block;
    double seconds = 0;
    comm_.checked([&] {
      h.resize(static_cast<std::size_t>(nbf_ * nocc * my_cols_));
      block.reserve(static_cast<std::size_t>(plan_.aux_block * npacked_));
      squares_.reserve(static_cast<std::size_t>(plan_.aux_block * nbf_ * nbf_));
      for (const auto& [p0, p1] : blocks_) {
        const Index q = p1 - p0;
        seconds += integrals(p0, p1, block);
        const ConstMatrixView a{block.data(), npacked_, q, npacked_};
        kernels_->gemm(step_name(ScfStep::jk), Trans::yes, Trans::no, 1.0, a, linalg::view(dp), 0.0,
                      MatrixView{c.data() + p0, q, 1, q});
        squares_.assign(static_cast<std::size_t>(nbf_ * nbf_ * q), 0.0);
        for (Index p = 0; p < q; ++p) {
          double* square = squares_.data() + p * nbf_ * nbf_;
          const double* column = block.data() + p * npacked_;
          for (Index x = 0; x < npacked_; ++x)
            square[pm[x] + nbf_ * pn[x]] = square[pn[x] + nbf_ * pm[x]] = column[x];
        }
        kernels_->gemm_batched(step_name(ScfStep::jk), Trans::no, Trans::no, q, {nbf_ * nbf_, 0, nbf_ * nocc}, 1.0,
                              ConstMatrixView{squares_.data(), nbf_, nbf_, nbf_}, linalg::view(c_occ), 0.0,
                              MatrixView{h.data() + (p0 - my_col0_) * nbf_ * nocc, nbf_, nocc, nbf_});
      }
    });
    summed(step_name(ScfStep::jk), c.data(), naux_);  // each rank's own entries, the rest zero
    solve_metric(c);  // d = J^-1 c
    // K = Y Y^T with Y = H L^-T: H as (nbf nocc) x naux for the solve, as nbf x (nocc naux) for the product. With
    // ranks, each rank solves the rows of an even share of the occupied orbitals with every column, and its share
    // of K is summed.
    const Index i0 = even_start(nocc, ranks, me), ni = even_start(nocc, ranks, me + 1) - i0;
    std::vector<double> y_own;
    double* y = h.data();
    if (ranks > 1) {
      y_own.resize(static_cast<std::size_t>(nbf_ * ni * naux_));
      y = y_own.data();
      std::vector<linalg::StridedBlock> sends, receives;
      for (int r = 0; r < ranks; ++r) {
        const Index s0 = even_start(nocc, ranks, r), sn = even_start(nocc, ranks, r + 1) - s0;
        if (sn > 0 && my_cols_ > 0)
          sends.push_back({r, h.data() + nbf_ * s0, std::size_t(nbf_ * sn), std::size_t(my_cols_),
                           std::size_t(nbf_ * nocc), sizeof(double)});
        if (ni > 0 && columns(r) > 0)
          receives.push_back({r, y + col0_[static_cast<std::size_t>(r)] * nbf_ * ni, std::size_t(nbf_ * ni),
                              std::size_t(columns(r)), std::size_t(nbf_ * ni), sizeof(double)});
      }
      redistribute(step_name(ScfStep::jk), sends, receives);
    }
    if (grid_ != nullptr) solve_fitting(step_name(ScfStep::jk), MatrixView{y, nbf_ * ni, naux_, std::max<Index>(nbf_ * ni, 1)});
    comm_.checked([&] {
      if (ni == 0) return;
      if (grid_ == nullptr) solve_fitting(step_name(ScfStep::jk), MatrixView{y, nbf_ * ni, naux_, nbf_ * ni});
      kernels_->syrk(step_name(ScfStep::jk), linalg::Uplo::lower, Trans::no, 1.0, ConstMatrixView{y, nbf_, ni * naux_, nbf_}, 0.0,
                    linalg::view(k));
    });
    std::vector<double>().swap(y_own);
    summed(step_name(ScfStep::jk), k.data(), nbf_ * nbf_);
    comm_.checked([&] {
      for (const auto& [p0, p1] : blocks_) {
        const Index q = p1 - p0;
        seconds += integrals(p0, p1, block);
        kernels_->gemm(step_name(ScfStep::jk), Trans::no, Trans::no, 1.0, ConstMatrixView{block.data(), npacked_, q, npacked_},
                      ConstMatrixView{c.data() + p0, q, 1, q}, 1.0, linalg::view(jp));
      }
      kernels_->record_host(step_name(ScfStep::jk), "three_center", seconds,
                           {0, 2.0 * kDouble * double(npacked_) * double(my_cols_)});
    });
    summed(step_name(ScfStep::jk), jp.data(), npacked_);
  }

  linalg::Kernels* kernels_;  // where its products run and are logged (use_kernels)
  std::unique_ptr<ThreeCenterEngine> engine_;
  linalg::SerialComm alone_;
  linalg::Comm& comm_;
  Index nbf_ = 0, naux_ = 0, npacked_ = 0;
  std::vector<Index> col0_;  // per rank its first auxiliary function; col0_[ranks] = naux
  Index my_col0_ = 0, my_cols_ = 0;
  Matrix factor_;  // Cholesky factor L of the metric (replicated)
  linalg::DenseGrid* grid_ = nullptr;   // or on the ranks' grid
  linalg::DistributedMatrix grid_factor_;  // laid out for the row solves
  DfJkPlan plan_;
  std::vector<std::pair<Index, Index>> blocks_;  // this rank's
  std::string scratch_folder_;
  // This rank's columns of the fitted B, npacked per auxiliary function, stored block by block auxiliary index
  // fastest (q x npacked: each packed pair's q values contiguous, as the exchange gathers them); in memory or on
  // scratch as planned (not with recompute).
  std::unique_ptr<BlockStore<double>> store_;
  std::unique_ptr<ExchangeRows> rows_;  // the stored pairs row by row (not with recompute)
  Work<double> work_d_;
  Work<float> work_f_;
  std::vector<double> squares_;  // recompute's unpacked squares
};

}  // namespace

std::unique_ptr<JkBuilder> make_df_jk(std::unique_ptr<ThreeCenterEngine> engine, const BasisSet& jk_basis,
                                      Index nocc, linalg::Kernels& kernels, const DfJkOptions& options,
                                      const DfJkPlan& plan) {
  return std::make_unique<BlockedDfJk>(std::move(engine), jk_basis, nocc, kernels, options, plan);
}

}  // namespace dfmp2::chem
