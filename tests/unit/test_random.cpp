// Philox4x32-10 streams (known answers, distributions, split and thread invariance) and quasi-random point sets
// (Sobol with Joe-Kuo direction numbers, Halton, Latin hypercube).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "linalg/quasi_random.hpp"
#include "linalg/random.hpp"

namespace {

using dfmp2::linalg::PhiloxCounter;
using dfmp2::linalg::PhiloxKey;
using dfmp2::linalg::PhiloxStream;

// ---------------------------------------------------------------------------------------------------------------
// Philox4x32-10

// Known-answer vectors of Random123 (D. E. Shaw Research), file tests/kat_vectors, lines "philox4x32 10": counter
// words, key words, expected output. The same three vectors appear in Random123-Boost's test_philox.cpp and in
// the test suites of several independent reimplementations.
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    PhiloxCounter ctr;
    PhiloxKey key;
    PhiloxCounter expected;
  };
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},  // pi's hex digits
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& k : kats) EXPECT_EQ(dfmp2::linalg::philox4x32_10(k.ctr, k.key), k.expected);
}

TEST(Philox, StreamCounterAndKeyLayout) {
  const std::uint64_t seed = 0x0123456789abcdefULL, stream = 0xfedcba9876543210ULL, c = 0x1122334455667788ULL;
  const PhiloxStream s(seed, stream);
  EXPECT_EQ(s.key(), (PhiloxKey{0x89abcdef, 0x01234567}));
  EXPECT_EQ(s.block(c), dfmp2::linalg::philox4x32_10({0x55667788, 0x11223344, 0x76543210, 0xfedcba98},
                                                     {0x89abcdef, 0x01234567}));
}

TEST(Philox, ElementToWordMapping) {
  using dfmp2::linalg::uniform_double_from_words;
  using dfmp2::linalg::uniform_float_from_word;
  const PhiloxStream s(42, 7);
  for (std::uint64_t c : {0ULL, 1ULL, 12345ULL, (1ULL << 40) + 3}) {
    const PhiloxCounter w = s.block(c);
    EXPECT_EQ(s.uniform_at(2 * c), uniform_double_from_words(w[0], w[1]));
    EXPECT_EQ(s.uniform_at(2 * c + 1), uniform_double_from_words(w[2], w[3]));
    for (unsigned j = 0; j < 4; ++j) EXPECT_EQ(s.uniform_float_at(4 * c + j), uniform_float_from_word(w[j]));
    const double r = std::sqrt(-2.0 * std::log(uniform_double_from_words(w[0], w[1])));
    const double t = 2.0 * std::numbers::pi * uniform_double_from_words(w[2], w[3]);
    EXPECT_NEAR(s.normal_at(2 * c), r * std::cos(t), 1e-14 * (1 + r));
    EXPECT_NEAR(s.normal_at(2 * c + 1), r * std::sin(t), 1e-14 * (1 + r));
    EXPECT_EQ(s.normal_float_at(2 * c + 1), static_cast<float>(s.normal_at(2 * c + 1)));
  }
}

TEST(Philox, UniformNeverZeroOrOne) {
  using dfmp2::linalg::uniform_double_from_words;
  using dfmp2::linalg::uniform_float_from_word;
  EXPECT_EQ(uniform_double_from_words(0, 0), 0x1p-54);
  EXPECT_EQ(uniform_double_from_words(0xffffffff, 0xffffffff), 1.0 - 0x1p-53);
  EXPECT_EQ(uniform_double_from_words(0, 0x40), 0x1p-53);  // the lowest bit used
  EXPECT_EQ(uniform_double_from_words(0x80000000, 0), 0.5);
  EXPECT_EQ(uniform_float_from_word(0), 0x1p-25f);
  EXPECT_EQ(uniform_float_from_word(0xffffffff), 1.0f - 0x1p-24f);
  EXPECT_EQ(uniform_float_from_word(0xff), 0x1p-25f);  // low 8 bits are dropped
}

