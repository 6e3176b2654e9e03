// The amplitude pass's pair integrals, computed once and shared between rows and ranks (pair_integrals.hpp).
#include "chem/gradient/pair_integrals.hpp"

#include <algorithm>
#include <stdexcept>

namespace dfmp2::chem::gradient_detail {

using linalg::ConstMatrixView;
using linalg::MatrixView;
using linalg::Trans;

double kept_pair_doubles(Index na, Index nv, Index block, int ranks) {
  const auto blocks = active_blocks(na, block);
  const auto count = static_cast<std::size_t>(std::max(ranks, 1));
  std::vector<double> own(count, 0.0), kept(count, 0.0);
  for (std::size_t K = 0; K < blocks.size(); ++K) own[K % count] += double(blocks[K].second - blocks[K].first);
  for (std::size_t r = 0; r < count; ++r) kept[r] = own[r] * (double(na) - own[r]) + own[r] * (own[r] - 1.0) / 2.0;
  return *std::max_element(kept.begin(), kept.end()) * double(nv) * double(nv);
}

PairIntegrals::PairIntegrals(bool keep, const std::vector<std::pair<Index, Index>>& blocks, const Ranks& ranks,
                             Index nv)
    : keep_(keep), blocks_(blocks), ranks_(ranks), na_(blocks.empty() ? 0 : blocks.back().second), nv_(nv),
      rows_finished_(std::make_unique<std::atomic<Index>[]>(blocks.size())) {
  for (std::size_t I = 0; I < blocks.size(); ++I) rows_finished_[I] = 0;
  if (!keep_) return;
  position_.assign(static_cast<std::size_t>(na_), 0);
  Index own = 0;
  for (std::size_t I = 0; I < blocks_.size(); ++I)
    for (Index i = blocks_[I].first; i < blocks_[I].second; ++i)
      position_[std::size_t(i)] = ranks_.mine(Index(I)) ? own++ : others_++;
  first_.assign(static_cast<std::size_t>(na_), 0);
  std::size_t size = 0;
  for (std::size_t I = 0; I < blocks_.size(); ++I) {
    if (!ranks_.mine(Index(I))) continue;
    for (Index k = blocks_[I].first; k < blocks_[I].second; ++k) {
      first_[std::size_t(k)] = size;
      size += std::size_t((others_ + own - position_[std::size_t(k)] - 1) * nv_ * nv_);
    }
  }
  kept_.resize(size);
}

Index PairIntegrals::block_of(Index row) const {
  return std::upper_bound(blocks_.begin(), blocks_.end(), row, [](Index r, const auto& b) { return r < b.second; }) -
         blocks_.begin();
}

double* PairIntegrals::kept(Index k, Index i) {
  const Index pk = position_[std::size_t(k)], pi = position_[std::size_t(i)];
  const Index slot = ranks_.mine(block_of(i)) ? others_ + (pi - pk - 1) : pi;
  return kept_.data() + first_[std::size_t(k)] + slot * nv_ * nv_;
}

bool PairIntegrals::asks(Index I) const { return keep_ && !ranks_.mine(I); }

long long PairIntegrals::pairs_request(Index k, Index I) const {
  const auto count = static_cast<long long>(blocks_.size());
  return -1 - count - (static_cast<long long>(k) * count + I);
}

void PairIntegrals::tile(Index k, Index I, ConstMatrixView b_k, ConstMatrixView b_I, const double* from_rank,
                         Index from_rank_rows, double* tile, Kernels& kernels) {
  const Index nv = nv_, i0 = first_row(I), ni = rows(I);
  const bool own = ranks_.mine(I);
  // The first i whose pair integrals this row computes: i >= k of its own blocks, those the other rank has not.
  const Index computed = !keep_ ? 0 : own ? std::clamp<Index>(k - i0, 0, ni) : std::min(from_rank_rows, ni);
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
      const double* mirror = own ? kept(i0 + i, k) : from_rank + i * nv * nv;  // (ib|ka) at b + nv a
      for_tiles(nv, [&](Index a, Index b) { kt[b * nv + a] = mirror[a * nv + b]; });
    } else if (!own || i0 + i > k) {
      std::copy_n(kt, nv * nv, kept(k, i0 + i));
    }
  }
}

void PairIntegrals::finished(Index k) {
  const auto I = std::size_t(block_of(k));
  // Release: the row's kept pair integrals are written before another thread reads the count.
  rows_finished_[I].store(k - blocks_[I].first + 1, std::memory_order_release);
}

const void* PairIntegrals::lend(long long id, std::size_t bytes, std::vector<std::byte>& buffer) {
  const auto count = static_cast<long long>(blocks_.size());
  if (id < 0 && id >= -count) {  // rows_finished_request(I)
    const auto I = static_cast<Index>(-1 - id);
    if (!ranks_.mine(I) || bytes != sizeof(Index)) throw std::logic_error("DF-MP2 gradient: a bad row count request");
    buffer.resize(sizeof(Index));
    *reinterpret_cast<Index*>(buffer.data()) = rows_finished_[std::size_t(I)].load(std::memory_order_acquire);
    return buffer.data();
  }
  const long long code = -1 - count - id;  // pairs_request(k, I)
  const auto k = static_cast<Index>(code / count), I = static_cast<Index>(code % count);
  const Index rows = static_cast<Index>(bytes / pairs_bytes(1));
  if (!keep_ || code < 0 || k >= na_ || !ranks_.mine(I) || ranks_.mine(block_of(k)) || bytes != pairs_bytes(rows) ||
      rows > rows_finished_[std::size_t(I)].load(std::memory_order_acquire))
    throw std::logic_error("DF-MP2 gradient: pair integrals asked for that this rank has not made");
  buffer.resize(bytes);
  auto* out = reinterpret_cast<double*>(buffer.data());
  for (Index i = 0; i < rows; ++i) std::copy_n(kept(first_row(I) + i, k), nv_ * nv_, out + i * nv_ * nv_);
  return buffer.data();
}

}  // namespace dfmp2::chem::gradient_detail
