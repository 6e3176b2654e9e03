#pragma once
// Where a rank keeps the blocks of a three-index tensor, and how it reads them back: the one store of DF-MP2's
// occupied blocks (chem/mp2/occupied_blocks.hpp) and of the DF-J/K's fitted auxiliary blocks (chem/scf/df_jk.cpp).
//
//   BlockStore  blocks laid end to end, each rows(b) x cols column-major and contiguous: in memory (one allocation,
//               so a pass across the blocks sees one matrix) or at the same offsets in a scratch file
//   ReadAhead   the next block read (from scratch, or fetched from another rank) on another thread while the current
//               one is used: the read-ahead both the J/K builds and the MP2 pair loop stream through
#include <algorithm>
#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chem/io/scratch.hpp"
#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// One load at a time ahead of its use: start() begins filling the spare buffer on another thread, take() waits for
// it (rethrowing what the load threw) and makes it the current buffer, which stays valid until the next take().
template <class Buffer>
class ReadAhead {
 public:
  template <class Load>
  void start(Load load) {
    pending_ = std::async(std::launch::async, [this, load] { load(next_); });
  }
  bool pending() const { return pending_.valid(); }
  // Waits for the load under way (if any) without taking it: the caller needs the channel to itself.
  void wait() const {
    if (pending_.valid()) pending_.wait();
  }
  Buffer& take() {
    pending_.get();
    std::swap(current_, next_);
    return current_;
  }
  ~ReadAhead() { wait(); }  // a load never outlives the buffers it fills

 private:
  Buffer current_, next_;
  std::future<void> pending_;
};

template <class W>
class BlockStore {
 public:
  using Index = linalg::Index;
  // Blocks `blocks` (ids) in that order, block b of block_rows[b] rows; in memory, or in a scratch file in
  // `*scratch_folder` named after `what` when it is given.
  // With `separate` (in memory), each block is an allocation of its own that release(b) gives back: a store that
  // changes hands a block at a time (chem/gradient) holds no more than what is still to go.
  BlockStore(const std::vector<Index>& blocks, const std::vector<Index>& block_rows, Index cols,
             const std::string* scratch_folder, const std::string& what, bool separate = false)
      : cols_(cols) {
    std::size_t offset = 0;
    for (const Index b : blocks) {
      slot_[b] = rows_.size();
      ids_.push_back(b);
      rows_.push_back(block_rows[static_cast<std::size_t>(b)]);
      offset_.push_back(offset);
      offset += static_cast<std::size_t>(rows_.back() * cols);
    }
    size_ = offset;
    // Not value-initialised: every block is written before it is read.
    if (scratch_folder != nullptr) file_ = std::make_unique<ScratchFile>(*scratch_folder, what);
    else if (!separate) memory_.reset(new W[size_]);
    else for (const Index b : ids_) separate_.emplace_back(new W[block_size(b)]);
  }
  bool in_memory() const { return !file_; }
  Index rows(Index b) const { return rows_[slot(b)]; }
  Index cols() const { return cols_; }
  Index count() const { return static_cast<Index>(ids_.size()); }  // blocks
  // Elements of all blocks together.
  std::size_t size() const { return size_; }
  // In memory: block b in place, and all blocks as one array (a pass across blocks, such as a fitting of rows).
  W* data(Index b) { return separate_.empty() ? memory_.get() + offset_[slot(b)] : separate_[slot(b)].get(); }
  const W* data(Index b) const {
    return separate_.empty() ? memory_.get() + offset_[slot(b)] : separate_[slot(b)].get();
  }
  W* all() {
    if (!separate_.empty()) throw std::logic_error("BlockStore: all() of separate blocks");
    return memory_.get();
  }
  linalg::MatrixViewT<W> view(Index b) { return {data(b), rows(b), cols_, rows(b)}; }

