// Four-centre integrals with libint2: the whole tensor (small molecules, tests) and the exact J/K (FourCenterJk,
// Schwarz- and density-screened, integral-direct or semi-direct).
#include "chem/integrals/integrals.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chem/integrals/libint_support.hpp"

namespace dfmp2::chem {

using namespace libint_support;

std::vector<double> four_center_integrals(const BasisSet& basis) {
  const LibintBasis b = to_libint(basis);
  const std::size_t nbf = b.nbf;
  std::vector<double> out(nbf * nbf * nbf * nbf, 0.0);
  const libint2::Engine proto = make_coulomb_engine("four-centre integrals", BraKet::xx_xx, b.max_nprim, b.max_l);
  EnginePool engines(proto);
  const int nsh = b.nshells();
#pragma omp parallel
  {
    libint2::Engine& engine = engines.mine();
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      for (int s2 = 0; s2 < nsh; ++s2) {
        for (int s3 = 0; s3 < nsh; ++s3) {
          for (int s4 = 0; s4 < nsh; ++s4) {
            engine.compute2<Operator::coulomb, BraKet::xx_xx, 0>(b.shells[s1], b.shells[s2], b.shells[s3],
                                                                 b.shells[s4]);
            const double* ints = buf[0];
            if (ints == nullptr) continue;
            std::size_t f1234 = 0;
            for (int f1 = 0; f1 < b.sizes[s1]; ++f1) {
              for (int f2 = 0; f2 < b.sizes[s2]; ++f2) {
                for (int f3 = 0; f3 < b.sizes[s3]; ++f3) {
                  for (int f4 = 0; f4 < b.sizes[s4]; ++f4, ++f1234) {
                    const std::size_t i1 = b.offsets[s1] + f1, i2 = b.offsets[s2] + f2;
                    const std::size_t i3 = b.offsets[s3] + f3, i4 = b.offsets[s4] + f4;
                    out[i4 + nbf * (i3 + nbf * (i2 + nbf * i1))] = ints[f1234];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------------------------
// FourCenterJk

struct FourCenterJk::Impl {
  LibintBasis b;
  ShellPairs sp;
  double threshold = 0;
  // The shell pairs that can pass the Schwarz screening, sorted by Schwarz factor, largest first: bra j's kets
  // are the pairs i in [j, ket_end[j]).
  std::vector<std::size_t> order;     // index into sp.pairs
  std::vector<double> q;              // Schwarz factor of order[j]
  std::vector<std::size_t> ket_end;
  // Semi-direct cache: bra j's integrals start at cache_offset[j] (kNotCached when it is computed every build).
  static constexpr std::size_t kNotCached = static_cast<std::size_t>(-1);
  std::vector<std::size_t> cache_offset;
  std::vector<double> cache;
  bool cache_filled = false;
  EnginePool engines;
  std::vector<std::vector<double>> jt, kt;  // per-thread accumulators, row-major nbf x nbf
  Stats stats;
  int rank = 0, ranks = 1;  // this object's bras: those with index % ranks == rank
  bool mine(std::size_t bra) const { return bra % std::size_t(ranks) == std::size_t(rank); }
};

namespace {

// Adds one shell quartet's contributions (integrals `v`, row-major over the functions of s1 s2 s3 s4, times the
// permutational weight `deg`) to the thread's accumulators: J_12 += (12|34) D_34, J_34 += (12|34) D_12,
// K_13 += D_24, K_24 += D_13, K_14 += D_23, K_23 += D_14. The permutations the unique quartet stands for are
// restored by symmetrising the accumulators at the end.
void contract_quartet(const double* v, double deg, const double* d, std::size_t nbf, double* jt, double* kt,
                      std::size_t o1, int n1, std::size_t o2, int n2, std::size_t o3, int n3, std::size_t o4, int n4) {
  for (int f1 = 0; f1 < n1; ++f1) {
    const std::size_t i1 = o1 + std::size_t(f1);
    for (int f2 = 0; f2 < n2; ++f2) {
      const std::size_t i2 = o2 + std::size_t(f2);
      const double d12 = d[i1 * nbf + i2];
      double j12 = 0;
      for (int f3 = 0; f3 < n3; ++f3, v += n4) {
        const std::size_t i3 = o3 + std::size_t(f3);
        const double d13 = d[i1 * nbf + i3], d23 = d[i2 * nbf + i3];
        const double* d3 = d + i3 * nbf + o4;  // D(i3, i4) over f4
        const double* d2 = d + i2 * nbf + o4;  // D(i2, i4)
        const double* d1 = d + i1 * nbf + o4;  // D(i1, i4)
        double* j3 = jt + i3 * nbf + o4;
        double* k2 = kt + i2 * nbf + o4;
        double* k1 = kt + i1 * nbf + o4;
        double k13 = 0, k23 = 0;
        for (int f4 = 0; f4 < n4; ++f4) {
          const double x = v[f4] * deg;
          j12 += d3[f4] * x;
          j3[f4] += d12 * x;
          k13 += d2[f4] * x;
          k2[f4] += d13 * x;
          k23 += d1[f4] * x;
          k1[f4] += d23 * x;
        }
        kt[i1 * nbf + i3] += k13;
        kt[i2 * nbf + i3] += k23;
      }
      jt[i1 * nbf + i2] += j12;
    }
  }
}

}  // namespace

double FourCenterJk::fixed_bytes(const BasisSet& basis, int threads) {
  // The shell pairs' primitive data is known only once made; bound it by every primitive pair.
  double prim_pairs = 0, npairs = 0, nbf = 0;
  for (std::size_t a = 0; a < basis.shells.size(); ++a) {
    nbf += basis.shells[a].size();
    for (std::size_t c = 0; c <= a; ++c) {
      prim_pairs += double(basis.shells[a].exponents.size()) * double(basis.shells[c].exponents.size());
      npairs += 1;
    }
  }
  const double pairs = prim_pairs * double(sizeof(libint2::ShellPair::PrimPairData)) +
                       npairs * (double(sizeof(libint2::ShellPair)) + sizeof(std::pair<int, int>) + 9 * sizeof(double));
  // Accumulators per thread, the density's copies and the caller's J, K and D.
  return pairs + (2.0 * std::max(threads, 1) + 6.0) * 8.0 * nbf * nbf;
}

FourCenterJk::FourCenterJk(const BasisSet& basis, double cache_bytes, double screening_threshold, int rank,
                           int ranks)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.rank = rank;
  d.ranks = std::max(ranks, 1);
  d.b = to_libint(basis);
  d.threshold = screening_threshold;
  const libint2::Engine proto = make_coulomb_engine("four-centre integrals", BraKet::xx_xx, d.b.max_nprim, d.b.max_l);
  if (d.b.nbf == 0) return;
  d.sp = make_shell_pairs(d.b);
  for (std::size_t p = 0; p < d.sp.pairs.size(); ++p) {
    if (d.sp.schwarz[p] * d.sp.max_schwarz >= screening_threshold) d.order.push_back(p);
  }
  std::stable_sort(d.order.begin(), d.order.end(),
                   [&](std::size_t x, std::size_t y) { return d.sp.schwarz[x] > d.sp.schwarz[y]; });
  const std::size_t n = d.order.size();
  d.q.resize(n);
  std::vector<double> prefix(n + 1, 0.0);  // functions of the pairs before j
  for (std::size_t j = 0; j < n; ++j) {
    d.q[j] = d.sp.schwarz[d.order[j]];
    const auto [s1, s2] = d.sp.pairs[d.order[j]];
    prefix[j + 1] = prefix[j] + double(d.b.sizes[s1]) * d.b.sizes[s2];
  }
  d.ket_end.resize(n);
  d.cache_offset.assign(n, Impl::kNotCached);
  std::size_t cached = 0;
  const double cache_doubles = std::max(0.0, cache_bytes) / sizeof(double);
  for (std::size_t j = 0; j < n; ++j) {
    // First ket (at or after j) whose bound with bra j is below the threshold; q is non-increasing.
    const double qj = d.q[j];
    const auto end = std::partition_point(d.q.begin() + long(j), d.q.end(),
                                          [&](double qi) { return qi * qj >= screening_threshold; });
    d.ket_end[j] = std::size_t(end - d.q.begin());
    if (!d.mine(j)) continue;
    const double integrals = (prefix[j + 1] - prefix[j]) * (prefix[d.ket_end[j]] - prefix[j]);  // bra j's
    d.stats.quartets += double(d.ket_end[j] - j);
    d.stats.integrals += integrals;
    if (double(cached) + integrals <= cache_doubles) {
      d.cache_offset[j] = cached;
      cached += std::size_t(integrals);
    }
  }
  d.cache.resize(cached);
  d.stats.cached_integrals = double(cached);
  d.stats.cache_bytes = double(cached) * sizeof(double);
  d.engines = EnginePool(proto);
}

FourCenterJk::~FourCenterJk() = default;

const FourCenterJk::Stats& FourCenterJk::stats() const { return impl_->stats; }

void FourCenterJk::compute(const linalg::Matrix& density, linalg::Matrix& j, linalg::Matrix& k) {
  Impl& d = *impl_;
  const LibintBasis& b = d.b;
  const auto nbf = static_cast<linalg::Index>(b.nbf);
  if (density.rows() != nbf || density.cols() != nbf) {
    throw std::invalid_argument("exact_jk: density is " + std::to_string(density.rows()) + " x " +
                                std::to_string(density.cols()) + ", the basis has " + std::to_string(nbf) +
                                " functions");
  }
  j = linalg::Matrix::Zero(nbf, nbf);
  k = linalg::Matrix::Zero(nbf, nbf);
  d.stats.computed_last = d.stats.skipped_last = 0;
  if (nbf == 0) return;
  const int nsh = b.nshells();
  // Largest |D| in each shell block, for density screening.
  std::vector<double> dmax(static_cast<std::size_t>(nsh) * nsh, 0.0);
  for (int s1 = 0; s1 < nsh; ++s1) {
    for (int s2 = 0; s2 < nsh; ++s2) {
      dmax[static_cast<std::size_t>(s1) * nsh + s2] =
          density.block(static_cast<linalg::Index>(b.offsets[s1]), static_cast<linalg::Index>(b.offsets[s2]),
                        b.sizes[s1], b.sizes[s2])
              .cwiseAbs()
              .maxCoeff();
    }
  }
  auto dblock = [&](int s1, int s2) { return dmax[static_cast<std::size_t>(s1) * nsh + s2]; };

  const int nthreads = d.engines.size();
  const auto nbf2 = static_cast<std::size_t>(nbf) * static_cast<std::size_t>(nbf);
  d.jt.resize(static_cast<std::size_t>(nthreads));
  d.kt.resize(static_cast<std::size_t>(nthreads));
  const bool fill_cache = !d.cache_filled;
  const double* dens = density.data();  // symmetric: D(a, b) at a * nbf + b as well
  const auto nbra = static_cast<long>(d.order.size());
  double computed = 0, skipped = 0;
#pragma omp parallel num_threads(nthreads) reduction(+ : computed, skipped)
  {
    const int t = omp_get_thread_num();
    libint2::Engine& engine = d.engines.mine();
    const auto& buf = engine.results();
    std::vector<double>& jacc = d.jt[static_cast<std::size_t>(t)];
    std::vector<double>& kacc = d.kt[static_cast<std::size_t>(t)];
    jacc.assign(nbf2, 0.0);
    kacc.assign(nbf2, 0.0);
#pragma omp for schedule(dynamic)
    for (long jb = 0; jb < nbra; ++jb) {
      const auto bra = static_cast<std::size_t>(jb);
      if (!d.mine(bra)) continue;
      const std::size_t p12 = d.order[bra];
      const auto [s1, s2] = d.sp.pairs[p12];
      const int n1 = b.sizes[s1], n2 = b.sizes[s2];
      const std::size_t o1 = b.offsets[s1], o2 = b.offsets[s2];
      const double deg12 = (s1 == s2) ? 1.0 : 2.0;
      const double d12 = dblock(s1, s2);
      const bool cached = d.cache_offset[bra] != Impl::kNotCached;
      double* stream = cached ? d.cache.data() + d.cache_offset[bra] : nullptr;
      for (std::size_t ket = bra; ket < d.ket_end[bra]; ++ket) {
        const std::size_t p34 = d.order[ket];
        const auto [s3, s4] = d.sp.pairs[p34];
        const int n3 = b.sizes[s3], n4 = b.sizes[s4];
        const std::size_t size = std::size_t(n1) * std::size_t(n2) * std::size_t(n3) * std::size_t(n4);
        const double bound = d.q[bra] * d.q[ket];
        const double dlargest = std::max({d12, dblock(s3, s4), dblock(s1, s3), dblock(s1, s4), dblock(s2, s3),
                                          dblock(s2, s4)});
        const bool negligible = bound * dlargest < d.threshold;
        const double* ints = nullptr;
        if (cached && !fill_cache) {
          ints = stream;
        } else if (!negligible || (cached && fill_cache)) {
          engine.compute2<Operator::coulomb, BraKet::xx_xx, 0>(b.shells[s1], b.shells[s2], b.shells[s3],
                                                               b.shells[s4], &d.sp.data[p12], &d.sp.data[p34]);
          computed += 1;
          ints = buf[0];
          if (cached) {
            if (ints != nullptr) std::copy(ints, ints + size, stream);
            else std::fill(stream, stream + size, 0.0);
          }
        }
        if (cached) stream += size;
        if (negligible || ints == nullptr) {
          skipped += negligible ? 1 : 0;
          continue;
        }
        const double deg34 = (s3 == s4) ? 1.0 : 2.0;
        const double deg1234 = (ket == bra) ? 1.0 : 2.0;
        contract_quartet(ints, deg12 * deg34 * deg1234, dens, std::size_t(nbf), jacc.data(), kacc.data(), o1, n1, o2,
                         n2, b.offsets[s3], n3, b.offsets[s4], n4);
      }
    }
  }
  d.cache_filled = true;
  d.stats.computed_last = computed;
  d.stats.skipped_last = skipped;
  // Sum the threads' accumulators (row-major; the symmetrisation below makes the orientation irrelevant) and
  // restore the permutations: J = (Jacc + Jacc^T)/4, K = (Kacc + Kacc^T)/8.
  linalg::Matrix jsum = linalg::Matrix::Zero(nbf, nbf), ksum = linalg::Matrix::Zero(nbf, nbf);
  for (int t = 0; t < nthreads; ++t) {
    jsum += Eigen::Map<const linalg::Matrix>(d.jt[static_cast<std::size_t>(t)].data(), nbf, nbf);
    ksum += Eigen::Map<const linalg::Matrix>(d.kt[static_cast<std::size_t>(t)].data(), nbf, nbf);
  }
  j = (jsum + jsum.transpose()) * 0.25;
  k = (ksum + ksum.transpose()) * 0.125;
}

void exact_jk(const BasisSet& basis, const linalg::Matrix& density, linalg::Matrix& j, linalg::Matrix& k,
              double screening_threshold) {
  FourCenterJk(basis, 0.0, screening_threshold).compute(density, j, k);
}


}  // namespace dfmp2::chem
