// dfmp2's packed kernels with AVX-512F and FMA (compiled with -mavx512f -mfma whatever the build's target; run only
// where the CPU has them, devices::avx512_available()).
#include <immintrin.h>

#define DFMP2_PACKED_ISA avx512

namespace dfmp2::devices::avx512 {
namespace {

template <class T>
struct Simd;
template <>
struct Simd<double> {
  using V = __m512d;
  static constexpr int width = 8;
  static V load(const double* p) { return _mm512_load_pd(p); }
  static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(double x) { return _mm512_set1_pd(x); }
  static V zero() { return _mm512_setzero_pd(); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
};
template <>
struct Simd<float> {
  using V = __m512;
  static constexpr int width = 16;
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V zero() { return _mm512_setzero_ps(); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};

// The micro-kernel's columns: its accumulators are 3 x 8 of the 32 zmm registers.
constexpr int kNr = 8;

}  // namespace
}  // namespace dfmp2::devices::avx512

#include "devices/packed/packed_gemm_impl.hpp"
