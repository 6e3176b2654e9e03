// The machine's own limit for dense double-precision arithmetic: fused multiply-adds per second with 28
// independent chains per thread (enough to cover the FMA latency on every x86-64 core we know), on 1 thread and
// on all threads, with 512-bit vectors where the CPU has AVX-512F and 256-bit ones otherwise. Nothing but
// registers is touched, so this is the ceiling a GEMM kernel is measured against (bench/README.md).
//
// Each figure is measured five times: the best is the limit, the median shows how steady the machine is (on a
// shared virtual machine the second core's figure varies by 2x from one second to the next).
//
//   build/bench/bench_fma_peak [seconds per measurement, default 1]
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>

namespace {

constexpr int kChains = 28;

template <class V, V (*Fma)(V, V, V), V (*Set)(double)>
double chains(long iterations) {
  V acc[kChains];
#pragma GCC unroll 28
  for (int i = 0; i < kChains; ++i) acc[i] = Set(1.0 + i * 1e-9);
  const V b = Set(0.9999999), c = Set(1e-9);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 28
    for (int i = 0; i < kChains; ++i) acc[i] = Fma(acc[i], b, c);
  }
  double sink = 0;
  for (int i = 0; i < kChains; ++i) sink += reinterpret_cast<const double*>(&acc[i])[0];
  return sink;
}

__attribute__((target("avx512f"))) __m512d fma512(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
__attribute__((target("avx512f"))) __m512d set512(double x) { return _mm512_set1_pd(x); }
__attribute__((target("avx2,fma"))) __m256d fma256(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
__attribute__((target("avx2,fma"))) __m256d set256(double x) { return _mm256_set1_pd(x); }

__attribute__((target("avx512f"))) double run512(long n) { return chains<__m512d, fma512, set512>(n); }
__attribute__((target("avx2,fma"))) double run256(long n) { return chains<__m256d, fma256, set256>(n); }

// GFLOP/s on `threads` threads, each running `iterations` rounds of kChains FMAs of `doubles` lanes.
double rate(bool wide, int threads, long iterations) {
  const int doubles = wide ? 8 : 4;
  double sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += wide ? run512(iterations) : run256(iterations);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sink == 0.123456789) std::printf(" ");  // keeps the chains from being optimised away
  return 2.0 * doubles * kChains * double(iterations) * threads / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  __builtin_cpu_init();
  const bool wide = __builtin_cpu_supports("avx512f");
  if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    std::printf("bench_fma_peak: this CPU has neither AVX-512F nor AVX2 + FMA\n");
    return 1;
  }
  // Calibrate the iteration count to about `seconds` on one thread.
  long iterations = 1000000;
  const double probe = rate(wide, 1, iterations);
  iterations = static_cast<long>(seconds * probe * 1e9 / (2.0 * (wide ? 8 : 4) * kChains));
  const int all = omp_get_max_threads();
  std::printf("FMA peak (%s, %d chains per thread)\n", wide ? "AVX-512, 8 doubles" : "AVX2, 4 doubles", kChains);
  for (const int threads : {1, all}) {
    std::vector<double> r;
    for (int rep = 0; rep < 5; ++rep) r.push_back(rate(wide, threads, iterations));
    std::sort(r.begin(), r.end());
    std::printf("  %d thread%s  best %8.1f  median %8.1f GFLOP/s\n", threads, threads == 1 ? " " : "s", r.back(), r[2]);
  }
  return 0;
}
