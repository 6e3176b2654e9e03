#include "devices/packed/packed_backend.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "devices/packed/packed_gemm.hpp"
#include "devices/eigen/eigen_backend.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::devices {
namespace {

using linalg::MatmulMode;
using linalg::Trans;

// The kernels of one instruction set (packed_gemm.hpp), with the backend's name and a line for the report.
struct Avx512 {
  static constexpr const char* name = "avx512";
  static constexpr const char* kernels = "AVX-512 GEMM (24x8 fp64, 48x8 fp32 tiles)";
  template <class T, class... Args>
  static void gemm(Args... args) { avx512::gemm<T>(args...); }
  template <class T, class... Args>
  static void syrk(Args... args) { avx512::syrk<T>(args...); }
  template <class T, class... Args>
  static void trsm(Args... args) { avx512::trsm<T>(args...); }
};
struct Avx2 {
  static constexpr const char* name = "avx2";
  static constexpr const char* kernels = "AVX2 GEMM (12x4 fp64, 24x4 fp32 tiles)";
  template <class T, class... Args>
  static void gemm(Args... args) { avx2::gemm<T>(args...); }
  template <class T, class... Args>
  static void syrk(Args... args) { avx2::syrk<T>(args...); }
  template <class T, class... Args>
  static void trsm(Args... args) { avx2::trsm<T>(args...); }
};

template <class Isa>
class PackedBackend final : public linalg::BackendOf<PackedBackend<Isa>> {
 public:
  PackedBackend() : eigen_(make_eigen_backend()) {}
  std::string name() const override { return Isa::name; }
  std::string details() const override {
    return fmt::format("dfmp2's packed {} for gemm, gemm_batched, syrk and the off-diagonal blocks of trsm, with every "
                       "dimension >= {}; smaller products, cholesky, eigh and SpMM through {}",
                       Isa::kernels, kMinPacked, eigen_->details());
  }
  bool openmp_threads() const override { return true; }
  void set_threads(int threads) override {
    if (threads > 0) threads_ = threads;
    eigen_->set_threads(threads);
  }

  // Products with a dimension below kMinPacked (matrix-vector products such as the DF-J/K's J) go to Eigen:
  // packing their operands would cost more than it saves.
  template <class T>
  void exec(const linalg::Gemm<T>& g, MatmulMode m) {
    if (!packed(g)) return forward(g, m);
    Isa::template gemm<T>(g.ta == Trans::yes, g.tb == Trans::yes, g.alpha, g.a, g.b, g.beta, g.c, threads_);
  }
  // Many small products (the SCF's K build) run side by side, one per thread; a few large ones one after the
  // other on all threads.
  template <class T>
  void exec(const linalg::GemmBatched<T>& g, MatmulMode m) {
    if (g.count > 0 && !packed(g.problem(0))) return forward(g, m);
    const bool side_by_side = threads_ > 1 && g.count >= 2 * threads_;
#pragma omp parallel for num_threads(threads_) schedule(dynamic, 1) if (side_by_side)
    for (linalg::Index i = 0; i < g.count; ++i) {
      const linalg::Gemm<T> p = g.problem(i);
      Isa::template gemm<T>(p.ta == Trans::yes, p.tb == Trans::yes, p.alpha, p.a, p.b, p.beta, p.c,
                      side_by_side ? 1 : threads_);
    }
  }
  template <class T>
  void exec(const linalg::Syrk<T>& s, MatmulMode m) {
    if (s.n() < kMinPacked || s.k() < kMinPacked) return forward(s, m);
    Isa::template syrk<T>(s.uplo == linalg::Uplo::lower, s.trans == Trans::yes, s.alpha, s.a, s.beta, s.c, threads_);
  }
  template <class T>
  void exec(const linalg::Trsm<T>& t, MatmulMode m) {
    if (t.a.rows < 2 * kMinPacked || t.b.rows < kMinPacked || t.b.cols < kMinPacked) return forward(t, m);
    Isa::template trsm<T>(t.side == linalg::Side::left, t.uplo == linalg::Uplo::lower, t.trans == Trans::yes,
                    t.diag == linalg::Diag::unit, t.alpha, t.a, t.b, threads_);
  }
  template <class T>
  void exec(const linalg::Cholesky<T>& c, MatmulMode m) { forward(c, m); }
  template <class T>
  void exec(const linalg::Eigh<T>& e, MatmulMode m) { forward(e, m); }
  template <class T>
  void exec(const linalg::SpmmCsr<T>& p, MatmulMode m) { forward(p, m); }
  template <class T>
  void exec(const linalg::SpmmBsr<T>& p, MatmulMode m) { forward(p, m); }

 private:
  static constexpr linalg::Index kMinPacked = 16;
  template <class T>
  static bool packed(const linalg::Gemm<T>& g) {
    return g.m() >= kMinPacked && g.n() >= kMinPacked && g.k() >= kMinPacked;
  }
  template <class Args>
  void forward(const Args& args, MatmulMode mode) {
    eigen_->run(linalg::OpCall{args}, mode);
  }
  std::unique_ptr<linalg::Backend> eigen_;
  int threads_ = std::max(1, omp_get_max_threads());
};

}  // namespace

std::string own_kernels_build() { return fmt::format("{}, {}", avx512::build_stamp(), avx2::build_stamp()); }

bool avx512_available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

bool avx2_available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

std::unique_ptr<linalg::Backend> make_avx512_backend() {
  if (!avx512_available()) {
    throw UnsupportedError("backend 'avx512' needs a CPU with AVX-512F and FMA, and this one has not");
  }
  return std::make_unique<PackedBackend<Avx512>>();
}

std::unique_ptr<linalg::Backend> make_avx2_backend() {
  if (!avx2_available()) throw UnsupportedError("backend 'avx2' needs a CPU with AVX2 and FMA, and this one has not");
  return std::make_unique<PackedBackend<Avx2>>();
}

}  // namespace dfmp2::devices
