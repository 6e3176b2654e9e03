#include "chem/mp2/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "linalg/errors.hpp"
#include "linalg/random.hpp"

namespace dfmp2::chem {

using linalg::Index;

namespace {

struct NamedShape {
  const char* name;
  SyntheticShape shape;
};

// The shapes of the published Trainium DF-MP2 benchmark: (nbasis, nocc, naux).
const NamedShape kNamedShapes[] = {
    {"small", {128, 16, 384, kDefaultSyntheticSeed}},
    {"medium", {512, 64, 1536, kDefaultSyntheticSeed}},
    {"large", {768, 96, 2304, kDefaultSyntheticSeed}},
};

std::uint64_t packed_index(Index m, Index n) {  // m >= n
  return static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(m + 1) / 2 + static_cast<std::uint64_t>(n);
}

}  // namespace

std::optional<SyntheticShape> named_synthetic_shape(const std::string& name) {
  for (const auto& s : kNamedShapes)
    if (name == s.name) return s.shape;
  return std::nullopt;
}

std::vector<std::string> synthetic_shape_names() {
  std::vector<std::string> names;
  for (const auto& s : kNamedShapes) names.emplace_back(s.name);
  return names;
}

void validate_synthetic_shape(const SyntheticShape& s) {
  if (s.nbasis < 2) throw InputError(fmt::format("synthetic shape: nbasis must be >= 2, got {}", s.nbasis));
  if (s.nocc < 1 || s.nocc >= s.nbasis)
    throw InputError(fmt::format("synthetic shape: nocc must be in 1..{} (below nbasis), got {}", s.nbasis - 1,
                                 s.nocc));
  if (s.naux < 1) throw InputError(fmt::format("synthetic shape: naux must be >= 1, got {}", s.naux));
}

SyntheticThreeIndex::SyntheticThreeIndex(const SyntheticShape& shape)
    : nbasis_(shape.nbasis),
      naux_(shape.naux),
      seed_(shape.seed),
      scale_(std::sqrt(3.0 / (static_cast<double>(shape.nvir()) *
                              std::sqrt(8.0 * static_cast<double>(shape.nocc) * static_cast<double>(shape.naux))))) {}

double SyntheticThreeIndex::value(Index p, Index m, Index n) const {
  if (m < n) std::swap(m, n);
  const std::uint64_t npair = packed_index(nbasis_, 0);  // nbasis (nbasis + 1) / 2
  const linalg::PhiloxStream u(seed_, kSyntheticStreamThreeIndex);
  return (2.0 * u.uniform_at(static_cast<std::uint64_t>(p) * npair + packed_index(m, n)) - 1.0) * scale_;
}

void SyntheticThreeIndex::read_block(Index p0, Index count, double* out) const {
  if (p0 < 0 || count < 0 || p0 + count > naux_)
    throw std::out_of_range(fmt::format("synthetic (P|mn): functions {}..{} outside 0..{}", p0, p0 + count - 1,
                                        naux_ - 1));
  const Index nbf = nbasis_;
  const std::uint64_t npair = packed_index(nbf, 0);
  const linalg::PhiloxStream u(seed_, kSyntheticStreamThreeIndex);
  const double scale = scale_;
  constexpr Index kTile = 64;
  const Index tiles = (nbf + kTile - 1) / kTile;
#pragma omp parallel
  {
    // Row m of function P holds (P|mn), n = 0..m, at out[n + nbf m]: elements P npair + m(m+1)/2 + n, contiguous
    // in the stream, so each row is one fill.
#pragma omp for schedule(dynamic, 16)
    for (Index r = 0; r < count * nbf; ++r) {
      const Index q = r / nbf, m = r % nbf;
      double* row = out + q * nbf * nbf + m * nbf;
      u.uniform(row, static_cast<std::size_t>(m + 1), static_cast<std::uint64_t>(p0 + q) * npair + packed_index(m, 0));
      for (Index n = 0; n <= m; ++n) row[n] = (2.0 * row[n] - 1.0) * scale;
    }
    // Mirror the lower triangle onto the upper one, tile by tile.
#pragma omp for schedule(dynamic, 1)
    for (Index t = 0; t < count * tiles; ++t) {
      double* blk = out + (t / tiles) * nbf * nbf;
      const Index m0 = (t % tiles) * kTile, m1 = std::min(nbf, m0 + kTile);
      for (Index n0 = 0; n0 <= m0; n0 += kTile)
        for (Index m = m0; m < m1; ++m)
          for (Index n = n0, n1 = std::min(m, n0 + kTile); n < n1; ++n) blk[m + nbf * n] = blk[n + nbf * m];
    }
  }
}

SyntheticProblem::SyntheticProblem(const SyntheticShape& shape)
    : shape_(shape), three_index_(shape) {
  validate_synthetic_shape(shape);
  const Index nbf = shape.nbasis, nocc = shape.nocc, naux = shape.naux;

  c_.resize(nbf, nbf);
  linalg::PhiloxStream(shape.seed, kSyntheticStreamCoefficients)
      .parallel_normal(c_.data(), static_cast<std::size_t>(nbf * nbf), 0);
  c_ *= 1.0 / std::sqrt(static_cast<double>(nbf));

  eps_.resize(nbf);
  linalg::PhiloxStream(shape.seed, kSyntheticStreamOrbitalEnergies).uniform(eps_.data(), static_cast<std::size_t>(nbf));
  for (Index i = 0; i < nocc; ++i) eps_[i] = -2.0 + 1.8 * eps_[i];
  for (Index a = nocc; a < nbf; ++a) eps_[a] = 0.1 + 2.9 * eps_[a];
  std::sort(eps_.data(), eps_.data() + nocc);
  std::sort(eps_.data() + nocc, eps_.data() + nbf);

  // Column p of rt is row p of R, so J(p, q) is one dot product of two contiguous columns. Each element is
  // computed by one thread with the same (vectorised, fixed-order) dot product whatever the thread count.
  linalg::Matrix rt(naux, naux);
  linalg::PhiloxStream(shape.seed, kSyntheticStreamMetric)
      .parallel_normal(rt.data(), static_cast<std::size_t>(naux * naux), 0);
  metric_.resize(naux, naux);
  const double inv_naux = 1.0 / static_cast<double>(naux);
#pragma omp parallel for schedule(dynamic, 8)
  for (Index p = 0; p < naux; ++p) {
    for (Index q = 0; q <= p; ++q) {
      const double j = rt.col(p).dot(rt.col(q)) * inv_naux + (p == q ? 1.0 : 0.0);
      metric_(p, q) = j;
      metric_(q, p) = j;
    }
  }
}

}  // namespace dfmp2::chem
