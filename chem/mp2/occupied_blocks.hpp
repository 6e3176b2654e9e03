#pragma once
// The transformed and fitted tensor of DF-MP2 by occupied block (chem/mp2/dfmp2.hpp, BlockPlan), wherever its blocks
// live: in this rank's memory, in its scratch file, or with another rank. The kernel (chem/mp2/dfmp2.cpp run_typed) works
// through four calls and never asks which; a new place for the blocks is a change here alone, as PySCF's
// loop_ao2mo hands its caller blocks whatever their storage.
//
//   aux_blocks     the auxiliary blocks this rank transforms
//   store_columns  a transformed auxiliary block, every active occupied orbital, cut into the occupied blocks' rows
//                  (the A store: this rank's auxiliary columns of every block)
//   fit_each       each block this rank holds, with all its auxiliary columns, handed out to be fitted in place; with
//                  several ranks after one redistribution from auxiliary columns to the blocks' holders (in memory
//                  all at once; on scratch one round per block a rank holds)
//   for_each_pair  each block pair this rank computes, with both blocks: views of memory, read from scratch, or
//                  fetched from their holder while the previous pair is computed
//
// The host work it does is logged under the kernel's steps: `store` or `scratch_write` (transform), `scratch_read`,
// `scratch_write` and `redistribute` (fitting), `scratch_read` and `fetch_block` (pair_energy; only the time spent
// waiting, as the loads overlap the pair products).
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chem/mp2/dfmp2.hpp"
#include "chem/io/block_store.hpp"
#include "linalg/comm.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::chem {

template <class W>
class OccupiedBlocks {
 public:
  using Index = linalg::Index;
  // Made inside a checked step (it creates this rank's scratch file when the plan puts the tensor on scratch).
  // `spaces`: the spaces whose blocks the layout lists (one, or alpha and beta), their rows stacked in that order.
  OccupiedBlocks(const Mp2Layout& layout, const std::vector<SpinSpace>& spaces, Index naux, const BlockPlan& plan,
                 const std::string& scratch_folder, linalg::Comm& comm, linalg::Kernels& kernels)
      : layout_(layout), naux_(naux), comm_(comm), kernels_(kernels), ranks_(comm.size()),
        me_(comm.rank()), on_scratch_(plan.storage == Mp2Storage::scratch),
        scratch_(on_scratch_ ? &scratch_folder : nullptr),
        // Scratch files of several ranks may share a folder (and a pid, on different nodes): the rank is in the name.
        suffix_(ranks_ > 1 ? fmt::format("-r{}", me_) : std::string()) {
    std::vector<Index> every_block, space_row0{0};
    for (const SpinSpace& sp : spaces) space_row0.push_back(space_row0.back() + sp.rows());
    for (Index b = 0; b < block_count(); ++b) {
      const auto& [i0, i1] = layout_.occupied[static_cast<std::size_t>(b)];
      const auto spin = static_cast<std::size_t>(layout_.occupied_spin[static_cast<std::size_t>(b)]);
      block_rows_.push_back((i1 - i0) * spaces[spin].nvir);
      block_row0_.push_back(space_row0[spin] + i0 * spaces[spin].nvir);
      every_block.push_back(b);
      if (holder(b) == me_) held_.push_back(b);
    }
    for (std::size_t k = 0; k < layout_.aux_blocks.size(); ++k)
      if (layout_.aux_rank[k] == me_) my_aux_.push_back(layout_.aux_blocks[k]);
    a_store_ = std::make_unique<BlockStore<W>>(every_block, block_rows_, layout_.columns(me_), scratch_,
                                               (ranks_ > 1 ? "mp2-a" : "mp2") + suffix_);
    b_store_ = a_store_.get();
  }

  const std::vector<std::pair<Index, Index>>& aux_blocks() const { return my_aux_; }

  // Auxiliary columns [p0, p0 + np) of (P|ia) for every active i of every space: np columns of every space's rows,
  // `ld` apart.
  void store_columns(Index p0, Index np, const W* a, Index ld) {
    linalg::Stopwatch clock;
    for (Index b = 0; b < block_count(); ++b) {
      a_store_->write_columns(b, p0 - layout_.col0[static_cast<std::size_t>(me_)], np,
                              a + block_row0_[static_cast<std::size_t>(b)], ld);
    }
    kernels_.record_host(step_name(Mp2Step::transform), on_scratch_ ? "scratch_write" : "store", clock.seconds(),
                         {0, double(sizeof(W)) * double(np * ld)}, dtype());
  }

