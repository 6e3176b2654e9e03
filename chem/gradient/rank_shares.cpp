// The DF-MP2 gradient's three-index stores (gradient_detail.hpp): made in memory or on scratch, and shared among the
// MPI ranks, each holding its blocks of orbitals or its auxiliary functions and changing from one shape to the other
// in rounds (README "Gradients and Hessians").
#include <algorithm>
#include <utility>

#include "chem/gradient/gradient_detail.hpp"

namespace dfmp2::chem::gradient_detail {

using linalg::MatrixView;

std::unique_ptr<Store> make_store(const std::vector<std::pair<Index, Index>>& blocks, Index per_orbital, Index naux,
                                  const std::string* scratch_folder, const std::string& what,
                                  const std::vector<Index>* ids, bool separate) {
  std::vector<Index> chosen = ids != nullptr ? *ids : std::vector<Index>{}, rows;  // rows by block id
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (ids == nullptr) chosen.push_back(static_cast<Index>(b));
    rows.push_back((blocks[b].second - blocks[b].first) * per_orbital);
  }
  return std::make_unique<Store>(chosen, rows, naux, scratch_folder, what, separate);
}

AuxColumns aux_columns(const std::vector<std::pair<Index, Index>>& ranges, Index naux, const Ranks& ranks) {
  AuxColumns out;
  const auto count = static_cast<Index>(ranges.size());
  const int size = ranks.size();
  for (int r = 0; r <= size; ++r) {
    const Index run0 = count * r / size;  // rank r's AO blocks [run0, next run0)
    out.col0.push_back(r == size ? naux : (run0 < count ? ranges[static_cast<std::size_t>(run0)].first : naux));
    if (r < size && r == ranks.rank())
      for (Index k = run0; k < count * (r + 1) / size; ++k) out.mine.push_back(ranges[static_cast<std::size_t>(k)]);
  }
  return out;
}

std::vector<Index> held_blocks(Index count, const Ranks& ranks) {
  std::vector<Index> out;
  for (Index b = ranks.rank(); b < count; b += ranks.size()) out.push_back(b);
  return out;
}

// Rounds of the two reshapes: round k moves block k ranks + r of each holder r.
namespace {
Index rounds_of(Index count, const Ranks& ranks) { return (count + ranks.size() - 1) / ranks.size(); }
}  // namespace

void columns_to_blocks(Store& columns, const AuxColumns& aux, Store& held,
                       const std::function<void(MatrixView)>& use, const Ranks& ranks) {
  const Index count = columns.count(), naux = held.cols(), mine = aux.count(ranks.rank());
  std::vector<std::vector<double>> pieces(static_cast<std::size_t>(ranks.size()));
  std::vector<double> whole;
  for (Index k = 0; k < rounds_of(count, ranks); ++k) {
    std::vector<linalg::StridedBlock> sends, receives;
    ranks.checked([&] {
      for (int r = 0; r < ranks.size() && mine > 0; ++r) {  // this rank's columns of each holder's block
        const Index b = k * ranks.size() + r;
        if (b >= count) break;
        const double* from = columns.in_memory() ? columns.data(b) : nullptr;
        if (from == nullptr) {
          auto& piece = pieces[static_cast<std::size_t>(r)];
          piece.resize(static_cast<std::size_t>(columns.rows(b) * mine));
          columns.read(b, piece.data());
          from = piece.data();
        }
        sends.push_back({r, const_cast<double*>(from), std::size_t(columns.rows(b)), std::size_t(mine),
                         std::size_t(columns.rows(b)), sizeof(double)});
      }
    });
    const Index b = k * ranks.size() + ranks.rank();  // this rank's block of the round, from every rank's columns
    double* into = nullptr;
    if (b < count) {
      whole.resize(held.in_memory() ? 0 : static_cast<std::size_t>(held.rows(b) * naux));
      into = held.in_memory() ? held.data(b) : whole.data();
      for (int r = 0; r < ranks.size(); ++r)
        if (aux.count(r) > 0)
          receives.push_back({r, into + aux.first(r) * held.rows(b), std::size_t(held.rows(b)),
                              std::size_t(aux.count(r)), std::size_t(held.rows(b)), sizeof(double)});
    }
    ranks.comm->exchange(sends, receives);
    for (int r = 0; r < ranks.size(); ++r)
      if (k * ranks.size() + r < count) columns.release(k * ranks.size() + r);
    ranks.checked([&] {
      if (b >= count) return;
      use(MatrixView{into, held.rows(b), naux, held.rows(b)});
      if (!held.in_memory()) held.write(b, into);
    });
  }
}

