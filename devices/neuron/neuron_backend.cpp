#include "devices/neuron/neuron_backend.hpp"

#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include "devices/neuron/bf16.hpp"
#include "devices/neuron/compile_cache.hpp"
#include "devices/neuron/neuron_params.hpp"
#include "devices/neuron/timing_model.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::devices {
namespace {

using linalg::ConstMatrixViewF;
using linalg::Diag;
using linalg::eigen_map;
using linalg::Index;
using linalg::MatrixF;
using linalg::MatmulMode;
using linalg::MatrixViewF;
using linalg::Op;
using linalg::Side;
using linalg::Trans;
using linalg::Uplo;
using neuron::CallTimeline;
using neuron::CompileOutcome;
using neuron::Launch;

constexpr double kF32 = 4.0;  // bytes of an fp32 element on the host and in HBM

// ---- Arithmetic as the device does it ----------------------------------------------------------------------

MatrixF bf16_copy(ConstMatrixViewF v) {
  MatrixF m = eigen_map(v);
  return m.unaryExpr([](float x) { return neuron::round_to_bf16(x); });
}

// An fp32 operand as the Tensor Engine sees it in `mode`: fp32 itself (a view, no copy), rounded to bf16, or for
// bf16x3 two parts, hi = bf16(x) and lo = bf16(x - hi), split on chip from the fp32 tile.
struct OperandParts {
  MatrixF hi_store, lo_store;
  ConstMatrixViewF hi, lo;
  bool split = false;
};
OperandParts operand_parts(ConstMatrixViewF v, MatmulMode mode) {
  OperandParts parts;
  parts.hi = v;
  if (mode == MatmulMode::fp32) return parts;
  parts.hi_store = bf16_copy(v);
  parts.hi = linalg::view(std::as_const(parts.hi_store));
  if (mode == MatmulMode::bf16x3) {
    parts.lo_store = eigen_map(v) - parts.hi_store;  // exact in fp32: hi holds the leading 8 bits of x
    parts.lo_store = parts.lo_store.unaryExpr([](float x) { return neuron::round_to_bf16(x); });
    parts.lo = linalg::view(std::as_const(parts.lo_store));
    parts.split = true;
  }
  return parts;
}

// acc = op(A) op(B), accumulated in fp32 one K tile at a time as the Tensor Engine accumulates in a PSUM bank;
// bf16x3 issues three matmuls per K tile into the same bank: hi*hi, hi*lo, lo*hi.
void psum_product(const OperandParts& a, bool transpose_a, const OperandParts& b, bool transpose_b, Index k_tile,
                  MatrixF& acc) {
  const Index m = transpose_a ? a.hi.cols : a.hi.rows, k = transpose_a ? a.hi.rows : a.hi.cols;
  const Index n = transpose_b ? b.hi.rows : b.hi.cols;
  acc.setZero(m, n);
  auto product = [&](ConstMatrixViewF xv, ConstMatrixViewF yv, Index k0, Index kc) {
    const auto x = eigen_map(xv);
    const auto y = eigen_map(yv);
    if (!transpose_a && !transpose_b) acc.noalias() += x.middleCols(k0, kc) * y.middleRows(k0, kc);
    if (transpose_a && !transpose_b) acc.noalias() += x.middleRows(k0, kc).transpose() * y.middleRows(k0, kc);
    if (!transpose_a && transpose_b) acc.noalias() += x.middleCols(k0, kc) * y.middleCols(k0, kc).transpose();
    if (transpose_a && transpose_b)
      acc.noalias() += x.middleRows(k0, kc).transpose() * y.middleCols(k0, kc).transpose();
  };
  for (Index k0 = 0; k0 < k; k0 += k_tile) {
    const Index kc = std::min(k_tile, k - k0);
    product(a.hi, b.hi, k0, kc);
    if (a.split) {
      product(a.hi, b.lo, k0, kc);
      product(a.lo, b.hi, k0, kc);
    }
  }
}

// C = beta C with BLAS semantics: beta 0 does not read C.
void scale(MatrixViewF c, float beta) {
  auto cm = eigen_map(c);
  if (beta == 0.0f) cm.setZero();
  else if (beta != 1.0f) cm *= beta;
}

// C = alpha op(A) op(B) + beta C on the device: operands in the mode's format, products accumulated in fp32,
// alpha and beta applied when the result leaves PSUM.
void device_gemm(Trans ta, Trans tb, float alpha, ConstMatrixViewF a, ConstMatrixViewF b, float beta, MatrixViewF c,
                 MatmulMode mode, Index k_tile) {
  if (c.rows == 0 || c.cols == 0) return;
  if (alpha == 0.0f) {  // BLAS: A and B are not read
    scale(c, beta);
    return;
  }
  MatrixF acc;
  psum_product(operand_parts(a, mode), ta == Trans::yes, operand_parts(b, mode), tb == Trans::yes, k_tile, acc);
  auto cm = eigen_map(c);
  if (beta == 0.0f) cm.noalias() = alpha * acc;
  else cm = alpha * acc + beta * cm;
}

// ---- The backend ---------------------------------------------------------------------------------------------

struct Operand {
  const char* name;
  Index rows, cols, count;
};

std::string trans_name(Trans t) { return t == Trans::no ? "N" : "T"; }

class NeuronBackend final : public linalg::BackendOf<NeuronBackend> {
 public:
  NeuronBackend(const std::string& device, const DeviceOptions& options)
      : p_(neuron::load_neuron_params(device, options)), cache_(options.compile_cache) {}