  void fit_each(const std::function<void(linalg::MatrixViewT<W>)>& fit) {
    if (ranks_ == 1) return fit_in_place(fit);
    comm_.checked([&] { b_own_ = std::make_unique<BlockStore<W>>(held_, block_rows_, naux_, scratch_, "mp2" + suffix_); });
    b_store_ = b_own_.get();
    if (on_scratch_) fit_in_rounds(fit);
    else fit_after_exchange(fit);
    a_store_->release();
  }

  // As fit_each, for a fit that is itself collective (the distributed metric's solves, linalg/dense_grid.hpp):
  // `fit` is called the same number of times on every rank, once per round of one block per holder, with an empty
  // block on a rank that holds none in that round.
  void fit_each_collectively(const std::function<void(linalg::MatrixViewT<W>)>& fit) {
    if (ranks_ == 1) throw std::logic_error("OccupiedBlocks: a collective fit on one rank");
    collective_ = true;
    fit_each(fit);
    collective_ = false;
  }

  void for_each_pair(const std::function<void(std::size_t, linalg::ConstMatrixViewT<W>,
                                              linalg::ConstMatrixViewT<W>)>& compute) {
    const std::vector<Work> work = this_ranks_pairs();
    // The blocks this rank lends: from memory in place, or read from its scratch file into the lender's buffer.
    auto lender = comm_.lend([&](long long id, std::size_t bytes, std::vector<std::byte>& buffer) -> const void* {
      const Index b = static_cast<Index>(id);
      if (bytes != sizeof(W) * std::size_t(block_rows_[static_cast<std::size_t>(b)] * naux_))
        throw std::logic_error("DF-MP2: a block asked for with the wrong size");
      if (b_store_->in_memory()) return b_store_->data(b);
      buffer.resize(bytes);
      b_store_->read(b, reinterpret_cast<W*>(buffer.data()));
      return buffer.data();
    });
    comm_.checked([&] { pair_loop(work, *lender, compute); });
    lender->finish();
  }

 private:
  // A pair this rank computes, with the block it holds (the anchor) and the other one (the partner).
  struct Work {
    std::size_t pair;
    Index anchor, partner;
  };

  static std::string dtype() { return std::string(linalg::dtype_name(linalg::dtype_of<W>())); }
  Index block_count() const { return static_cast<Index>(layout_.occupied.size()); }
  int holder(Index b) const { return layout_.occupied_rank[static_cast<std::size_t>(b)]; }
  Index rows(Index b) const { return block_rows_[static_cast<std::size_t>(b)]; }
  void record(Mp2Step step, const char* kernel, double seconds, double elements) {
    kernels_.record_host(step_name(step), kernel, seconds, {0, double(sizeof(W)) * elements}, dtype());
  }
  void read_timed(Mp2Step step, const BlockStore<W>& store, Index b, W* into) {
    linalg::Stopwatch clock;
    store.read(b, into);
    record(step, "scratch_read", clock.seconds(), double(rows(b) * naux_));
  }
  void write_timed(Mp2Step step, BlockStore<W>& store, Index b, const W* from) {
    linalg::Stopwatch clock;
    store.write(b, from);
    record(step, "scratch_write", clock.seconds(), double(rows(b) * naux_));
  }

  // One rank: the A store is the whole tensor, fitted in place (on scratch a block at a time: read, fit, write).
  void fit_in_place(const std::function<void(linalg::MatrixViewT<W>)>& fit) {
    comm_.checked([&] {
      linalg::MatrixT<W> buffer;
      for (const Index b : held_) {
        if (a_store_->in_memory()) {
          fit(a_store_->view(b));
          continue;
        }
        buffer.resize(rows(b), naux_);
        read_timed(Mp2Step::fitting, *a_store_, b, buffer.data());
        fit(linalg::view(buffer));
        write_timed(Mp2Step::fitting, *a_store_, b, buffer.data());
      }
    });
  }

  // Every rank's columns of block b, into a rows(b) x naux block at `base`.
  std::vector<linalg::StridedBlock> receives_into(Index b, W* base) const {
    std::vector<linalg::StridedBlock> out;
    const Index r_rows = rows(b);
    for (int r = 0; r < ranks_; ++r) {
      if (layout_.columns(r) == 0) continue;
      out.push_back({r, base + layout_.col0[static_cast<std::size_t>(r)] * r_rows, std::size_t(r_rows),
                     std::size_t(layout_.columns(r)), std::size_t(r_rows), sizeof(W)});
    }
    return out;
  }
  void timed_exchange(const std::vector<linalg::StridedBlock>& sends, const std::vector<linalg::StridedBlock>& receives,
                      double bytes) {
    linalg::Stopwatch clock;
    comm_.exchange(sends, receives);
    kernels_.record_host(step_name(Mp2Step::fitting), "redistribute", clock.seconds(), {0, bytes}, dtype());
  }