std::unique_ptr<Store> blocks_to_columns(Store& held, const std::vector<std::pair<Index, Index>>& blocks,
                                         Index per_orbital, const AuxColumns& aux, const std::string* scratch_folder,
                                         const std::string& what, const Ranks& ranks) {
  std::unique_ptr<Store> out;
  ranks.checked([&] {
    out = make_store(blocks, per_orbital, aux.count(ranks.rank()), scratch_folder, ranks.file_name(what), nullptr,
                     true);
  });
  Store& columns = *out;
  const Index count = columns.count(), mine = aux.count(ranks.rank());
  std::vector<std::vector<double>> pieces(static_cast<std::size_t>(ranks.size()));
  std::vector<double> whole;
  for (Index k = 0; k < rounds_of(count, ranks); ++k) {
    std::vector<linalg::StridedBlock> sends, receives;
    const Index b = k * ranks.size() + ranks.rank();  // this rank's block of the round, to every rank
    const double* from = nullptr;
    ranks.checked([&] {  // on every rank, with a block this round or not: it agrees with the others
      if (b >= count) return;
      if (held.in_memory()) {
        from = held.data(b);
        return;
      }
      whole.resize(static_cast<std::size_t>(held.rows(b) * held.cols()));
      held.read(b, whole.data());
      from = whole.data();
    });
    if (b < count) {
      for (int r = 0; r < ranks.size(); ++r)
        if (aux.count(r) > 0)
          sends.push_back({r, const_cast<double*>(from + aux.first(r) * held.rows(b)), std::size_t(held.rows(b)),
                           std::size_t(aux.count(r)), std::size_t(held.rows(b)), sizeof(double)});
    }
    for (int r = 0; r < ranks.size() && mine > 0; ++r) {  // this rank's columns of each holder's block
      const Index c = k * ranks.size() + r;
      if (c >= count) break;
      auto& piece = pieces[static_cast<std::size_t>(r)];
      piece.resize(columns.in_memory() ? 0 : static_cast<std::size_t>(columns.rows(c) * mine));
      receives.push_back({r, columns.in_memory() ? columns.data(c) : piece.data(), std::size_t(columns.rows(c)),
                          std::size_t(mine), std::size_t(columns.rows(c)), sizeof(double)});
    }
    ranks.comm->exchange(sends, receives);
    if (b < count) held.release(b);
    ranks.checked([&] {
      for (int r = 0; r < ranks.size() && mine > 0 && !columns.in_memory(); ++r) {
        const Index c = k * ranks.size() + r;
        if (c < count) columns.write(c, pieces[static_cast<std::size_t>(r)].data());
      }
    });
  }
  return out;
}

void Ranks::sum(double* data, Index count) const {
  if (size() > 1) comm->sum(data, static_cast<std::size_t>(count));
}

void update_blocks(Store& store, Index count, const std::function<void(MatrixView)>& update) {
  std::vector<double> buffer;
  for (Index b = 0; b < count; ++b) {
    if (store.in_memory()) {
      update(store.view(b));
      continue;
    }
    store.block(b, buffer);
    update(MatrixView{buffer.data(), store.rows(b), store.cols(), store.rows(b)});
    store.write(b, buffer.data());
  }
}

}  // namespace dfmp2::chem::gradient_detail
