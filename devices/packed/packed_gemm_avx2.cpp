// dfmp2's packed kernels with AVX2 and FMA (compiled with -mavx2 -mfma whatever the build's target; run only where
// the CPU has them, devices::avx2_available()): the same layering as the AVX-512 ones with 4-double (8-float)
// vectors, so a 12 x 4 fp64 (24 x 4 fp32) tile in 12 of the 16 ymm registers.
#include <immintrin.h>

#define DFMP2_PACKED_ISA avx2

namespace dfmp2::devices::avx2 {
namespace {

template <class T>
struct Simd;
template <>
struct Simd<double> {
  using V = __m256d;
  static constexpr int width = 4;
  static V load(const double* p) { return _mm256_load_pd(p); }
  static V loadu(const double* p) { return _mm256_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V set1(double x) { return _mm256_set1_pd(x); }
  static V zero() { return _mm256_setzero_pd(); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
};
template <>
struct Simd<float> {
  using V = __m256;
  static constexpr int width = 8;
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V zero() { return _mm256_setzero_ps(); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
};

// The micro-kernel's columns: its accumulators are 3 x 4 of the 16 ymm registers, beside 3 for the A sliver and one
// for the broadcast B value.
constexpr int kNr = 4;

}  // namespace
}  // namespace dfmp2::devices::avx2

#include "devices/packed/packed_gemm_impl.hpp"