  // Ranks, in memory: every block to its holder at once, then each fitted there.
  void fit_after_exchange(const std::function<void(linalg::MatrixViewT<W>)>& fit) {
    const Index my_cols = layout_.columns(me_);
    std::vector<linalg::StridedBlock> sends, receives;
    double bytes = 0;
    for (Index b = 0; b < block_count() && my_cols > 0; ++b) {
      sends.push_back({holder(b), a_store_->data(b), std::size_t(rows(b)), std::size_t(my_cols), std::size_t(rows(b)),
                       sizeof(W)});
      bytes += double(sizeof(W)) * double(rows(b) * my_cols);
    }
    for (const Index b : held_) {
      const auto r = receives_into(b, b_own_->data(b));
      receives.insert(receives.end(), r.begin(), r.end());
    }
    timed_exchange(sends, receives, bytes);
    a_store_->release();
    if (collective_) {
      for (std::size_t k = 0; k < most_held(); ++k) fit(k < held_.size() ? b_own_->view(held_[k]) : no_block());
      return;
    }
    comm_.checked([&] {
      for (const Index b : held_) fit(b_own_->view(b));
    });
  }

  // The largest number of blocks one rank holds: the rounds of a collective fit.
  std::size_t most_held() const {
    std::vector<std::size_t> count(static_cast<std::size_t>(ranks_), 0);
    for (Index b = 0; b < block_count(); ++b) ++count[static_cast<std::size_t>(holder(b))];
    return *std::max_element(count.begin(), count.end());
  }
  linalg::MatrixViewT<W> no_block() const { return {nullptr, 0, naux_, 1}; }

  // Ranks, on scratch: round k sends every holder its k-th block, which it fits and writes to its own file.
  void fit_in_rounds(const std::function<void(linalg::MatrixViewT<W>)>& fit) {
    const Index my_cols = layout_.columns(me_);
    std::vector<std::vector<Index>> held_by(static_cast<std::size_t>(ranks_));
    for (Index b = 0; b < block_count(); ++b) held_by[static_cast<std::size_t>(holder(b))].push_back(b);
    std::size_t rounds = 0;
    for (const auto& h : held_by) rounds = std::max(rounds, h.size());
    std::vector<std::vector<W>> pieces(static_cast<std::size_t>(ranks_));
    linalg::MatrixT<W> block;
    const auto& mine = held_by[static_cast<std::size_t>(me_)];
    for (std::size_t k = 0; k < rounds; ++k) {
      std::vector<linalg::StridedBlock> sends, receives;
      double bytes = 0;
      comm_.checked([&] {
        for (int s = 0; s < ranks_; ++s) {
          const auto& h = held_by[static_cast<std::size_t>(s)];
          if (k >= h.size() || my_cols == 0) continue;
          const Index b = h[k];
          auto& piece = pieces[static_cast<std::size_t>(s)];
          piece.resize(static_cast<std::size_t>(rows(b) * my_cols));
          linalg::Stopwatch clock;
          a_store_->read(b, piece.data());
          record(Mp2Step::fitting, "scratch_read", clock.seconds(), double(piece.size()));
          sends.push_back({s, piece.data(), std::size_t(rows(b)), std::size_t(my_cols), std::size_t(rows(b)),
                           sizeof(W)});
          bytes += double(sizeof(W)) * double(piece.size());
        }
      });
      if (k < mine.size()) {
        block.resize(rows(mine[k]), naux_);
        receives = receives_into(mine[k], block.data());
      }
      timed_exchange(sends, receives, bytes);
      if (collective_) fit(k < mine.size() ? linalg::view(block) : no_block());
      comm_.checked([&] {
        if (k >= mine.size()) return;
        if (!collective_) fit(linalg::view(block));
        write_timed(Mp2Step::fitting, *b_own_, mine[k], block.data());
      });
    }
  }

  // The pairs this rank computes, grouped by anchor so that each anchor block is loaded once.
  std::vector<Work> this_ranks_pairs() const {
    std::vector<Work> work;
    for (std::size_t k = 0; k < layout_.pairs.size(); ++k) {
      if (layout_.pair_rank[k] != me_) continue;
      const auto [bi, bj] = layout_.pair_blocks[k];
      // The anchor is a block this rank holds; a pair of two fetched blocks anchors on I (fetched once per anchor).
      work.push_back(holder(bi) == me_ || holder(bj) != me_ ? Work{k, bi, bj} : Work{k, bj, bi});
    }
    std::stable_sort(work.begin(), work.end(), [](const Work& a, const Work& b) {
      return a.anchor != b.anchor ? a.anchor < b.anchor : a.partner < b.partner;
    });
    return work;
  }