  std::string name() const override { return p_.device; }
  std::string details() const override {
    return fmt::format(
        "model of NeuronCore-{} ({}): {} GHz {}x{} PE array, {:.1f} TFLOPS bf16 / {:.1f} TFLOPS fp32, SBUF {} KiB x {} "
        "partitions, HBM {} GiB at {} GB/s per core; compile cache {}; times are predictions{}, "
        "arithmetic emulated on the host ({} threads)",
        p_.device == "trn1" ? "v2" : "v3", p_.device, p_.pe_clock_ghz, p_.pe_rows, p_.pe_rows,
        p_.peak_flops(MatmulMode::bf16) / 1e12, p_.peak_flops(MatmulMode::fp32) / 1e12, p_.sbuf_partition_kib, p_.pe_rows, p_.hbm_gib,
        p_.hbm_gbps, cache_.folder().empty() ? "none" : cache_.folder(),
        // Which published measurements the predictions were held against (bench/README "Device model: calibration
        // and check rows"): trn1's kernel and pipeline rows; for trn2 none is published.
        p_.device == "trn1" ? " (checked against the published trn1 rows, bench/README)"
                            : " that no published measurement checks (none of a trn2 is published; its host side is "
                              "trn1's)",
        Eigen::nbThreads());
  }
  // fp64 and eigh have no exec below, so BackendOf reports them unsupported; this says why.
  std::string unsupported_reason(Op op, linalg::DType dtype) const override {
    if (dtype == linalg::DType::fp64) return "the Tensor Engine computes in fp32 or bf16 only; use precision fp32";
    if (op == Op::eigh) return "the symmetric eigensolver does not run on the NeuronCore";
    return {};
  }
  void set_threads(int threads) override {
    if (threads > 0) Eigen::setNbThreads(threads);
  }
  double peak_flops(MatmulMode mode) const override { return p_.peak_flops(mode); }
  bool supports_matmul_mode(MatmulMode) const override { return true; }
  // The accumulator (or TRSM/Cholesky working copy), plus the operand parts of the mode (operand_parts).
  double working_copies(MatmulMode mode) const override {
    return mode == MatmulMode::fp32 ? 1.0 : mode == MatmulMode::bf16 ? 2.0 : 3.0;
  }

  // The ops the device has, fp32 operands only; each returns the modelled cost of the call.
  linalg::ModelledTime exec(const linalg::Gemm<float>& g, MatmulMode mode) {
    const Index m = g.m(), n = g.n(), k = g.k();
    check_hbm(Op::gemm, {{"A", m, k, 1}, {"B", k, n, 1}, {"C", m, n, 1}});
    CallTimeline tl(p_);
    const long id = library_gemm(tl, mode, g.ta, g.tb, m, n, k);
    tl.host(library_scaling(double(m * n), g.beta != 0.0f), id);
    device_gemm(g.ta, g.tb, g.alpha, g.a, g.b, g.beta, g.c, mode, tile());
    return tl.finish();
  }