// Sample moments with tolerances of 5 standard errors of the estimator.
struct Moments {
  double mean = 0, var = 0, m4 = 0;
};
template <class T>
Moments moments(const std::vector<T>& x) {
  Moments m;
  for (T v : x) m.mean += v;
  m.mean /= double(x.size());
  for (T v : x) {
    const double d = double(v) - m.mean;
    m.var += d * d;
    m.m4 += d * d * d * d;
  }
  m.var /= double(x.size());
  m.m4 /= double(x.size());
  return m;
}

TEST(Philox, UniformDoubleDistribution) {
  const std::size_t n = 1000000;
  std::vector<double> u(n);
  PhiloxStream(2024, 3).uniform(u.data(), n);
  EXPECT_GT(*std::min_element(u.begin(), u.end()), 0.0);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0);
  const Moments m = moments(u);
  EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));                   // sd 2.9e-4
  EXPECT_NEAR(m.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));  // sd 7.5e-5
  // Ten equal bins: chi-square with 9 degrees of freedom, P(chi2 > 33) ~ 1e-4.
  std::vector<double> bins(10, 0);
  for (double v : u) bins[std::min<std::size_t>(9, std::size_t(v * 10))] += 1;
  double chi2 = 0;
  for (double b : bins) chi2 += (b - n / 10.0) * (b - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 33.0);
}

TEST(Philox, UniformFloatDistribution) {
  const std::size_t n = 1000000;
  std::vector<float> u(n);
  PhiloxStream(2024, 4).uniform(u.data(), n);
  EXPECT_GT(*std::min_element(u.begin(), u.end()), 0.0f);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0f);
  const Moments m = moments(u);
  EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(m.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
}

TEST(Philox, NormalDistribution) {
  const std::size_t n = 1000000;
  std::vector<double> z(n);
  PhiloxStream(99, 0).normal(z.data(), n);
  const Moments m = moments(z);
  EXPECT_NEAR(m.mean, 0.0, 5 * std::sqrt(1.0 / n));     // sd 1e-3
  EXPECT_NEAR(m.var, 1.0, 5 * std::sqrt(2.0 / n));      // sd 1.4e-3
  EXPECT_NEAR(m.m4, 3.0, 5 * std::sqrt(96.0 / n));      // sd 9.8e-3
  const double within1 = double(std::count_if(z.begin(), z.end(), [](double v) { return std::abs(v) < 1; })) / n;
  EXPECT_NEAR(within1, std::erf(1 / std::sqrt(2.0)), 5 * std::sqrt(0.6827 * 0.3173 / n));
  // Consecutive elements (the cos and sin of one pair) are uncorrelated.
  double c = 0;
  for (std::size_t k = 0; k + 1 < n; k += 2) c += z[k] * z[k + 1];
  EXPECT_NEAR(c / (n / 2), 0.0, 5 * std::sqrt(2.0 / n));

  std::vector<float> f(n);
  PhiloxStream(99, 1).normal(f.data(), n);
  const Moments mf = moments(f);
  EXPECT_NEAR(mf.mean, 0.0, 5 * std::sqrt(1.0 / n));
  EXPECT_NEAR(mf.var, 1.0, 5 * std::sqrt(2.0 / n));
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Fills [offset, offset + n) in one call, then in two pieces cut at every a in `cuts`: the same bits.
template <class T, class Fill>
void expect_split_invariant(Fill fill, std::size_t n, std::uint64_t offset) {
  std::vector<T> whole(n);
  fill(whole.data(), n, offset);
  for (std::size_t a : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5}, n / 2,
                        n - 1, n}) {
    std::vector<T> parts(n);
    fill(parts.data(), a, offset);
    fill(parts.data() + a, n - a, offset + a);
    EXPECT_TRUE(bitwise_equal(whole, parts)) << "cut at " << a << ", offset " << offset;
  }
}