  // A partner is loaded when it is not a view of this rank's memory.
  bool needs_load(const Work& w) const {
    return w.partner != w.anchor && (holder(w.partner) != me_ || !b_store_->in_memory());
  }
  void load(Index b, linalg::MatrixT<W>& into, linalg::BlockLender& lender) const {
    into.resize(rows(b), naux_);
    if (holder(b) == me_) b_store_->read(b, into.data());
    else lender.fetch(holder(b), b, into.data(), sizeof(W) * std::size_t(into.size()))->wait();
  }

  void pair_loop(const std::vector<Work>& work, linalg::BlockLender& lender,
                 const std::function<void(std::size_t, linalg::ConstMatrixViewT<W>, linalg::ConstMatrixViewT<W>)>& compute) {
    linalg::MatrixT<W> anchor_buffer;
    // The next partner that needs loading is loaded on another thread while the current pair is computed.
    ReadAhead<linalg::MatrixT<W>> ahead;
    std::size_t pending_for = work.size();
    auto start_from = [&](std::size_t i) {
      for (std::size_t j = i; j < work.size(); ++j) {
        if (!needs_load(work[j])) continue;
        pending_for = j;
        ahead.start([&, j](linalg::MatrixT<W>& into) { load(work[j].partner, into, lender); });
        return;
      }
      pending_for = work.size();
    };
    double waited_read = 0, waited_fetch = 0, read_bytes = 0, fetch_bytes = 0;
    Index anchor = -1;
    linalg::ConstMatrixViewT<W> a_view{};
    start_from(0);
    for (std::size_t i = 0; i < work.size(); ++i) {
      const Work& w = work[i];
      if (w.anchor != anchor) {
        anchor = w.anchor;
        if (holder(anchor) != me_) {
          // A pair of two other ranks' blocks (Mp2Layout): the anchor is fetched too, while nothing overlaps it
          // (after the partner being fetched has arrived: one fetch at a time keeps each owner's answers in order).
          linalg::Stopwatch clock;
          ahead.wait();
          load(anchor, anchor_buffer, lender);
          waited_fetch += clock.seconds();
          fetch_bytes += double(sizeof(W)) * double(anchor_buffer.size());
          a_view = linalg::view(anchor_buffer);
        } else if (b_store_->in_memory()) {
          a_view = b_store_->view(anchor);
        } else {
          anchor_buffer.resize(rows(anchor), naux_);
          read_timed(Mp2Step::pair_energy, *b_store_, anchor, anchor_buffer.data());
          a_view = linalg::view(anchor_buffer);
        }
      }
      linalg::ConstMatrixViewT<W> p_view = a_view;
      if (w.partner != w.anchor) {
        if (!needs_load(w)) {
          p_view = b_store_->view(w.partner);
        } else {
          if (pending_for != i) throw std::logic_error("DF-MP2 pair loop: partner block not requested in order");
          linalg::Stopwatch clock;
          const linalg::MatrixT<W>& partner = ahead.take();  // rethrows a read or fetch error
          const double bytes = double(sizeof(W)) * double(partner.size());
          (holder(w.partner) == me_ ? waited_read : waited_fetch) += clock.seconds();
          (holder(w.partner) == me_ ? read_bytes : fetch_bytes) += bytes;
          p_view = linalg::view(partner);
          start_from(i + 1);
        }
      }
      const bool anchor_is_i = layout_.pair_blocks[w.pair].first == w.anchor;
      compute(w.pair, anchor_is_i ? a_view : p_view, anchor_is_i ? p_view : a_view);
    }
    const std::string pair_step = step_name(Mp2Step::pair_energy);
    if (read_bytes > 0) kernels_.record_host(pair_step, "scratch_read", waited_read, {0, read_bytes}, dtype());
    if (fetch_bytes > 0) kernels_.record_host(pair_step, "fetch_block", waited_fetch, {0, fetch_bytes}, dtype());
  }

  const Mp2Layout& layout_;
  Index naux_;
  linalg::Comm& comm_;
  linalg::Kernels& kernels_;
  int ranks_, me_;
  bool on_scratch_;
  bool collective_ = false;  // fit_each_collectively
  const std::string* scratch_;
  std::string suffix_;
  std::vector<Index> block_rows_, block_row0_, held_;  // each block's rows, and its first in the stacked A
  std::vector<std::pair<Index, Index>> my_aux_;
  std::unique_ptr<BlockStore<W>> a_store_, b_own_;
  BlockStore<W>* b_store_ = nullptr;  // the fitted blocks: the A store on one rank, b_own_ with several
};

}  // namespace dfmp2::chem