  linalg::ModelledTime exec(const linalg::GemmBatched<float>& g, MatmulMode mode) {
    const Index m = g.m(), n = g.n(), k = g.k(), count = g.count;
    const linalg::BatchStrides& s = g.strides;
    const Trans ta = g.ta, tb = g.tb;
    const Index ca = s.a == 0 ? 1 : count, cb = s.b == 0 ? 1 : count, cc = s.c == 0 ? 1 : count;
    check_hbm(Op::gemm_batched, {{"A", m, k, ca}, {"B", k, n, cb}, {"C", m, n, cc}});
    CallTimeline tl(p_);
    if (count > 0 && p_.batched_gemm_launches > 0) {
      // One launch looping over the problems on the device; every operand copied once.
      launch_gemm(tl, mode, ta, tb, m, n, k, count, g.beta != 0.0f, 3, {double(m * k * ca), double(k * n * cb)}, cc);
    } else if (count > 0) {
      // One 2-d GEMM launch per problem, each with its host preparation, dispatch and copies, as the published
      // library loops; then the results are stacked into one tensor and scaled (alpha * result) on the host.
      long last = -1;
      for (Index i = 0; i < count; ++i) last = library_gemm(tl, mode, ta, tb, m, n, k);
      const double results = double(m * n) * double(count);
      tl.host(host_pass(results, results) + library_scaling(results, g.beta != 0.0f), last);
    }
    auto one = [&](Index i) {
      const linalg::Gemm<float> p = g.problem(i);
      device_gemm(p.ta, p.tb, p.alpha, p.a, p.b, p.beta, p.c, mode, tile());
    };
    // Whole problems per thread when there are several per thread (Eigen does not nest inside the region).
    const int threads = Eigen::nbThreads();
    if (threads > 1 && count >= 2 * threads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (Index i = 0; i < count; ++i) one(i);
    } else {
      for (Index i = 0; i < count; ++i) one(i);
    }
    return tl.finish();
  }

  linalg::ModelledTime exec(const linalg::Syrk<float>& sy, MatmulMode mode) {
    const Index n = sy.n(), k = sy.k();
    const float beta = sy.beta;
    check_hbm(Op::syrk, {{"A", n, k, 1}, {"C", n, n, 1}});
    CallTimeline tl(p_);
    if (n > 0) {
      Launch l{.kind = Launch::Kind::syrk, .m = n, .n = n, .k = k, .beta_nonzero = beta != 0.0f, .mode = mode,
               .tensors = 2, .copies_in = {}, .copies_out = {}};
      l.copies_in = {double(n * k) * kF32};
      if (l.beta_nonzero) l.copies_in.push_back(double(n * n) * kF32);
      l.copies_out = {double(n * n) * kF32};
      const long id = run_launch(tl, l, fmt::format("syrk|{}|n={} k={}|beta={}", linalg::matmul_mode_name(mode), n,
                                                    k, l.beta_nonzero));
      // The full symmetric result is mirrored from the computed triangle on the host (strided transpose-add).
      tl.host(double(n * n) * kF32 / (p_.syrk_mirror_gbps * 1e9), id);
    }
    syrk_arith(sy, mode);
    return tl.finish();
  }