TEST(Philox, SplitInvariance) {
  const PhiloxStream s(7, 11);
  for (std::uint64_t offset : {0ULL, 1ULL, 2ULL, 3ULL, 1000001ULL}) {
    expect_split_invariant<double>([&](double* o, std::size_t n, std::uint64_t k) { s.uniform(o, n, k); }, 1001,
                                   offset);
    expect_split_invariant<float>([&](float* o, std::size_t n, std::uint64_t k) { s.uniform(o, n, k); }, 1001,
                                  offset);
    expect_split_invariant<double>([&](double* o, std::size_t n, std::uint64_t k) { s.normal(o, n, k); }, 1001,
                                   offset);
    expect_split_invariant<float>([&](float* o, std::size_t n, std::uint64_t k) { s.normal(o, n, k); }, 1001,
                                  offset);
  }
  // Fills agree with single elements.
  std::vector<double> u(9), z(9);
  s.uniform(u.data(), 9, 13);
  s.normal(z.data(), 9, 13);
  for (std::uint64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(u[i], s.uniform_at(13 + i));
    EXPECT_EQ(z[i], s.normal_at(13 + i));
  }
}

TEST(Philox, ThreadedFillEqualsSerial) {
  const PhiloxStream s(123456789, 5);
  // Several chunks and a ragged end, from an odd offset.
  const std::size_t n = 3 * PhiloxStream::kParallelChunk + 4321;
  const std::uint64_t offset = 77777;
  std::vector<double> su(n), sz(n);
  std::vector<float> sf(n), sg(n);
  s.uniform(su.data(), n, offset);
  s.normal(sz.data(), n, offset);
  s.uniform(sf.data(), n, offset);
  s.normal(sg.data(), n, offset);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<double> pu(n), pz(n);
    std::vector<float> pf(n), pg(n);
    s.parallel_uniform(pu.data(), n, offset);
    s.parallel_normal(pz.data(), n, offset);
    s.parallel_uniform(pf.data(), n, offset);
    s.parallel_normal(pg.data(), n, offset);
    EXPECT_TRUE(bitwise_equal(su, pu)) << threads << " threads";
    EXPECT_TRUE(bitwise_equal(sz, pz)) << threads << " threads";
    EXPECT_TRUE(bitwise_equal(sf, pf)) << threads << " threads";
    EXPECT_TRUE(bitwise_equal(sg, pg)) << threads << " threads";
  }
  omp_set_num_threads(saved);
  if (!dfmp2::linalg::random_fill_uses_openmp())
    std::printf("note: dfmp2_linalg is built without OpenMP; parallel fills ran on one thread\n");
}

// Independent of how the library is built: concurrent fills of disjoint pieces from std::threads.
TEST(Philox, ConcurrentPiecesEqualSerial) {
  const PhiloxStream s(31337, 2);
  const std::size_t n = 100003;
  std::vector<double> serial(n);
  s.normal(serial.data(), n, 5);
  for (std::size_t pieces : {2u, 3u, 7u}) {
    std::vector<double> out(n);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < pieces; ++t) {
      const std::size_t b = n * t / pieces, e = n * (t + 1) / pieces;
      threads.emplace_back([&, b, e] { s.normal(out.data() + b, e - b, 5 + b); });
    }
    for (auto& t : threads) t.join();
    EXPECT_TRUE(bitwise_equal(serial, out)) << pieces << " pieces";
  }
}

