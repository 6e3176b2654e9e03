#pragma once
// Quasi-random (low-discrepancy) point sets on [0,1)^d and Latin hypercube samples.
//
//  - Sobol sequence, 32-bit, with the direction numbers of S. Joe and F. Y. Kuo, "Constructing Sobol sequences
//    with better two-dimensional projections", SIAM J. Sci. Comput. 30, 2635-2654 (2008), file
//    new-joe-kuo-6.21201 (embedded for the first kSobolMaxDimension dimensions). Points are generated in Gray-code
//    order (Antonov and Saleev), so point n is the XOR of the direction numbers V_j over the set bits j of
//    gray(n) = n ^ (n >> 1), scaled by 2^-32.
//    Point index 0 is the origin (all zeros) and is NOT skipped: SobolSequence starts at index 0 unless it is
//    given another first index. Callers who want to avoid the origin start at 1.
//  - Halton sequence: point n (n >= 1 by default) has the radical inverse of n in the j-th prime in dimension j.
//  - Latin hypercube samples, with permutations and jitter from Philox streams.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "linalg/matrix_view.hpp"

namespace dfmp2::linalg {

// Dimensions with embedded Joe-Kuo direction numbers (dimension 1 is van der Corput; 2.. are from the table).
inline constexpr unsigned kSobolMaxDimension = 40;
// Points per dimension of the 32-bit sequence: indices 0 .. 2^32 - 1.
inline constexpr std::uint64_t kSobolMaxPoints = std::uint64_t{1} << 32;

// One row of new-joe-kuo-6.21201: degree s of the primitive polynomial, its inner coefficients a (bits
// a_1 .. a_{s-1}, a_1 most significant) and the initial direction numbers m_1 .. m_s (m_k odd, < 2^k).
struct SobolPolynomial {
  unsigned dimension;  // 1-based, as in the file
  unsigned s;
  unsigned a;
  unsigned m[8];  // m_1 .. m_s; unused entries 0
};

// The embedded table row for 1-based `dimension` in [2, kSobolMaxDimension]; throws std::out_of_range otherwise.
const SobolPolynomial& sobol_polynomial(unsigned dimension);

// The 32 direction numbers V_1 .. V_32 of 1-based `dimension` as 32-bit fractions (V_k = v_k 2^32).
std::vector<std::uint32_t> sobol_direction_numbers(unsigned dimension);

class SobolSequence {
 public:
  // `dimensions` in [1, kSobolMaxDimension]; the first call of next() returns point `first_index`.
  explicit SobolSequence(unsigned dimensions, std::uint64_t first_index = 0);

  unsigned dimensions() const { return dims_; }
  // Index of the point the next call of next() returns.
  std::uint64_t index() const { return index_; }

  // Writes point index() to out[0 .. dimensions-1] and advances by one (one XOR per dimension).
  void next(double* out);
  // The same as 32-bit integers (coordinate * 2^32).
  void next_integer(std::uint32_t* out);
  // Jumps to point `index` (no work proportional to the distance).
  void skip_to(std::uint64_t index);

  // Point `index` directly, independent of the sequence's position.
  void point(std::uint64_t index, double* out) const;
  void point_integer(std::uint64_t index, std::uint32_t* out) const;

  // Points first .. first+count-1 as a count x dimensions matrix (one point per row).
  Matrix points(std::uint64_t first, std::uint64_t count) const;

 private:
  unsigned dims_;
  std::vector<std::uint32_t> v_;  // V_{k+1} of dimension j at v_[32*j + k]
  std::vector<std::uint32_t> x_;  // integer coordinates of point index_
  std::uint64_t index_ = 0;
};

// The first `count` primes (2, 3, 5, ...).
std::vector<unsigned> first_primes(unsigned count);

// The radical inverse of n in base b >= 2: digits of n mirrored about the radix point (correctly rounded while
// b^digits < 2^53).
double radical_inverse(std::uint64_t n, unsigned base);

class HaltonSequence {
 public:
  // Dimension j (0-based) uses the (j+1)-th prime. The first call of next() returns point `first_index`; the
  // conventional Halton sequence starts at 1 (point 0 is the origin).
  explicit HaltonSequence(unsigned dimensions, std::uint64_t first_index = 1);

  unsigned dimensions() const { return static_cast<unsigned>(bases_.size()); }
  const std::vector<unsigned>& bases() const { return bases_; }
  std::uint64_t index() const { return index_; }

  void next(double* out) { point(index_++, out); }
  void skip_to(std::uint64_t index) { index_ = index; }
  void point(std::uint64_t index, double* out) const;
  Matrix points(std::uint64_t first, std::uint64_t count) const;

 private:
  std::vector<unsigned> bases_;
  std::uint64_t index_;
};

// n Latin hypercube points in [0,1)^d, a pure function of (n, d, seed): an n x d matrix whose column j is
// (pi_j(i) + u_ij) / n for a random permutation pi_j of 0..n-1 and jitter u_ij in (0,1), so each dimension has
// exactly one point in each stratum [s/n, (s+1)/n). Dimension j uses Philox streams 2j (permutation, by
// Fisher-Yates) and 2j+1 (jitter) of `seed`. With `centered`, u_ij = 1/2.
Matrix latin_hypercube(std::size_t n, unsigned d, std::uint64_t seed, bool centered = false);

}  // namespace dfmp2::linalg