  linalg::ModelledTime exec(const linalg::Trsm<float>& t, MatmulMode mode) {
    const auto& [side, uplo, trans, diag, alpha, a, b] = t;
    const Index n = a.rows, nrhs = side == Side::left ? b.cols : b.rows;
    check_hbm(Op::trsm, {{"A", n, n, 1}, {"B", b.rows, b.cols, 1}});
    CallTimeline tl(p_);
    if (alpha != 0.0f && n > 0 && nrhs > 0) {
      // As the published library runs it: every variant becomes a left solve with a lower triangle (the host
      // makes the transposes contiguous first: the triangle when op(A) is upper, B and X for a right-side solve);
      // then for each 128-row diagonal panel the host solves the panel against all right-hand sides, one device
      // GEMM computes the update of the rows below (panel block of A and the solved rows copied in, the product
      // copied out), and the host subtracts it. Each update has its own shape, hence its own compiled kernel. The
      // host waits for each product before the next panel solve.
      const bool transpose = (trans == Trans::yes) != (side == Side::right);
      const bool lower = (uplo == Uplo::lower) != transpose;
      const double rhs = double(n) * double(nrhs);
      // The host makes the transposes contiguous (the triangle when op(A) is upper, B and X for a right-side solve)
      // and clones B into X.
      if (!lower || transpose) tl.host(host_pass(double(n) * double(n), double(n) * double(n)));
      if (side == Side::right) tl.host(2 * host_pass(rhs, rhs));
      tl.host(host_pass(rhs, rhs));
      const Index nb = tile();
      long update = -1;
      for (Index j0 = 0; j0 < n; j0 += nb) {
        const Index nbj = std::min(nb, n - j0), rem = n - j0 - nbj;
        const double panel_rhs = double(nbj) * double(nrhs), below = double(rem) * double(nrhs);
        // The panel solve returns a new tensor, copied into X.
        tl.host(double(nbj) * double(nbj) * double(nrhs) / p_.host_panel_solve_flops(double(nrhs)) +
                    host_pass(panel_rhs, panel_rhs),
                update);
        if (rem > 0) {
          // The panel's block of the triangle below the diagonal is made contiguous, multiplied on the device; the
          // host forms X[below] - product (a new tensor) and copies it back into X.
          tl.host(host_pass(double(rem) * double(nbj), double(rem) * double(nbj)));
          update = library_gemm(tl, mode, Trans::no, Trans::no, rem, nrhs, nbj);
          tl.host(host_pass(2 * below, below) + host_pass(below, below, false), update);
        }
      }
      tl.host(host_pass(rhs, rhs));  // alpha * X
    }
    trsm_arith(t, mode);
    return tl.finish();
  }

  linalg::ModelledTime exec(const linalg::Cholesky<float>& ch, MatmulMode mode) {
    const Index n = ch.a.rows;
    check_hbm(Op::cholesky, {{"A", n, n, 1}});
    CallTimeline tl(p_);
    // The published library has no device Cholesky: it factors on the host (LAPACK), n^3/3 flops. The arithmetic
    // below is still the fp32 blocked factorisation of the device's other ops (the host's sgemm-based potrf in fp32).
    tl.host(p_.host_cholesky_seconds(double(n)));
    cholesky_arith(ch.uplo, ch.a, mode);
    return tl.finish();
  }

  linalg::ModelledTime exec(const linalg::SpmmCsr<float>& p, MatmulMode mode) {
    return spmm_impl(p.ts, p.alpha, p.s, p.b, p.beta, p.c, mode);
  }
  linalg::ModelledTime exec(const linalg::SpmmBsr<float>& p, MatmulMode mode) {
    return spmm_impl(p.ts, p.alpha, p.s, p.b, p.beta, p.c, mode);
  }

 private:
  Index tile() const { return static_cast<Index>(p_.pe_rows); }

  // Seconds of one host pass of the published library (torch on the host) that reads `read` and writes `written`
  // fp32 elements. A new tensor (fresh) larger than glibc's largest mmap threshold (32 MiB on 64-bit, mallopt(3))
  // is mapped afresh by every call, so its pages are first touched (faulted and zeroed) as it is written.
  // Passes over tensors of up to 32 MiB run at the cached rate, larger ones from main memory.
  double host_pass(double read, double written, bool fresh = true) const {
    constexpr double kMmapThresholdMax = 32.0 * 1048576.0;
    const double largest = std::max(read, written) * kF32;
    const double rate = largest > kMmapThresholdMax ? p_.host_stream_memory_gbps : p_.host_stream_gbps;
    double s = (read + written) * kF32 / (rate * 1e9);
    if (fresh && written * kF32 > kMmapThresholdMax) s += written * kF32 / (p_.host_first_touch_gbps * 1e9);
    return s;
  }

