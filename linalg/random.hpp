#pragma once
// Counter-based random numbers: Philox4x32-10 (J. K. Salmon, M. A. Moraes, R. O. Dror and D. E. Shaw, "Parallel
// random numbers: as easy as 1, 2, 3", SC11, 2011; the Random123 library).
//
// A counter-based generator has no state to advance: a block of four 32-bit words is a pure function of a
// 128-bit counter and a 64-bit key. PhiloxStream builds streams of doubles and floats on it in which element k is
// a pure function of (seed, stream, k), so a stream can be cut at any point, filled in any order and by any
// number of threads, and always holds the same numbers ("skip-ahead" is just choosing the counter).
//
// Layout (the definition of the streams; changing it changes every number):
//   key     = { low 32 bits of seed, high 32 bits of seed }
//   counter = { low 32 bits of c, high 32 bits of c, low 32 bits of stream, high 32 bits of stream }, where c is
//             the 64-bit block index below; the four output words are w0..w3.
//   uniform double k : c = k / 2, words (w0, w1) for k even and (w2, w3) for k odd.
//                      x = (hi >> 5) * 2^26 + (lo >> 6) is 53 random bits (hi = w0 or w2, lo = w1 or w3);
//                      u = x * 2^-53, except x = 0 gives 2^-54, so 0 < u <= 1 - 2^-53 < 1.
//   uniform float k  : c = k / 4, word w_(k % 4); x = w >> 8 is 24 random bits; u = x * 2^-24, x = 0 gives 2^-25.
//   normal double k  : c = k / 2; u1 from (w0, w1), u2 from (w2, w3) as for uniform doubles; Box-Muller
//                      r = sqrt(-2 ln u1), z = r cos(2 pi u2) for k even and r sin(2 pi u2) for k odd.
//   normal float k   : the normal double k rounded to float.
// So one Philox call gives 2 uniform doubles, 4 uniform floats, or the pair of normals (2k', 2k'+1).
#include <array>
#include <cstddef>
#include <cstdint>

namespace dfmp2::linalg {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

// The Philox4x32 round multipliers and Weyl key increments of Salmon et al. (2011).
inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

// Ten rounds of Philox4x32 on `counter` with `key`.
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// One stream of random numbers: a seed (the Philox key) and a stream id (the high half of the counter). Cheap to
// copy; all members are const and thread-safe. `offset` is the index of the first element written.
class PhiloxStream {
 public:
  explicit PhiloxStream(std::uint64_t seed, std::uint64_t stream = 0);

  std::uint64_t seed() const { return seed_; }
  std::uint64_t stream() const { return stream_; }
  PhiloxKey key() const { return key_; }

  // The four words of block index c (see the layout above).
  PhiloxCounter block(std::uint64_t c) const;

  // Element k, one at a time (for tests and scattered access; the fills are faster).
  double uniform_at(std::uint64_t k) const;
  float uniform_float_at(std::uint64_t k) const;
  double normal_at(std::uint64_t k) const;
  float normal_float_at(std::uint64_t k) const;

  // Elements offset .. offset+n-1, in order, on the calling thread.
  void uniform(double* out, std::size_t n, std::uint64_t offset = 0) const;
  void uniform(float* out, std::size_t n, std::uint64_t offset = 0) const;
  void normal(double* out, std::size_t n, std::uint64_t offset = 0) const;
  void normal(float* out, std::size_t n, std::uint64_t offset = 0) const;

  // The same elements, written by OpenMP threads: the range is cut into chunks of kParallelChunk elements and
  // each chunk is one call of the serial fill above with its own offset, so the result is the serial fill's
  // whatever the thread count. Runs serially when the library is built without OpenMP (see
  // random_fill_uses_openmp()).
  static constexpr std::size_t kParallelChunk = 1 << 14;
  void parallel_uniform(double* out, std::size_t n, std::uint64_t offset = 0) const;
  void parallel_uniform(float* out, std::size_t n, std::uint64_t offset = 0) const;
  void parallel_normal(double* out, std::size_t n, std::uint64_t offset = 0) const;
  void parallel_normal(float* out, std::size_t n, std::uint64_t offset = 0) const;

 private:
  std::uint64_t seed_, stream_;
  PhiloxKey key_;
};

// Whether the parallel fills were compiled with OpenMP (false: they run on the calling thread).
bool random_fill_uses_openmp();

// The uniform mappings of the layout above, exposed for tests: 53 bits from two words, 24 bits from one.
double uniform_double_from_words(std::uint32_t hi, std::uint32_t lo);
float uniform_float_from_word(std::uint32_t w);

}  // namespace dfmp2::linalg
