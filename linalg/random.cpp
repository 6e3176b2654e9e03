#include "linalg/random.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

// The parallel fills use OpenMP when this file is compiled with it; otherwise they are the serial fills.
#ifdef _OPENMP
#define DFMP2_RANDOM_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#else
#define DFMP2_RANDOM_PARALLEL_FOR
#endif

namespace dfmp2::linalg {

namespace {

// One Philox4x32 round as Salmon et al. (2011) describe it: two 32x32 -> 64-bit products of the even words with
// the multipliers; the high halves are XORed with the odd words and the round key, and the words are permuted.
inline PhiloxCounter philox_round(const PhiloxCounter& x, const PhiloxKey& k) {
  const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * x[0];
  const std::uint64_t p1 = std::uint64_t{kPhiloxM1} * x[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  return {hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0};
}

constexpr double kTwoPi = 2.0 * std::numbers::pi;

inline std::array<double, 2> box_muller(const PhiloxCounter& w) {
  const double u1 = uniform_double_from_words(w[0], w[1]);
  const double u2 = uniform_double_from_words(w[2], w[3]);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = kTwoPi * u2;
  return {r * std::cos(t), r * std::sin(t)};
}

// Philox4x32-10 on the counters {c + b, stream} for b = 0 .. B-1, as B interleaved, independent chains
// (structure of arrays, so the compiler can overlap or vectorise the multiplications); equal to B calls of
// philox4x32_10.
template <unsigned B>
void philox_batch(std::uint64_t c, std::uint64_t stream, PhiloxKey key, PhiloxCounter* out) {
  std::uint32_t x0[B], x1[B], x2[B], x3[B];
  for (unsigned b = 0; b < B; ++b) {
    x0[b] = static_cast<std::uint32_t>(c + b);
    x1[b] = static_cast<std::uint32_t>((c + b) >> 32);
    x2[b] = static_cast<std::uint32_t>(stream);
    x3[b] = static_cast<std::uint32_t>(stream >> 32);
  }
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    for (unsigned b = 0; b < B; ++b) {
      const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * x0[b];
      const std::uint64_t p1 = std::uint64_t{kPhiloxM1} * x2[b];
      x0[b] = static_cast<std::uint32_t>(p1 >> 32) ^ x1[b] ^ key[0];
      x1[b] = static_cast<std::uint32_t>(p1);
      x2[b] = static_cast<std::uint32_t>(p0 >> 32) ^ x3[b] ^ key[1];
      x3[b] = static_cast<std::uint32_t>(p0);
    }
  }
  for (unsigned b = 0; b < B; ++b) out[b] = {x0[b], x1[b], x2[b], x3[b]};
}

// Writes elements offset .. offset+n-1 of a stream with `P` elements per Philox block; `values(w)` turns one
// block's words into its P elements. Each block is computed once however the range cuts it: a partial block at
// each end, whole blocks in batches between.
template <unsigned P, class T, class Values>
void fill_blocks(const PhiloxStream& s, T* out, std::size_t n, std::uint64_t offset, Values values) {
  const std::uint64_t end = offset + n;
  auto partial = [&](std::uint64_t from, std::uint64_t to) {  // elements [from, to) of one block
    const std::uint64_t c = from / P;
    const auto v = values(s.block(c));
    for (std::uint64_t e = from; e < to; ++e) out[e - offset] = static_cast<T>(v[e - c * P]);
  };
  std::uint64_t k = offset;
  if (k % P != 0) {
    const std::uint64_t stop = std::min<std::uint64_t>(end, (k / P + 1) * P);
    partial(k, stop);
    k = stop;
  }
  constexpr unsigned kBatch = 2;  // measured: wider batches spill registers and are slower on x86-64
  std::uint64_t c = k / P;
  const std::uint64_t c_end = end / P;  // blocks c .. c_end-1 lie wholly in the range
  PhiloxCounter w[kBatch];
  for (; c + kBatch <= c_end; c += kBatch) {
    philox_batch<kBatch>(c, s.stream(), s.key(), w);
    T* o = out + (c * P - offset);
    for (unsigned b = 0; b < kBatch; ++b) {
      const auto v = values(w[b]);
      for (unsigned j = 0; j < P; ++j) o[b * P + j] = static_cast<T>(v[j]);
    }
  }
  for (; c < c_end; ++c) partial(c * P, c * P + P);
  k = std::max(k, c * P);
  if (k < end) partial(k, end);
}

template <class T, class Fill>
void parallel_fill(T* out, std::size_t n, std::uint64_t offset, Fill fill) {
  constexpr std::size_t chunk = PhiloxStream::kParallelChunk;
  const auto chunks = static_cast<std::ptrdiff_t>((n + chunk - 1) / chunk);
  DFMP2_RANDOM_PARALLEL_FOR
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    fill(out + begin, std::min(chunk, n - begin), offset + begin);
  }
}

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

double uniform_double_from_words(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t x = (std::uint64_t{hi >> 5} << 26) | (lo >> 6);  // 27 + 26 = 53 bits
  return x == 0 ? 0x1p-54 : static_cast<double>(x) * 0x1p-53;           // exact: x < 2^53
}

float uniform_float_from_word(std::uint32_t w) {
  const std::uint32_t x = w >> 8;  // 24 bits
  return x == 0 ? 0x1p-25f : static_cast<float>(x) * 0x1p-24f;  // exact: x < 2^24
}

bool random_fill_uses_openmp() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

PhiloxStream::PhiloxStream(std::uint64_t seed, std::uint64_t stream)
    : seed_(seed), stream_(stream), key_{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)} {}