  // The public gemm and batched_gemm scale the product on the host (alpha * result, a new tensor) and, when beta is
  // not zero, add beta C there (beta * C, then the sum, each a new tensor): seconds for `elements` results.
  double library_scaling(double elements, bool beta_nonzero) const {
    double s = host_pass(elements, elements);
    if (beta_nonzero) s += host_pass(elements, elements) + host_pass(2 * elements, elements);
    return s;
  }

  // One GEMM as the published library runs it (_nki_gemm_impl): M and K padded to the 128 tile and N, when above
  // 512, to a multiple of 512; when any of them needs it both operands are copied into zeroed padded tensors on the
  // host, otherwise transposed views are made contiguous; then both copied in, one launch, the padded result copied
  // out. Returns the launch.
  long library_gemm(CallTimeline& tl, MatmulMode mode, Trans ta, Trans tb, Index m, Index n, Index k) {
    const Index t = tile(), wide = static_cast<Index>(p_.moving_free_max);
    auto round_up = [](Index x, Index q) { return (x + q - 1) / q * q; };
    const Index mp = round_up(m, t), kp = round_up(k, t), np = n <= wide ? n : round_up(n, wide);
    const bool pad = mp != m || kp != k || np != n;
    double host = 0;
    if (pad) {
      host += host_pass(0, double(mp * kp)) + host_pass(double(m * k), double(m * k), false);
      host += host_pass(0, double(kp * np)) + host_pass(double(k * n), double(k * n), false);
    } else {
      if (ta == Trans::yes) host += host_pass(double(m * k), double(m * k));
      if (tb == Trans::yes) host += host_pass(double(k * n), double(k * n));
    }
    if (host > 0) tl.host(host);
    return launch_gemm(tl, mode, pad ? Trans::no : ta, pad ? Trans::no : tb, mp, np, kp, 1, false, 3,
                       {double(mp * kp), double(kp * np)});
  }

  // The call's operands must all be in HBM at once.
  void check_hbm(Op op, const std::vector<Operand>& operands) const {
    double total = 0;
    for (const auto& o : operands) {
      const double bytes = double(o.rows) * double(o.cols) * double(o.count) * kF32;
      total += bytes;
      if (total > p_.hbm_bytes()) {
        const std::string shape = o.count > 1 ? fmt::format("{} x {} x {}", o.count, o.rows, o.cols)
                                              : fmt::format("{} x {}", o.rows, o.cols);
        throw ResourceError(fmt::format(
            "{}: {} operand {} ({} fp32, {:.1f} MiB) does not fit in the modelled HBM: the call's operands need "
            "{:.1f} MiB so far, the NeuronCore has {} GiB (hbm_gib)",
            p_.device, linalg::op_name(op), o.name, shape, bytes / 1048576.0, total / 1048576.0, p_.hbm_gib));
      }
    }
  }

  long run_launch(CallTimeline& tl, const Launch& l, const std::string& kernel) {
    const auto cost = neuron::launch_cost(p_, l);
    const auto outcome = cache_.acquire(p_.device + "|" + kernel);
    const double seconds =
        outcome == CompileOutcome::loaded ? p_.cache_load_ms * 1e-3 : neuron::compile_seconds(p_, cost.instructions);
    return tl.launch(cost, outcome, seconds);
  }

  // One GEMM launch; a_elems, b_elems: elements of A and B copied in; C (m x n, c_count copies) is copied in
  // when beta != 0 and always out.
  long launch_gemm(CallTimeline& tl, MatmulMode mode, Trans ta, Trans tb, Index m, Index n, Index k, Index count,
                   bool beta_nonzero, int tensors, std::vector<double> in_elems, Index c_count = 1) {
    Launch l{.kind = Launch::Kind::gemm, .m = m, .n = n, .k = k, .count = count, .beta_nonzero = beta_nonzero,
             .mode = mode, .tensors = tensors, .copies_in = {}, .copies_out = {}};
    for (double e : in_elems) l.copies_in.push_back(e * kF32);
    const double c_bytes = double(m * n * c_count) * kF32;
    if (beta_nonzero) l.copies_in.push_back(c_bytes);
    l.copies_out = {c_bytes};
    return run_launch(tl, l,
                      fmt::format("gemm|{}|m={} n={} k={} count={}|{}{}|beta={}", linalg::matmul_mode_name(mode), m,
                                  n, k, count,
                                  trans_name(ta), trans_name(tb), beta_nonzero));
  }

