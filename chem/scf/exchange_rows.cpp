#include "chem/scf/exchange_rows.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dfmp2::chem {

using linalg::Index;

ExchangeRows::ExchangeRows(const std::vector<int>& packed_m, const std::vector<int>& packed_n, Index nbf) {
  if (packed_m.size() != packed_n.size()) throw std::logic_error("ExchangeRows: packed index lists differ in length");
  const Index npacked = static_cast<Index>(packed_m.size());
  // Row lists in CSR form: each stored pair (m, n) is an entry of row m and, off the diagonal, of row n.
  row_start_.assign(static_cast<std::size_t>(nbf) + 1, 0);
  for (Index x = 0; x < npacked; ++x) {
    ++row_start_[static_cast<std::size_t>(packed_m[x]) + 1];
    if (packed_m[x] != packed_n[x]) ++row_start_[static_cast<std::size_t>(packed_n[x]) + 1];
  }
  std::partial_sum(row_start_.begin(), row_start_.end(), row_start_.begin());
  partner_.resize(static_cast<std::size_t>(row_start_.back()));
  position_.resize(partner_.size());
  std::vector<Index> fill(row_start_.begin(), row_start_.end() - 1);
  auto add = [&](int row, int partner, Index x) {
    const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(row)]++);
    partner_[at] = partner;
    position_[at] = x;
  };
  for (Index x = 0; x < npacked; ++x) {
    add(packed_m[x], packed_n[x], x);
    if (packed_m[x] != packed_n[x]) add(packed_n[x], packed_m[x], x);
  }
  // Partners ascending in each row (the packed order is by shell pair, not by function).
  std::vector<std::pair<int, Index>> row;
  for (Index m = 0; m < nbf; ++m) {
    const auto b = static_cast<std::size_t>(row_start_[m]), e = static_cast<std::size_t>(row_start_[m + 1]);
    row.clear();
    for (std::size_t k = b; k < e; ++k) row.emplace_back(partner_[k], position_[k]);
    std::sort(row.begin(), row.end());
    for (std::size_t k = b; k < e; ++k) std::tie(partner_[k], position_[k]) = row[k - b];
  }
  // Consecutive rows with the same partners share a product.
  auto same_partners = [&](Index a, Index b) {
    const Index la = row_start_[a + 1] - row_start_[a];
    return la == row_start_[b + 1] - row_start_[b] &&
           std::equal(partner_.begin() + row_start_[a], partner_.begin() + row_start_[a + 1],
                      partner_.begin() + row_start_[b]);
  };
  for (Index m = 0; m < nbf;) {
    ExchangeRowGroup g{m, 1, row_start_[m + 1] - row_start_[m]};
    while (m + g.rows < nbf && g.rows < kMaxRows && same_partners(m, m + g.rows)) ++g.rows;
    max_gathered_ = std::max(max_gathered_, g.rows * g.partners);
    groups_.push_back(g);
    m += g.rows;
  }
}

double ExchangeRows::bytes(Index npacked, Index nbf) {
  // Each pair in two rows (at most), with its partner and position; the row starts; a group per row at most.
  return 2.0 * double(npacked) * double(sizeof(int) + sizeof(Index)) +
         double(nbf) * double(sizeof(Index) + sizeof(ExchangeRowGroup));
}

template <class T>
void ExchangeRows::gather_block(const ExchangeRowGroup& group, const double* bt, Index q, T* s, bool parallel) const {
  const Index rows = group.rows, width = q * rows;
#pragma omp parallel for schedule(static) if (parallel)
  for (Index j = 0; j < group.partners; ++j) {
    for (Index r = 0; r < rows; ++r) {
      const double* from = bt + q * position_[static_cast<std::size_t>(row_start_[group.first + r] + j)];
      T* to = s + j * width + r * q;
      if constexpr (std::is_same_v<T, double>) std::memcpy(to, from, sizeof(double) * static_cast<std::size_t>(q));
      else
        for (Index p = 0; p < q; ++p) to[p] = static_cast<T>(from[p]);
    }
  }
}

template <class T>
void ExchangeRows::gather_occupied(const ExchangeRowGroup& group, const T* c_t, Index nocc, T* out) const {
  const int* partners = partner_.data() + row_start_[group.first];
  for (Index j = 0; j < group.partners; ++j)
    std::memcpy(out + j * nocc, c_t + Index(partners[j]) * nocc, sizeof(T) * static_cast<std::size_t>(nocc));
}

template void ExchangeRows::gather_block<double>(const ExchangeRowGroup&, const double*, Index, double*, bool) const;
template void ExchangeRows::gather_block<float>(const ExchangeRowGroup&, const double*, Index, float*, bool) const;
template void ExchangeRows::gather_occupied<double>(const ExchangeRowGroup&, const double*, Index, double*) const;
template void ExchangeRows::gather_occupied<float>(const ExchangeRowGroup&, const float*, Index, float*) const;

void transpose_block(const double* in, Index rows, Index q, double* out) {
  // Tiles of 64 x 64 so that both sides of a tile stay in the L1/L2 cache.
  constexpr Index kTile = 64;
#pragma omp parallel for schedule(static)
  for (Index x0 = 0; x0 < rows; x0 += kTile) {
    const Index x1 = std::min(rows, x0 + kTile);
    for (Index p0 = 0; p0 < q; p0 += kTile) {
      const Index p1 = std::min(q, p0 + kTile);
      for (Index x = x0; x < x1; ++x)
        for (Index p = p0; p < p1; ++p) out[p + q * x] = in[x + rows * p];
    }
  }
}

}  // namespace dfmp2::chem