PhiloxCounter PhiloxStream::block(std::uint64_t c) const {
  return philox4x32_10({static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32),
                        static_cast<std::uint32_t>(stream_), static_cast<std::uint32_t>(stream_ >> 32)},
                       key_);
}

double PhiloxStream::uniform_at(std::uint64_t k) const {
  const PhiloxCounter w = block(k / 2);
  return k % 2 == 0 ? uniform_double_from_words(w[0], w[1]) : uniform_double_from_words(w[2], w[3]);
}

float PhiloxStream::uniform_float_at(std::uint64_t k) const { return uniform_float_from_word(block(k / 4)[k % 4]); }

double PhiloxStream::normal_at(std::uint64_t k) const { return box_muller(block(k / 2))[k % 2]; }

float PhiloxStream::normal_float_at(std::uint64_t k) const { return static_cast<float>(normal_at(k)); }

void PhiloxStream::uniform(double* out, std::size_t n, std::uint64_t offset) const {
  fill_blocks<2>(*this, out, n, offset, [](const PhiloxCounter& w) {
    return std::array<double, 2>{uniform_double_from_words(w[0], w[1]), uniform_double_from_words(w[2], w[3])};
  });
}

void PhiloxStream::uniform(float* out, std::size_t n, std::uint64_t offset) const {
  fill_blocks<4>(*this, out, n, offset, [](const PhiloxCounter& w) {
    return std::array<float, 4>{uniform_float_from_word(w[0]), uniform_float_from_word(w[1]),
                                uniform_float_from_word(w[2]), uniform_float_from_word(w[3])};
  });
}

void PhiloxStream::normal(double* out, std::size_t n, std::uint64_t offset) const {
  fill_blocks<2>(*this, out, n, offset, box_muller);
}

void PhiloxStream::normal(float* out, std::size_t n, std::uint64_t offset) const {
  fill_blocks<2>(*this, out, n, offset, box_muller);  // each double rounded to float once
}

void PhiloxStream::parallel_uniform(double* out, std::size_t n, std::uint64_t offset) const {
  parallel_fill(out, n, offset, [this](double* o, std::size_t m, std::uint64_t k) { uniform(o, m, k); });
}

void PhiloxStream::parallel_uniform(float* out, std::size_t n, std::uint64_t offset) const {
  parallel_fill(out, n, offset, [this](float* o, std::size_t m, std::uint64_t k) { uniform(o, m, k); });
}

void PhiloxStream::parallel_normal(double* out, std::size_t n, std::uint64_t offset) const {
  parallel_fill(out, n, offset, [this](double* o, std::size_t m, std::uint64_t k) { normal(o, m, k); });
}

void PhiloxStream::parallel_normal(float* out, std::size_t n, std::uint64_t offset) const {
  parallel_fill(out, n, offset, [this](float* o, std::size_t m, std::uint64_t k) { normal(o, m, k); });
}

}  // namespace dfmp2::linalg