TEST(Philox, SeedsAndStreamsDiffer) {
  auto first = [](std::uint64_t seed, std::uint64_t stream) {
    std::vector<double> u(64);
    PhiloxStream(seed, stream).uniform(u.data(), u.size());
    return u;
  };
  const auto base = first(1, 0);
  EXPECT_EQ(base, first(1, 0));
  for (auto [seed, stream] : {std::pair<std::uint64_t, std::uint64_t>{2, 0}, {1, 1}, {1 + (1ULL << 32), 0},
                              {1, 1ULL << 32}, {0, 0}}) {
    const auto other = first(seed, stream);
    int same = 0;
    for (std::size_t i = 0; i < base.size(); ++i) same += base[i] == other[i];
    EXPECT_EQ(same, 0) << "seed " << seed << " stream " << stream;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Sobol

using dfmp2::linalg::SobolSequence;

std::vector<double> sobol_column(unsigned dims, unsigned dim, std::size_t count) {
  SobolSequence s(dims);
  std::vector<double> p(dims), col;
  for (std::size_t i = 0; i < count; ++i) {
    s.next(p.data());
    col.push_back(p[dim]);
  }
  return col;
}

TEST(Sobol, FirstPointsOfTheFirstDimensions) {
  // Dimension 1 (van der Corput in Gray-code order) and 2 (s = 1, a = 0, m = 1).
  EXPECT_EQ(sobol_column(3, 0, 8), (std::vector<double>{0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125}));
  EXPECT_EQ(sobol_column(3, 1, 8), (std::vector<double>{0, 0.5, 0.25, 0.75, 0.375, 0.875, 0.125, 0.625}));
  // Dimension 3 (s = 2, a = 1, m = 1, 3): V_1 = .1, V_2 = .11, m_3 = 2 m_2 ^ 4 m_1 ^ m_1 = 3 so V_3 = .011 (binary);
  // gray(n) for n = 1..7 is 1, 3, 2, 6, 7, 5, 4, giving .1, .01, .11, .101, .001, .111, .011.
  EXPECT_EQ(sobol_column(3, 2, 8), (std::vector<double>{0, 0.5, 0.25, 0.75, 0.625, 0.125, 0.875, 0.375}));
}

// The sample printed on the Joe-Kuo Sobol page (https://web.maths.unsw.edu.au/~fkuo/sobol/) as the output of
// `./sobol 10 3 new-joe-kuo-6.21201`; dyadic rationals, so the match is exact.
TEST(Sobol, JoeKuoPublishedSample) {
  const double want[10][3] = {{0, 0, 0},          {0.5, 0.5, 0.5},          {0.75, 0.25, 0.25},
                              {0.25, 0.75, 0.75}, {0.375, 0.375, 0.625},    {0.875, 0.875, 0.125},
                              {0.625, 0.125, 0.875}, {0.125, 0.625, 0.375}, {0.1875, 0.3125, 0.9375},
                              {0.6875, 0.8125, 0.4375}};
  const auto m = SobolSequence(3).points(0, 10);
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(m(i, j), want[i][j]) << "point " << i << " dim " << j;
}

TEST(Sobol, DirectionNumberTable) {
  using dfmp2::linalg::kSobolMaxDimension;
  unsigned prev_s = 1;
  for (unsigned d = 2; d <= kSobolMaxDimension; ++d) {
    const auto& p = dfmp2::linalg::sobol_polynomial(d);
    EXPECT_EQ(p.dimension, d);
    EXPECT_GE(p.s, prev_s);
    EXPECT_LT(p.a, 1u << (p.s - 1));
    prev_s = p.s;
    for (unsigned k = 1; k <= p.s; ++k) {
      EXPECT_EQ(p.m[k - 1] % 2, 1u) << "dimension " << d << " m_" << k;
      EXPECT_LT(p.m[k - 1], 1u << k) << "dimension " << d << " m_" << k;
    }
  }
  EXPECT_THROW(dfmp2::linalg::sobol_polynomial(1), std::out_of_range);
  EXPECT_THROW(dfmp2::linalg::sobol_polynomial(kSobolMaxDimension + 1), std::out_of_range);
  EXPECT_THROW(SobolSequence(kSobolMaxDimension + 1), std::out_of_range);
  EXPECT_THROW(SobolSequence(0), std::out_of_range);

  const auto v3 = dfmp2::linalg::sobol_direction_numbers(3);
  EXPECT_EQ(v3[0], 0x80000000u);
  EXPECT_EQ(v3[1], 0xC0000000u);
  EXPECT_EQ(v3[2], 0x60000000u);  // m_3 = 3
  // V_k = m_k 2^(32-k) with m_k odd: its lowest set bit is bit 32 - k.
  for (unsigned d = 1; d <= kSobolMaxDimension; ++d) {
    const auto v = dfmp2::linalg::sobol_direction_numbers(d);
    for (unsigned k = 1; k <= 32; ++k) EXPECT_EQ(std::countr_zero(v[k - 1]), int(32 - k)) << d << " " << k;
  }
}

// Each one-dimensional projection of a Sobol sequence is a (0, m, 1)-net: the first 2^m points put exactly one
// point in each interval [i 2^-m, (i+1) 2^-m).
TEST(Sobol, EveryDimensionIsStratified) {
  using dfmp2::linalg::kSobolMaxDimension;
  const unsigned mmax = 10;
  const auto pts = SobolSequence(kSobolMaxDimension).points(0, 1u << mmax);
  for (unsigned j = 0; j < kSobolMaxDimension; ++j) {
    for (unsigned m = 1; m <= mmax; ++m) {
      std::vector<int> hits(1u << m, 0);
      for (unsigned i = 0; i < (1u << m); ++i) ++hits[std::size_t(pts(i, j) * (1u << m))];
      EXPECT_EQ(*std::min_element(hits.begin(), hits.end()), 1) << "dimension " << j + 1 << ", m = " << m;
    }
  }
}

// Dimensions 1 and 2 form a (0, m, 2)-net: every elementary box 2^-a x 2^-b with a + b = m holds one point.
TEST(Sobol, FirstTwoDimensionsFormANet) {
  const unsigned m = 8;
  const auto pts = SobolSequence(2).points(0, 1u << m);
  for (unsigned a = 0; a <= m; ++a) {
    const unsigned b = m - a;
    std::set<std::pair<unsigned, unsigned>> boxes;
    for (unsigned i = 0; i < (1u << m); ++i)
      boxes.insert({unsigned(pts(i, 0) * (1u << a)), unsigned(pts(i, 1) * (1u << b))});
    EXPECT_EQ(boxes.size(), std::size_t{1} << m) << "a = " << a;
  }
}

TEST(Sobol, DirectPointEqualsSequential) {
  const unsigned d = dfmp2::linalg::kSobolMaxDimension;
  SobolSequence seq(d);
  std::vector<double> a(d), b(d);
  for (std::uint64_t n = 0; n < 5000; ++n) {
    ASSERT_EQ(seq.index(), n);
    seq.next(a.data());
    seq.point(n, b.data());
    ASSERT_EQ(a, b) << "point " << n;
  }
  // Skip-ahead: jump, then continue sequentially.
  for (std::uint64_t start : {1ULL, 1000ULL, 4095ULL, 123456789ULL, (1ULL << 32) - 3}) {
    SobolSequence s(d, start);
    for (std::uint64_t n = start; n < start + 3; ++n) {
      s.next(a.data());
      seq.point(n, b.data());
      EXPECT_EQ(a, b) << "point " << n;
    }
    s.skip_to(7);
    s.next(a.data());
    seq.point(7, b.data());
    EXPECT_EQ(a, b);
  }
  const auto block = seq.points(100, 50);
  for (int i = 0; i < 50; ++i) {
    seq.point(100 + i, b.data());
    for (unsigned j = 0; j < d; ++j) EXPECT_EQ(block(i, j), b[j]);
  }
}

TEST(Sobol, EndOfSequence) {
  SobolSequence s(2, (1ULL << 32) - 1);
  std::vector<double> p(2);
  s.next(p.data());
  EXPECT_LT(p[0], 1.0);
  EXPECT_THROW(s.next(p.data()), std::out_of_range);
  EXPECT_THROW(s.point(1ULL << 32, p.data()), std::out_of_range);
}

// ---------------------------------------------------------------------------------------------------------------
// Halton

TEST(Halton, RadicalInverseAndFirstPoints) {
  using dfmp2::linalg::radical_inverse;
  EXPECT_EQ(radical_inverse(1, 2), 0.5);
  EXPECT_EQ(radical_inverse(2, 2), 0.25);
  EXPECT_EQ(radical_inverse(3, 2), 0.75);
  EXPECT_EQ(radical_inverse(4, 2), 0.125);
  EXPECT_EQ(radical_inverse(1, 3), 1.0 / 3);
  EXPECT_EQ(radical_inverse(2, 3), 2.0 / 3);
  EXPECT_EQ(radical_inverse(3, 3), 1.0 / 9);
  EXPECT_EQ(radical_inverse(4, 3), 4.0 / 9);
  EXPECT_EQ(radical_inverse(5, 3), 7.0 / 9);
  EXPECT_EQ(radical_inverse(0, 5), 0.0);
  EXPECT_EQ(radical_inverse(6, 5), 6.0 / 25);  // 6 = 11 (base 5) -> 0.11 = 1/5 + 1/25
  // Long numbers take the floating tail; still in [0, 1) and close to the long-double sum.
  const std::uint64_t big = (1ULL << 62) + 12345;
  long double ref = 0, f = 1.0L / 3;
  for (std::uint64_t n = big; n > 0; n /= 3, f /= 3) ref += (n % 3) * f;
  EXPECT_NEAR(radical_inverse(big, 3), double(ref), 1e-15);
  EXPECT_THROW(radical_inverse(5, 1), std::invalid_argument);

  EXPECT_EQ(dfmp2::linalg::first_primes(10), (std::vector<unsigned>{2, 3, 5, 7, 11, 13, 17, 19, 23, 29}));

  dfmp2::linalg::HaltonSequence h(3);
  EXPECT_EQ(h.bases(), (std::vector<unsigned>{2, 3, 5}));
  const double want[3][3] = {{0.5, 1.0 / 3, 0.2}, {0.25, 2.0 / 3, 0.4}, {0.75, 1.0 / 9, 0.6}};
  std::vector<double> p(3);
  for (const auto& w : want) {
    h.next(p.data());
    for (int j = 0; j < 3; ++j) EXPECT_EQ(p[j], w[j]);
  }
  EXPECT_EQ(h.index(), 4u);
  const auto m = h.points(1, 3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(m(i, j), want[i][j]);
}

// ---------------------------------------------------------------------------------------------------------------
// Latin hypercube

TEST(LatinHypercube, OnePointPerStratumAndDeterministic) {
  using dfmp2::linalg::latin_hypercube;
  for (std::size_t n : {1u, 2u, 3u, 10u, 97u, 1000u}) {
    const unsigned d = 6;
    const auto x = latin_hypercube(n, d, 2718);
    ASSERT_EQ(x.rows(), static_cast<dfmp2::linalg::Index>(n));
    ASSERT_EQ(x.cols(), d);
    for (unsigned j = 0; j < d; ++j) {
      std::vector<int> hits(n, 0);
      for (std::size_t i = 0; i < n; ++i) {
        const double v = x(i, j);
        ASSERT_GE(v, 0.0);
        ASSERT_LT(v, 1.0);
        ++hits[std::size_t(std::floor(v * double(n)))];
      }
      EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << "n " << n << " dim " << j;
    }
    EXPECT_TRUE(x == latin_hypercube(n, d, 2718));  // bitwise: same seed, same points
    if (n > 3) {
      EXPECT_FALSE(x == latin_hypercube(n, d, 2719));
    }
  }
  // Dimensions get different permutations.
  const auto x = latin_hypercube(50, 2, 1);
  EXPECT_FALSE(((x.col(0) * 50).array().floor() == (x.col(1) * 50).array().floor()).all());
  // Centered: every point at the middle of its stratum.
  const auto c = latin_hypercube(40, 3, 5, true);
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(c(i, j) * 40 - std::floor(c(i, j) * 40), 0.5, 1e-12);
  EXPECT_EQ(latin_hypercube(0, 3, 1).rows(), 0);
}

}  // namespace
