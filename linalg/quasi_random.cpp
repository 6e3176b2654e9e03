#include "linalg/quasi_random.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "linalg/random.hpp"

namespace dfmp2::linalg {

namespace {

// Rows d = 2 .. 40 of new-joe-kuo-6.21201 (columns d, s, a, m_1 .. m_s), the direction numbers of S. Joe and
// F. Y. Kuo, SIAM J. Sci. Comput. 30, 2635-2654 (2008), published at https://web.maths.unsw.edu.au/~fkuo/sobol/.
// Recorded as data; the rows were checked against several independent transcriptions of the file.
constexpr SobolPolynomial kJoeKuo[] = {
    {2, 1, 0, {1}},
    {3, 2, 1, {1, 3}},
    {4, 3, 1, {1, 3, 1}},
    {5, 3, 2, {1, 1, 1}},
    {6, 4, 1, {1, 1, 3, 3}},
    {7, 4, 4, {1, 3, 5, 13}},
    {8, 5, 2, {1, 1, 5, 5, 17}},
    {9, 5, 4, {1, 1, 5, 5, 5}},
    {10, 5, 7, {1, 1, 7, 11, 19}},
    {11, 5, 11, {1, 1, 5, 1, 1}},
    {12, 5, 13, {1, 1, 1, 3, 11}},
    {13, 5, 14, {1, 3, 5, 5, 31}},
    {14, 6, 1, {1, 3, 3, 9, 7, 49}},
    {15, 6, 13, {1, 1, 1, 15, 21, 21}},
    {16, 6, 16, {1, 3, 1, 13, 27, 49}},
    {17, 6, 19, {1, 1, 1, 15, 7, 5}},
    {18, 6, 22, {1, 3, 1, 15, 13, 25}},
    {19, 6, 25, {1, 1, 5, 5, 19, 61}},
    {20, 7, 1, {1, 3, 7, 11, 23, 15, 103}},
    {21, 7, 4, {1, 3, 7, 13, 13, 15, 69}},
    {22, 7, 7, {1, 1, 3, 13, 7, 35, 63}},
    {23, 7, 8, {1, 3, 5, 9, 1, 25, 53}},
    {24, 7, 14, {1, 3, 1, 13, 9, 35, 107}},
    {25, 7, 19, {1, 3, 1, 5, 27, 61, 31}},
    {26, 7, 21, {1, 1, 5, 11, 19, 41, 61}},
    {27, 7, 28, {1, 3, 5, 3, 3, 13, 69}},
    {28, 7, 31, {1, 1, 7, 13, 1, 19, 1}},
    {29, 7, 32, {1, 3, 7, 5, 13, 19, 59}},
    {30, 7, 37, {1, 1, 3, 9, 25, 29, 41}},
    {31, 7, 41, {1, 3, 5, 13, 23, 1, 55}},
    {32, 7, 42, {1, 3, 7, 3, 13, 59, 17}},
    {33, 7, 50, {1, 3, 1, 3, 5, 53, 69}},
    {34, 7, 55, {1, 1, 5, 5, 23, 33, 13}},
    {35, 7, 56, {1, 1, 7, 7, 1, 61, 123}},
    {36, 7, 59, {1, 1, 7, 9, 13, 61, 49}},
    {37, 7, 62, {1, 3, 3, 5, 3, 55, 33}},
    {38, 8, 14, {1, 3, 1, 15, 31, 13, 49, 245}},
    {39, 8, 21, {1, 3, 5, 15, 31, 59, 63, 97}},
    {40, 8, 22, {1, 3, 1, 11, 11, 11, 77, 249}},
};
static_assert(std::size(kJoeKuo) == kSobolMaxDimension - 1);

constexpr unsigned kBits = 32;
constexpr double kTwoToMinus32 = 0x1p-32;

}  // namespace

const SobolPolynomial& sobol_polynomial(unsigned dimension) {
  if (dimension < 2 || dimension > kSobolMaxDimension)
    throw std::out_of_range("Sobol dimension " + std::to_string(dimension) + " has no table row (2.." +
                            std::to_string(kSobolMaxDimension) + ")");
  return kJoeKuo[dimension - 2];
}

std::vector<std::uint32_t> sobol_direction_numbers(unsigned dimension) {
  if (dimension < 1 || dimension > kSobolMaxDimension)
    throw std::out_of_range("Sobol dimension " + std::to_string(dimension) + " outside 1.." +
                            std::to_string(kSobolMaxDimension));
  std::vector<std::uint32_t> v(kBits);  // v[k-1] = V_k
  if (dimension == 1) {
    for (unsigned k = 1; k <= kBits; ++k) v[k - 1] = std::uint32_t{1} << (kBits - k);  // all m_k = 1
    return v;
  }
  const SobolPolynomial& p = sobol_polynomial(dimension);
  for (unsigned k = 1; k <= p.s; ++k) v[k - 1] = p.m[k - 1] << (kBits - k);
  // Sobol's recurrence m_k = 2 a_1 m_{k-1} ^ 4 a_2 m_{k-2} ^ ... ^ 2^{s-1} a_{s-1} m_{k-s+1} ^ 2^s m_{k-s} ^ m_{k-s},
  // written for V_k = m_k 2^{32-k}: V_k = a_1 V_{k-1} ^ ... ^ a_{s-1} V_{k-s+1} ^ V_{k-s} ^ (V_{k-s} >> s).
  for (unsigned k = p.s + 1; k <= kBits; ++k) {
    std::uint32_t x = v[k - p.s - 1] ^ (v[k - p.s - 1] >> p.s);
    for (unsigned i = 1; i < p.s; ++i)
      if ((p.a >> (p.s - 1 - i)) & 1u) x ^= v[k - i - 1];
    v[k - 1] = x;
  }
  return v;
}

SobolSequence::SobolSequence(unsigned dimensions, std::uint64_t first_index) : dims_(dimensions) {
  if (dimensions < 1 || dimensions > kSobolMaxDimension)
    throw std::out_of_range("Sobol sequence of " + std::to_string(dimensions) + " dimensions (1.." +
                            std::to_string(kSobolMaxDimension) + " are available)");
  v_.reserve(std::size_t{kBits} * dims_);
  for (unsigned j = 1; j <= dims_; ++j) {
    const auto vj = sobol_direction_numbers(j);
    v_.insert(v_.end(), vj.begin(), vj.end());
  }
  x_.assign(dims_, 0);
  skip_to(first_index);
}

void SobolSequence::point_integer(std::uint64_t index, std::uint32_t* out) const {
  if (index >= kSobolMaxPoints)
    throw std::out_of_range("Sobol point " + std::to_string(index) + " beyond the 2^32 points of the sequence");
  const auto gray = static_cast<std::uint32_t>(index ^ (index >> 1));
  for (unsigned j = 0; j < dims_; ++j) {
    std::uint32_t x = 0;
    for (std::uint32_t g = gray; g != 0; g &= g - 1) x ^= v_[std::size_t{kBits} * j + std::countr_zero(g)];
    out[j] = x;
  }
}

void SobolSequence::point(std::uint64_t index, double* out) const {
  std::vector<std::uint32_t> x(dims_);
  point_integer(index, x.data());
  for (unsigned j = 0; j < dims_; ++j) out[j] = x[j] * kTwoToMinus32;
}

void SobolSequence::skip_to(std::uint64_t index) {
  if (index > kSobolMaxPoints)
    throw std::out_of_range("Sobol point " + std::to_string(index) + " beyond the 2^32 points of the sequence");
  index_ = index;
  if (index < kSobolMaxPoints) point_integer(index, x_.data());
}

void SobolSequence::next_integer(std::uint32_t* out) {
  if (index_ >= kSobolMaxPoints) throw std::out_of_range("Sobol sequence exhausted (2^32 points)");
  std::copy(x_.begin(), x_.end(), out);
  ++index_;
  if (index_ == kSobolMaxPoints) return;
  // gray(n) and gray(n-1) differ in the bit of the lowest set bit of n: one XOR per dimension.
  const unsigned c = static_cast<unsigned>(std::countr_zero(index_));
  for (unsigned j = 0; j < dims_; ++j) x_[j] ^= v_[std::size_t{kBits} * j + c];
}

void SobolSequence::next(double* out) {
  std::vector<std::uint32_t> x(dims_);
  next_integer(x.data());
  for (unsigned j = 0; j < dims_; ++j) out[j] = x[j] * kTwoToMinus32;
}

Matrix SobolSequence::points(std::uint64_t first, std::uint64_t count) const {
  Matrix m(static_cast<Index>(count), dims_);
  if (count == 0) return m;
  SobolSequence s(*this);
  s.skip_to(first);
  std::vector<double> p(dims_);
  for (std::uint64_t i = 0; i < count; ++i) {
    s.next(p.data());
    for (unsigned j = 0; j < dims_; ++j) m(static_cast<Index>(i), j) = p[j];
  }
  return m;
}

std::vector<unsigned> first_primes(unsigned count) {
  std::vector<unsigned> primes;
  primes.reserve(count);
  for (unsigned c = 2; primes.size() < count; ++c) {
    bool prime = true;
    for (unsigned p : primes) {
      if (p * p > c) break;
      if (c % p == 0) {
        prime = false;
        break;
      }
    }
    if (prime) primes.push_back(c);
  }
  return primes;
}

double radical_inverse(std::uint64_t n, unsigned base) {
  if (base < 2) throw std::invalid_argument("radical inverse needs a base >= 2");
  // Mirror the digits into an integer numerator over base^digits, exactly while base^digits < 2^53; a longer
  // tail is the radical inverse of the remaining high digits, one base^digits further right.
  constexpr std::uint64_t kExact = std::uint64_t{1} << 53;
  std::uint64_t num = 0, den = 1;
  while (n > 0 && den <= kExact / base) {
    num = num * base + n % base;
    den *= base;
    n /= base;
  }
  if (n == 0) return static_cast<double>(num) / static_cast<double>(den);
  return (static_cast<double>(num) + radical_inverse(n, base)) / static_cast<double>(den);
}

HaltonSequence::HaltonSequence(unsigned dimensions, std::uint64_t first_index)
    : bases_(first_primes(dimensions)), index_(first_index) {
  if (dimensions < 1) throw std::out_of_range("Halton sequence needs at least one dimension");
}

void HaltonSequence::point(std::uint64_t index, double* out) const {
  for (std::size_t j = 0; j < bases_.size(); ++j) out[j] = radical_inverse(index, bases_[j]);
}

Matrix HaltonSequence::points(std::uint64_t first, std::uint64_t count) const {
  Matrix m(static_cast<Index>(count), static_cast<Index>(bases_.size()));
  for (std::uint64_t i = 0; i < count; ++i)
    for (std::size_t j = 0; j < bases_.size(); ++j)
      m(static_cast<Index>(i), static_cast<Index>(j)) = radical_inverse(first + i, bases_[j]);
  return m;
}

Matrix latin_hypercube(std::size_t n, unsigned d, std::uint64_t seed, bool centered) {
  Matrix x(static_cast<Index>(n), d);
  if (n == 0) return x;
  const double dn = static_cast<double>(n);
  std::vector<std::size_t> perm(n);
  std::vector<double> u(n);
  for (unsigned j = 0; j < d; ++j) {
    // Fisher-Yates: step t (t = 0 .. n-2) swaps position i = n-1-t with r = floor(u_t (i+1)), u_t element t of
    // stream 2j. (Scaling a 53-bit uniform biases r by at most n 2^-53, far below anything a test can see.)
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    const PhiloxStream perm_stream(seed, 2 * std::uint64_t{j});
    perm_stream.uniform(u.data(), n - 1, 0);
    for (std::size_t t = 0; t + 1 < n; ++t) {
      const std::size_t i = n - 1 - t;
      const auto r = std::min(i, static_cast<std::size_t>(u[t] * static_cast<double>(i + 1)));
      std::swap(perm[i], perm[r]);
    }
    if (centered) {
      std::fill(u.begin(), u.end(), 0.5);
    } else {
      PhiloxStream(seed, 2 * std::uint64_t{j} + 1).uniform(u.data(), n, 0);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const double s = static_cast<double>(perm[i]);
      double v = (s + u[i]) / dn;
      // Rounding can carry (s + u) / n onto a stratum boundary; step back inside so floor(v n) == s exactly.
      while (std::floor(v * dn) > s) v = std::nextafter(v, 0.0);
      while (std::floor(v * dn) < s) v = std::nextafter(v, 1.0);
      x(static_cast<Index>(i), j) = v;
    }
  }
  return x;
}

}  // namespace dfmp2::linalg