  void syrk_arith(const linalg::Syrk<float>& sy, MatmulMode mode) const {
    const auto& [uplo, trans, alpha, a, beta, c] = sy;
    const Index n = c.rows;
    auto cm = eigen_map(c);
    const Uplo triangle = uplo;  // a lambda may not capture a structured binding before C++20's clang 16
    auto in_triangle = [triangle](Index i, Index j) { return triangle == Uplo::lower ? i >= j : i <= j; };
    if (alpha == 0.0f) {  // BLAS: A is not read
      for (Index j = 0; j < n; ++j)
        for (Index i = 0; i < n; ++i)
          if (in_triangle(i, j)) cm(i, j) = beta == 0.0f ? 0.0f : beta * cm(i, j);
      return;
    }
    const OperandParts parts = operand_parts(a, mode);
    MatrixF acc;
    psum_product(parts, trans == Trans::yes, parts, trans == Trans::no, tile(), acc);
    for (Index j = 0; j < n; ++j)
      for (Index i = 0; i < n; ++i)
        if (in_triangle(i, j)) cm(i, j) = beta == 0.0f ? alpha * acc(i, j) : alpha * acc(i, j) + beta * cm(i, j);
  }

  // Every TRSM variant becomes a lower-triangular solve from the left, T R = alpha B': right-side solves are
  // transposed, upper triangles reversed. Diagonal blocks are solved on the host in fp32; the updates of the rows
  // below run as device GEMMs.
  void trsm_arith(const linalg::Trsm<float>& tr, MatmulMode mode) const {
    const auto& [side, uplo, trans, diag, alpha, a, b] = tr;
    auto bm = eigen_map(b);
    if (alpha == 0.0f) {  // BLAS: X = 0, neither A nor B is read
      bm.setZero();
      return;
    }
    const Index n = a.rows;
    if (n == 0 || b.rows == 0 || b.cols == 0) return;
    const auto am = eigen_map(a);
    MatrixF tri = MatrixF::Zero(n, n);
    if (uplo == Uplo::lower) tri.triangularView<Eigen::Lower>() = am;
    else tri.triangularView<Eigen::Upper>() = am;
    if (diag == Diag::unit) tri.diagonal().setOnes();
    const bool transpose = (trans == Trans::yes) != (side == Side::right);
    const bool lower = (uplo == Uplo::lower) != transpose;
    MatrixF t = transpose ? MatrixF(tri.transpose()) : std::move(tri);
    MatrixF r = side == Side::left ? MatrixF(bm) : MatrixF(bm.transpose());
    r *= alpha;
    if (!lower) {
      t = t.reverse().eval();
      r = r.colwise().reverse().eval();
    }
    const Index nb = tile(), nrhs = r.cols();
    for (Index j0 = 0; j0 < n; j0 += nb) {
      const Index nbj = std::min(nb, n - j0), rem = n - j0 - nbj;
      auto xj = r.middleRows(j0, nbj);
      t.block(j0, j0, nbj, nbj).triangularView<Eigen::Lower>().solveInPlace(xj);
      if (rem > 0) {
        const ConstMatrixViewF panel{t.data() + (j0 + nbj) + j0 * n, rem, nbj, n};
        const ConstMatrixViewF x{r.data() + j0, nbj, nrhs, n};
        const MatrixViewF below{r.data() + j0 + nbj, rem, nrhs, n};
        device_gemm(Trans::no, Trans::no, -1.0f, panel, x, 1.0f, below, mode, tile());
      }
    }
    if (!lower) r = r.colwise().reverse().eval();
    if (side == Side::left) bm = r;
    else bm = r.transpose();
  }