  // Columns [col0, col0 + ncols) of block b from `from`, whose columns are `ld` apart.
  void write_columns(Index b, Index col0, Index ncols, const W* from, Index ld) {
    const Index r = rows(b);
    if (in_memory()) {
      for (Index j = 0; j < ncols; ++j) std::copy_n(from + j * ld, r, data(b) + (col0 + j) * r);
      return;
    }
    const W* packed = from;
    if (ld != r) {
      packed_.resize(static_cast<std::size_t>(r * ncols));
      for (Index j = 0; j < ncols; ++j) std::copy_n(from + j * ld, r, packed_.data() + j * r);
      packed = packed_.data();
    }
    file_->write(packed, static_cast<std::size_t>(r * ncols), offset_[slot(b)] + static_cast<std::size_t>(col0 * r));
  }
  // Columns [col0, col0 + ncols) of block b into `into`, whose columns are `ld` apart (one contiguous span of the
  // block: a slab of auxiliary functions across the blocks is one read per block). Thread-safe.
  void read_columns(Index b, Index col0, Index ncols, W* into, Index ld) const {
    const Index r = rows(b);
    const std::size_t first = offset_[slot(b)] + static_cast<std::size_t>(col0 * r);
    if (in_memory()) {
      for (Index j = 0; j < ncols; ++j) std::copy_n(data(b) + (col0 + j) * r, r, into + j * ld);
      return;
    }
    if (ld == r) return read_span(first, static_cast<std::size_t>(r * ncols), into);
    std::vector<W> packed(static_cast<std::size_t>(r * ncols));
    read_span(first, packed.size(), packed.data());
    for (Index j = 0; j < ncols; ++j) std::copy_n(packed.data() + j * r, r, into + j * ld);
  }
  // Columns [col0, col0 + ncols) of every block, the blocks in the order given, their rows one under the other in
  // `into` (columns all the blocks' rows apart): a slab of auxiliary functions across the blocks, one read per
  // block. Thread-safe.
  void read_slab(Index col0, Index ncols, W* into) const {
    Index all = 0;
    for (const Index r : rows_) all += r;
    Index row0 = 0;
    for (const Index b : ids_) {
      read_columns(b, col0, ncols, into + row0, all);
      row0 += rows(b);
    }
  }
  // Block b: in place in memory, else read from scratch into `buffer`.
  const W* block(Index b, std::vector<W>& buffer) const {
    if (in_memory()) return data(b);
    buffer.resize(block_size(b));
    read(b, buffer.data());
    return buffer.data();
  }
  // The whole block b to or from `data` (rows(b) x cols, contiguous). Thread-safe for reads.
  void write(Index b, const W* from) { write_columns(b, 0, cols_, from, rows(b)); }
  void read(Index b, W* into) const {
    if (in_memory()) std::copy_n(data(b), block_size(b), into);
    else read_span(offset_[slot(b)], block_size(b), into);
  }
  // Elements [first, first + count) of the blocks end to end, across block boundaries.
  void read_span(std::size_t first, std::size_t count, W* into) const {
    if (in_memory()) std::copy_n(all_blocks() + first, count, into);
    else file_->read(into, count, first);
  }
  void write_span(std::size_t first, std::size_t count, const W* from) {
    if (in_memory()) std::copy_n(from, count, all_blocks() + first);
    else file_->write(from, count, first);
  }

  // use(b, block) for each block of `order`: in place from memory, or read from scratch through a ReadAhead (the
  // next block read while this one is used). Returns the seconds spent waiting for reads and the bytes read (zero
  // in memory): only the waits are the disk's cost, the rest overlapped.
  struct Streamed {
    double waited_seconds = 0, bytes = 0;
  };
  template <class Use>
  Streamed for_each(const std::vector<Index>& order, const Use& use) const {
    Streamed out;
    if (in_memory()) {
      for (const Index b : order) use(b, data(b));
      return out;
    }
    ReadAhead<std::vector<W>> ahead;
    auto load = [this](Index b) {
      return [this, b](std::vector<W>& buffer) {
        buffer.reserve(largest_block());  // no growth, so no transient copies
        buffer.resize(block_size(b));
        read(b, buffer.data());
      };
    };
    if (!order.empty()) ahead.start(load(order.front()));
    for (std::size_t i = 0; i < order.size(); ++i) {
      linalg::Stopwatch wait;
      const std::vector<W>& block = ahead.take();
      out.waited_seconds += wait.seconds();
      out.bytes += double(sizeof(W)) * double(block.size());
      if (i + 1 < order.size()) ahead.start(load(order[i + 1]));
      use(order[i], block.data());
    }
    return out;
  }

  void release() {
    memory_.reset();
    separate_.clear();
    file_.reset();
  }
  // Block b's memory given back (separate blocks; elsewhere nothing): it is not read again.
  void release(Index b) {
    if (!separate_.empty()) separate_[slot(b)].reset();
  }

 private:
  std::size_t slot(Index b) const { return slot_.at(b); }
  W* all_blocks() const {
    if (!separate_.empty()) throw std::logic_error("BlockStore: a span across separate blocks");
    return memory_.get();
  }
  std::size_t block_size(Index b) const { return static_cast<std::size_t>(rows(b) * cols_); }
  std::size_t largest_block() const {
    Index most = 0;
    for (const Index r : rows_) most = std::max(most, r);
    return static_cast<std::size_t>(most * cols_);
  }
  Index cols_;
  std::map<Index, std::size_t> slot_;
  std::vector<Index> ids_, rows_;  // in the order given
  std::vector<std::size_t> offset_;
  std::size_t size_ = 0;
  std::unique_ptr<W[]> memory_;
  std::vector<std::unique_ptr<W[]>> separate_;  // one allocation per block, by slot
  std::unique_ptr<ScratchFile> file_;
  std::vector<W> packed_;
};

}  // namespace dfmp2::chem
