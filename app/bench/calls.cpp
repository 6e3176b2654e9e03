#include "app/bench/calls.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <memory>
#include <tuple>
#include <utility>

#include <Eigen/QR>

#include "linalg/op_call.hpp"
#include "linalg/errors.hpp"
#include "linalg/inverse_sqrt.hpp"
#include "linalg/random.hpp"
#include "linalg/sparse.hpp"

namespace dfmp2::app::bench {

using linalg::Index;
using linalg::Op;

namespace {

// Philox streams of the operands: one per role, so the data do not depend on the order the operands are made in.
constexpr std::uint64_t kStreamA = 11, kStreamB = 12, kStreamC = 13, kStreamPattern = 14, kStreamRandom = 15;

template <class T>
linalg::MatrixT<T> normal_matrix(Index rows, Index cols, std::uint64_t seed, std::uint64_t stream) {
  linalg::MatrixT<T> m(rows, cols);
  linalg::PhiloxStream(seed, stream).parallel_normal(m.data(), static_cast<std::size_t>(rows * cols));
  return m;
}

// Symmetric positive definite, made in fp64 (rounded for fp32). condition 0: J = R R^T / n + I, eigenvalues in
// [1, about 5], like a scaled metric. condition X > 1: Q diag(w) Q^T with Q from the QR factorisation of a Gaussian
// matrix and w log-spaced from 1 down to 1/X (a DF metric's condition number is of order 1e5), for the inverse
// square roots, whose iteration counts depend on it.
template <class T>
linalg::MatrixT<T> spd_matrix(Index n, double condition, std::uint64_t seed) {
  const linalg::Matrix r = normal_matrix<double>(n, n, seed, kStreamA);
  if (condition > 0) {
    const linalg::Matrix q = Eigen::HouseholderQR<linalg::Matrix>(r).householderQ();
    linalg::Vector w(n);
    for (Index i = 0; i < n; ++i) w[i] = std::pow(condition, -double(i) / double(std::max<Index>(1, n - 1)));
    return (q * w.asDiagonal() * q.transpose()).template cast<T>();
  }
  linalg::Matrix j = r * r.transpose() / double(n);
  j.diagonal().array() += 1.0;
  return j.cast<T>();
}

// Lower triangular with unit-order diagonal and small off-diagonal entries, so the solve stays well conditioned.
template <class T>
linalg::MatrixT<T> lower_triangular(Index n, std::uint64_t seed) {
  linalg::MatrixT<T> l = normal_matrix<T>(n, n, seed, kStreamA);
  for (Index j = 0; j < n; ++j) {
    for (Index i = 0; i < j; ++i) l(i, j) = T(0);
    l(j, j) = T(1.0 + std::abs(double(l(j, j))) / 4.0);
    for (Index i = j + 1; i < n; ++i) l(i, j) = T(double(l(i, j)) * 0.5 / double(n));
  }
  return l;
}

// A call that runs one op's descriptor through Kernels; its flops are the descriptor's cost, as the log records
// them. `keep` holds the operands the descriptor's views point into.
template <class Args>
void run_descriptor(PreparedCall& call, const Args& args, std::shared_ptr<void> keep) {
  call.run = [args, keep](linalg::Kernels& k) { k.run(kBenchStep, args); };
  call.flops = args.cost().flops;
}

template <class T>
PreparedCall prepare(const CallSpec& s, std::uint64_t seed) {
  using Mat = linalg::MatrixT<T>;
  PreparedCall call;
  call.reset = [] {};
  const std::string step = kBenchStep;
  const auto ta = s.trans_a ? linalg::Trans::yes : linalg::Trans::no;
  const auto tb = s.trans_b ? linalg::Trans::yes : linalg::Trans::no;
  if (s.op == "gemm") {
    auto ops = std::make_shared<std::array<Mat, 3>>(std::array<Mat, 3>{
        normal_matrix<T>(s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, seed, kStreamA),
        normal_matrix<T>(s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, seed, kStreamB), Mat(s.m, s.n)});
    auto& [a, b, c] = *ops;
    run_descriptor(call, linalg::Gemm<T>{ta, tb, T(1), linalg::view(a), linalg::view(b), T(0), linalg::view(c)}, ops);
  } else if (s.op == "gemm_batched") {
    const Index ar = s.trans_a ? s.k : s.m, ac = s.trans_a ? s.m : s.k;
    const Index br = s.trans_b ? s.n : s.k, bc = s.trans_b ? s.k : s.n;
    auto ops = std::make_shared<std::array<Mat, 3>>(std::array<Mat, 3>{
        normal_matrix<T>(ar, ac * s.count, seed, kStreamA), normal_matrix<T>(br, bc * s.count, seed, kStreamB),
        Mat(s.m, s.n * s.count)});
    auto& [a, b, c] = *ops;
    run_descriptor(call,
                   linalg::GemmBatched<T>{ta, tb, s.count, {.a = ar * ac, .b = br * bc, .c = s.m * s.n}, T(1),
                                          {a.data(), ar, ac, std::max<Index>(1, ar)},
                                          {b.data(), br, bc, std::max<Index>(1, br)}, T(0),
                                          {c.data(), s.m, s.n, std::max<Index>(1, s.m)}},
                   ops);
  } else if (s.op == "syrk") {
    auto ops = std::make_shared<std::array<Mat, 2>>(std::array<Mat, 2>{
        normal_matrix<T>(s.syrk_trans ? s.k : s.n, s.syrk_trans ? s.n : s.k, seed, kStreamA), Mat::Zero(s.n, s.n)});
    auto& [a, c] = *ops;
    const auto tr = s.syrk_trans ? linalg::Trans::yes : linalg::Trans::no;
    run_descriptor(call, linalg::Syrk<T>{linalg::Uplo::lower, tr, T(1), linalg::view(a), T(0), linalg::view(c)}, ops);
  } else if (s.op == "trsm" || s.op == "trsm_left") {
    const linalg::Side side = s.op == "trsm_left" ? linalg::Side::left : s.side;
    const Index order = side == linalg::Side::left ? s.m : s.n;
    const Mat b0 = normal_matrix<T>(s.m, s.n, seed, kStreamB);
    auto ops = std::make_shared<std::array<Mat, 3>>(std::array<Mat, 3>{lower_triangular<T>(order, seed), b0, b0});
    auto& [a, b, b_initial] = *ops;
    const auto tr = s.trsm_trans ? linalg::Trans::yes : linalg::Trans::no;
    call.reset = [ops] { (*ops)[1] = (*ops)[2]; };
    run_descriptor(
        call, linalg::Trsm<T>{side, linalg::Uplo::lower, tr, linalg::Diag::non_unit, T(1), linalg::view(a), linalg::view(b)},
        ops);
  } else if (s.op == "cholesky" || s.op == "eigh" || s.op == "invsqrt_eigh" || s.op == "invsqrt_ns") {
    auto a0 = std::make_shared<Mat>(spd_matrix<T>(s.n, s.condition, seed));
    auto a = std::make_shared<Mat>(*a0);
    auto w = std::make_shared<std::vector<T>>(static_cast<std::size_t>(s.n));
    call.reset = [=] { *a = *a0; };
    const std::string op = s.op;
    if (op == "cholesky") {
      run_descriptor(call, linalg::Cholesky<T>{linalg::Uplo::lower, linalg::view(*a)}, a);
    } else if (op == "eigh") {
      run_descriptor(call, linalg::Eigh<T>{linalg::view(*a), w->data()}, std::make_shared<std::pair<decltype(a), decltype(w)>>(a, w));
    } else if (op == "invsqrt_eigh") {
      // A composite: its flops are the sum of what its kernels logged (measure()).
      call.run = [=](linalg::Kernels& k) { linalg::inverse_sqrt_eigh<T>(k, step, linalg::view(*a)); };
    } else {
      // The flop count of Newton-Schulz depends on the iterations: taken from the kernel log too.
      call.run = [=](linalg::Kernels& k) { linalg::inverse_sqrt_newton_schulz<T>(k, step, linalg::view(*a)); };
    }
  } else if (s.op == "random") {
    const std::size_t count = static_cast<std::size_t>(s.n);
    auto out = std::make_shared<std::vector<T>>(count);
    auto offset = std::make_shared<std::uint64_t>(0);
    const linalg::PhiloxStream stream(seed, kStreamRandom);
    call.run = [=](linalg::Kernels&) {
      stream.parallel_normal(out->data(), count, *offset);
      *offset += count;  // fresh numbers each call
    };
    call.samples = double(count);
    call.host_only = true;
  } else if (s.op == "spmm_csr" || s.op == "spmm_bsr") {
    // S (m x k) at the density asked for, B (k x n) dense, C = S B.
    linalg::MatrixT<T> dense = normal_matrix<T>(s.m, s.k, seed, kStreamA);
    const linalg::PhiloxStream pattern(seed, kStreamPattern);
    auto b = std::make_shared<linalg::MatrixT<T>>(normal_matrix<T>(s.k, s.n, seed, kStreamB));
    auto c = std::make_shared<linalg::MatrixT<T>>(s.m, s.n);
    if (s.op == "spmm_csr") {
      for (Index j = 0; j < s.k; ++j)
        for (Index i = 0; i < s.m; ++i)
          if (pattern.uniform_at(std::uint64_t(i + j * s.m)) > s.density) dense(i, j) = T(0);
      auto sp = std::make_shared<linalg::CsrMatrix<T>>(linalg::csr_from_dense(dense));
      run_descriptor(call, linalg::SpmmCsr<T>{linalg::Trans::no, T(1), *sp, linalg::view(*b), T(0), linalg::view(*c)},
                     std::make_shared<std::tuple<decltype(sp), decltype(b), decltype(c)>>(sp, b, c));
    } else {
      const Index bs = s.block, nbr = (s.m + bs - 1) / bs, nbc = (s.k + bs - 1) / bs;
      bool any = false;
      for (Index bj = 0; bj < nbc; ++bj) {
        for (Index bi = 0; bi < nbr; ++bi) {
          const bool keep = pattern.uniform_at(std::uint64_t(bi + bj * nbr)) <= s.density;
          any = any || keep;
          if (!keep) dense.block(bi * bs, bj * bs, std::min(bs, s.m - bi * bs), std::min(bs, s.k - bj * bs)).setZero();
        }
      }
      if (!any) dense(0, 0) = T(1);  // at least one stored block
      auto sp = std::make_shared<linalg::BsrMatrix<T>>(linalg::bsr_from_dense(dense, bs, bs));
      run_descriptor(call, linalg::SpmmBsr<T>{linalg::Trans::no, T(1), *sp, linalg::view(*b), T(0), linalg::view(*c)},
                     std::make_shared<std::tuple<decltype(sp), decltype(b), decltype(c)>>(sp, b, c));
    }
  } else {
    throw InputError(fmt::format("unknown kernel '{}'", s.op));
  }
  return call;
}

}  // namespace

std::string CallSpec::shape_label() const {
  const char* ta = trans_a ? "t" : "n";
  const char* tb = trans_b ? "t" : "n";
  if (op == "gemm") return fmt::format("{}x{}x{} {}{}", m, n, k, ta, tb);
  if (op == "gemm_batched") return fmt::format("{} x {}x{}x{} {}{}", count, m, n, k, ta, tb);
  if (op == "syrk") return fmt::format("{}x{}{}", n, k, syrk_trans ? " t" : "");
  if (op == "trsm" || op == "trsm_left") {
    const bool left = op == "trsm_left" || side == linalg::Side::left;
    return fmt::format("{}x{} {} {}", m, n, left ? "left" : "right", trsm_trans ? "lower^T" : "lower");
  }
  if (op == "spmm_csr") return fmt::format("{}x{} d={:g} * {}x{}", m, k, density, k, n);
  if (op == "spmm_bsr") return fmt::format("{}x{} b{} d={:g} * {}x{}", m, k, block, density, k, n);
  if (op == "random") return fmt::format("{} normals", n);
  return fmt::format("{}x{}", n, n);
}

std::vector<Op> ops_needed(const CallSpec& s) {
  if (s.op == "gemm") return {Op::gemm};
  if (s.op == "gemm_batched") return {Op::gemm_batched};
  if (s.op == "syrk") return {Op::syrk};
  if (s.op == "trsm" || s.op == "trsm_left") return {Op::trsm};
  if (s.op == "cholesky") return {Op::cholesky};
  if (s.op == "eigh") return {Op::eigh};
  if (s.op == "invsqrt_eigh") return {Op::eigh, Op::syrk};
  if (s.op == "invsqrt_ns") return {Op::gemm};
  if (s.op == "spmm_csr" || s.op == "spmm_bsr") return {Op::spmm};
  return {};
}

void check_call(const CallSpec& s, const std::string& where) {
  auto positive = [&](Index v, const char* name) {
    if (v < 1) throw InputError(fmt::format("{}: '{}' must be >= 1, got {}", where, name, v));
  };
  const std::string& op = s.op;
  if (op == "gemm" || op == "gemm_batched" || op == "spmm_csr" || op == "spmm_bsr") {
    positive(s.m, "m");
    positive(s.n, "n");
    positive(s.k, "k");
  } else if (op == "syrk") {
    positive(s.n, "n");
    positive(s.k, "k");
  } else if (op == "trsm" || op == "trsm_left") {
    positive(s.m, "m");
    positive(s.n, "n");
  } else {
    positive(s.n, "n");
  }
  if (op == "gemm_batched") positive(s.count, "count");
  if (op == "spmm_bsr") positive(s.block, "block");
  if ((op == "spmm_csr" || op == "spmm_bsr") && !(s.density > 0 && s.density <= 1)) {
    throw InputError(fmt::format("{}: 'density' must be in (0, 1], got {}", where, s.density));
  }
}

PreparedCall prepare_call(const CallSpec& spec, bool fp64, std::uint64_t seed) {
  return fp64 ? prepare<double>(spec, seed) : prepare<float>(spec, seed);
}

linalg::MatmulMode matmul_mode_of(const std::string& precision) {
  if (precision == "bf16") return linalg::MatmulMode::bf16;
  if (precision == "bf16x3") return linalg::MatmulMode::bf16x3;
  return linalg::MatmulMode::fp32;
}

std::string unsupported_reason(linalg::Backend& backend, const CallSpec& spec, const std::string& precision) {
  if (spec.op == "random") return {};
  if (!backend.supports_matmul_mode(matmul_mode_of(precision))) {
    return fmt::format("backend '{}' has no {} arithmetic (use precision fp32 or fp64)", backend.name(), precision);
  }
  const linalg::DType dtype = precision == "fp64" ? linalg::DType::fp64 : linalg::DType::fp32;
  for (const Op op : ops_needed(spec)) {
    if (!backend.supports(op, dtype)) {
      return linalg::unsupported_message(backend, op, dtype, precision) +
             (spec.op != linalg::op_name(op) ? fmt::format(" (needed by {})", spec.op) : "");
    }
  }
  return {};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

namespace {

struct CallRecord {
  double seconds = 0;
  double flops = 0;
  bool modelled = false;
  linalg::ModelledTime model;
};

// One call: reset (untimed), then the call with the log cleared, so the log holds exactly its kernels.
CallRecord one_call(linalg::Kernels& kernels, const PreparedCall& call) {
  call.reset();
  kernels.log().clear();
  linalg::Stopwatch clock;
  call.run(kernels);
  CallRecord r;
  r.seconds = clock.seconds();
  for (const auto& rec : kernels.log().records()) {
    r.flops += rec.flops;
    if (rec.modelled) {
      r.modelled = true;
      r.model += rec.model;
    } else {
      // Host work inside a composite call (eigh_scale of the eigh inverse square root) costs its measured time.
      r.model.host += rec.seconds;
      r.model.total += rec.seconds;
    }
  }
  return r;
}

}  // namespace

Timing measure(linalg::Kernels& kernels, const PreparedCall& call, int warmup, int repeat) {
  Timing t;
  t.flops = call.flops;
  t.samples = call.samples;
  t.peak_flops = kernels.backend().peak_flops(kernels.matmul_mode(kBenchStep));
  std::vector<CallRecord> timed;
  for (int i = 0; i < warmup + repeat; ++i) {
    CallRecord r = one_call(kernels, call);
    if (i == 0) t.cold = r.model;
    if (i >= warmup) timed.push_back(r);
  }
  std::vector<double> seconds;
  for (const auto& r : timed) seconds.push_back(r.seconds);
  t.calls = repeat;
  t.median = median(seconds);
  t.min = *std::min_element(seconds.begin(), seconds.end());
  t.max = *std::max_element(seconds.begin(), seconds.end());
  if (t.flops == 0 && !call.host_only) t.flops = timed.back().flops;  // Newton-Schulz: as many GEMMs as it took
  t.modelled = timed.front().modelled;
  if (t.modelled) {
    // The warm call whose modelled total is the median (the model is deterministic, so they agree in practice).
    std::sort(timed.begin(), timed.end(), [](const CallRecord& a, const CallRecord& b) { return a.model.total < b.model.total; });
    t.warm = timed[timed.size() / 2].model;
  }
  return t;
}

}  // namespace dfmp2::app::bench