  // Right-looking blocked Cholesky of the lower factor (upper: of A^T, transposed back).
  void cholesky_arith(Uplo uplo, MatrixViewF a, MatmulMode mode) const {
    const Index n = a.rows;
    if (n == 0) return;
    auto am = eigen_map(a);
    MatrixF w = uplo == Uplo::lower ? MatrixF(am) : MatrixF(am.transpose());
    const Index nb = tile();
    for (Index j0 = 0; j0 < n; j0 += nb) {
      const Index nbj = std::min(nb, n - j0), rem = n - j0 - nbj;
      // Host: unblocked factor of the diagonal block, failing on the first non-positive pivot.
      for (Index k = 0; k < nbj; ++k) {
        const Index kk = j0 + k;
        const float d = w(kk, kk) - w.row(kk).segment(j0, k).squaredNorm();
        if (!(d > 0.0f))
          throw NumericalError(fmt::format("{}: cholesky: the leading minor of order {} is not positive definite",
                                           p_.device, kk + 1));
        const float s = std::sqrt(d);
        w(kk, kk) = s;
        for (Index i = k + 1; i < nbj; ++i)
          w(j0 + i, kk) = (w(j0 + i, kk) - w.row(j0 + i).segment(j0, k).dot(w.row(kk).segment(j0, k))) / s;
      }
      if (rem == 0) break;
      // Host: panel below, P = P L^-T.
      auto panel = w.block(j0 + nbj, j0, rem, nbj);
      w.block(j0, j0, nbj, nbj).transpose().triangularView<Eigen::Upper>().solveInPlace<Eigen::OnTheRight>(panel);
      // Trailing update W -= P P^T, with the step's operand format: fp32 by default (a host LAPACK factor is fp32);
      // an explicit all-bf16 metric (device.step_precision) rounds these products to show what bf16 would cost.
      const ConstMatrixViewF p{w.data() + (j0 + nbj) + j0 * n, rem, nbj, n};
      const MatrixViewF trailing{w.data() + (j0 + nbj) + (j0 + nbj) * n, rem, rem, n};
      device_gemm(Trans::no, Trans::yes, -1.0f, p, p, 1.0f, trailing, mode, tile());
    }
    if (uplo == Uplo::lower) am.triangularView<Eigen::Lower>() = w;
    else am.triangularView<Eigen::Upper>() = w.transpose();
  }

  // The device path densifies S on the host (zero-fill, then scatter the stored entries) and runs one dense GEMM.
  template <class Sparse>
  linalg::ModelledTime spmm_impl(Trans ts, float alpha, const Sparse& s, ConstMatrixViewF b, float beta, MatrixViewF c,
                                 MatmulMode mode) {
    const Index m = c.rows, n = c.cols, k = ts == Trans::no ? s.cols : s.rows;
    check_hbm(Op::spmm, {{"A (densified S)", s.rows, s.cols, 1}, {"B", k, n, 1}, {"C", m, n, 1}});
    CallTimeline tl(p_);
    tl.host(double(s.rows) * double(s.cols) * kF32 / (p_.densify_memset_gbps * 1e9) +
            double(s.nnz()) * p_.densify_ns_per_nnz * 1e-9);
    // Tensor arguments of the call: the three arrays of S, B and C.
    launch_gemm(tl, mode, ts, Trans::no, m, n, k, 1, beta != 0.0f, 5, {double(m * k), double(k * n)});
    if (alpha == 0.0f) {
      scale(c, beta);
    } else {
      const MatrixF dense = linalg::to_dense(s);
      device_gemm(ts, Trans::no, alpha, linalg::view(dense), b, beta, c, mode, tile());
    }
    return tl.finish();
  }

  neuron::NeuronParams p_;
  neuron::CompileCache cache_;
};

}  // namespace

std::unique_ptr<linalg::Backend> make_neuron_backend(const std::string& device, const DeviceOptions& options) {
  return std::make_unique<NeuronBackend>(device, options);
}

}  // namespace dfmp2::devices
