// bench_ops: every op of the linear-algebra layer, per backend, size and element type, timed through
// linalg::Kernels (shape checks, support check and accounting included) so that the numbers are the ones the
// program sees. GFLOP/s use the flop counts of linalg/cost.hpp (as the KernelLog records them); the inverse
// square roots count the sum of the flops their kernels logged; random numbers are counted in samples per second.
// Ends with the question "where does Newton-Schulz overtake eigh for J^-1/2, if it does, on this machine".
// See bench/README.md.
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <Eigen/Cholesky>
#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/input.hpp"
#include "devices/registry.hpp"
#include "linalg/op_call.hpp"
#include "linalg/errors.hpp"
#include "linalg/inverse_sqrt.hpp"
#include "linalg/kernel_log.hpp"
#include "linalg/kernels.hpp"
#include "linalg/random.hpp"
#include "linalg/sparse.hpp"

namespace {

namespace la = dfmp2::linalg;
using la::Index;

// The ops this benchmark knows, in the order the table lists them.
const std::vector<std::string> kOps = {"gemm",         "gemm_batched", "syrk",     "trsm",     "cholesky", "eigh",
                                       "invsqrt_eigh", "invsqrt_ns",   "spmm_csr", "spmm_bsr", "rng"};
// Names --ops accepts beyond kOps: groups.
const std::map<std::string, std::vector<std::string>> kOpGroups = {
    {"all", kOps}, {"spmm", {"spmm_csr", "spmm_bsr"}}, {"invsqrt", {"invsqrt_eigh", "invsqrt_ns"}}};

constexpr Index kBatchCount = 64;      // gemm_batched: 64 problems of (N/4)^3, 2 N^3 flops in all
constexpr Index kTrsmRowsFactor = 4;   // trsm: B is (4N) x N, X L^T = B with L N x N
constexpr Index kSpmmBlock = 32;       // spmm: pattern of dense 32 x 32 blocks; BSR with 32 x 32 blocks
constexpr std::uint64_t kSeed = 20261121;

struct Options {
  std::vector<std::string> ops = kOps;
  std::vector<Index> sizes = {128, 256, 512, 1024};
  std::vector<std::string> backends;  // empty: all built
  std::vector<std::string> dtypes = {"fp64", "fp32"};
  int repeat = 3;
  int threads = 0;  // 0: all cores
  double condition = 1e5;
  std::vector<double> densities = {0.01, 0.1};
  std::optional<std::string> csv, json;

  bool has(const std::string& op) const { return std::find(ops.begin(), ops.end(), op) != ops.end(); }
};

constexpr const char* kUsage = R"(usage: bench_ops [options]

Times every op of the linear-algebra layer through linalg::Kernels, per backend, size N and element type, and
reports the median time, the spread (max - min) / median over the repetitions and the rate: GFLOP/s from the
flop counts of linalg/cost.hpp, or million samples per second for the random numbers. Ends with a comparison of
the two inverse square roots (Newton-Schulz against eigh) and the size where Newton-Schulz becomes faster.

  --ops LIST        ops to run (default all): gemm, gemm_batched, syrk, trsm, cholesky, eigh, invsqrt_eigh,
                    invsqrt_ns, spmm_csr, spmm_bsr, rng; groups: spmm, invsqrt, all
  --sizes LIST      matrix orders N                              (default 128,256,512,1024)
  --backends LIST   backends                                     (default: every backend built)
  --dtypes LIST     fp64, fp32                                   (default fp64,fp32)
  --repeat N        timed repetitions after one warm-up           (default 3)
  --threads N       threads for the backends and OpenMP           (default: all cores)
  --condition X     condition number of the SPD test matrix       (default 1e5)
                    (eigenvalues log-spaced in [1/X, 1]; cholesky, trsm, eigh, inverse square roots)
  --density LIST    fractions of stored 32x32 blocks for spmm     (default 0.01,0.1)
  --csv FILE        also write the rows as CSV
  --json FILE       also write everything as JSON
  -h, --help        this text

Shapes: gemm N x N x N; gemm_batched 64 problems (N/4) x (N/4) x (N/4) with A shared (stride 0, as the transform
step); syrk C (N x N, lower) = A A^T with A N x N; trsm X L^T = B (right, lower, transposed, the fitting step) with
L N x N and B 4N x N; cholesky, eigh and the inverse square roots of the N x N SPD matrix; spmm C = S B with S
N x N sparse and B N x N dense; rng fills N^2 numbers.
)";

// ---- command line -----------------------------------------------------------------------------------------------

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

long long parse_integer(const std::string& flag, const std::string& value, long long min) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || n < min) {
    throw dfmp2::InputError(fmt::format("{}: expected an integer >= {}, got '{}'", flag, min, value));
  }
  return n;
}

double parse_real(const std::string& flag, const std::string& value) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !std::isfinite(x)) {
    throw dfmp2::InputError(fmt::format("{}: expected a number, got '{}'", flag, value));
  }
  return x;
}

template <class T>
void push_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

std::string unknown_item(const std::string& flag, const std::string& what, const std::string& item,
                         const std::vector<std::string>& known) {
  std::string msg = fmt::format("{}: unknown {} '{}'", flag, what, item);
  if (const auto near = dfmp2::app::nearest(item, known)) msg += fmt::format(" (did you mean '{}'?)", *near);
  return msg + fmt::format("; expected {}", fmt::join(known, ", "));
}

// Returns nullopt when --help was asked for.
std::optional<Options> parse_args(int argc, char** argv) {
  Options o;
  static const std::vector<std::string> known = {"--ops",     "--sizes",     "--backends", "--dtypes",
                                                 "--repeat",  "--threads",   "--condition", "--density",
                                                 "--csv",     "--json"};
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") return std::nullopt;
    std::string value;
    bool have_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      have_value = true;
    }
    if (std::find(known.begin(), known.end(), flag) == known.end()) {
      std::string msg = fmt::format("unknown option '{}'", flag);
      if (const auto near = dfmp2::app::nearest(flag, known)) msg += fmt::format("; did you mean '{}'?", *near);
      throw dfmp2::InputError(msg + " (see --help)");
    }
    if (!have_value) {
      if (i + 1 >= argc) throw dfmp2::InputError(fmt::format("{}: missing value", flag));
      value = argv[++i];
    }
    if (flag == "--ops") {
      std::vector<std::string> all_names = kOps;
      for (const auto& [group, members] : kOpGroups) all_names.push_back(group);
      std::vector<std::string> wanted;
      for (const auto& item : split(value)) {
        if (const auto g = kOpGroups.find(item); g != kOpGroups.end()) {
          for (const auto& op : g->second) push_unique(wanted, op);
        } else if (std::find(kOps.begin(), kOps.end(), item) != kOps.end()) {
          push_unique(wanted, item);
        } else {
          throw dfmp2::InputError(unknown_item(flag, "op", item, all_names));
        }
      }
      o.ops.clear();  // keep the table's order whatever the order given
      for (const auto& op : kOps)
        if (std::find(wanted.begin(), wanted.end(), op) != wanted.end()) o.ops.push_back(op);
    } else if (flag == "--sizes") {
      o.sizes.clear();
      for (const auto& item : split(value)) push_unique(o.sizes, Index(parse_integer(flag, item, 1)));
      std::sort(o.sizes.begin(), o.sizes.end());
    } else if (flag == "--backends") {
      o.backends.clear();
      for (const auto& item : split(value)) {
        if (item.empty()) throw dfmp2::InputError(fmt::format("{}: empty backend name in '{}'", flag, value));
        push_unique(o.backends, item);
      }
    } else if (flag == "--dtypes") {
      static const std::vector<std::string> dtypes = {"fp64", "fp32"};
      std::vector<std::string> wanted;
      for (const auto& item : split(value)) {
        if (std::find(dtypes.begin(), dtypes.end(), item) == dtypes.end()) {
          throw dfmp2::InputError(unknown_item(flag, "dtype", item, dtypes));
        }
        push_unique(wanted, item);
      }
      o.dtypes = wanted;
    } else if (flag == "--repeat") {
      o.repeat = static_cast<int>(parse_integer(flag, value, 1));
    } else if (flag == "--threads") {
      o.threads = static_cast<int>(parse_integer(flag, value, 1));
    } else if (flag == "--condition") {
      o.condition = parse_real(flag, value);
      if (!(o.condition >= 1.0)) throw dfmp2::InputError(fmt::format("{}: expected a number >= 1, got '{}'", flag, value));
    } else if (flag == "--density") {
      o.densities.clear();
      for (const auto& item : split(value)) {
        const double d = parse_real(flag, item);
        if (!(d > 0.0 && d <= 1.0)) throw dfmp2::InputError(fmt::format("{}: expected densities in (0, 1], got '{}'", flag, item));
        push_unique(o.densities, d);
      }
    } else if (flag == "--csv") {
      o.csv = value;
    } else if (flag == "--json") {
      o.json = value;
    }
  }
  if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

// An output file's folder must exist before minutes of benchmarking, not after.
void check_output_folder(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::absolute(fs::path(path)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    throw dfmp2::OutputError(fmt::format("{}: folder '{}' does not exist", flag, parent.string()));
  }
}

// ---- environment ------------------------------------------------------------------------------------------------

std::string env_or_unset(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string("unset");
}

std::string openblas_core() {
  using Fn = char* (*)();
  const auto corename = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename ? std::string(corename()) : std::string("not loaded");
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// ---- results ----------------------------------------------------------------------------------------------------

struct Row {
  std::string op, backend, dtype;
  Index size = 0;
  std::vector<double> seconds;  // timed repetitions (only the warm-up's when it failed)
  double work = 0;              // per call: flops, or samples for rng
  std::string unit = "GFLOP/s"; // or "Msample/s"
  std::string extra;
  // Optional details (NaN / -1 when they do not apply).
  double target_density = std::numeric_limits<double>::quiet_NaN();  // spmm: as asked by --density
  double density = std::numeric_limits<double>::quiet_NaN();         // spmm: as stored (at least one block)
  Index nnz = -1;
  int iterations = -1;
  double residual = std::numeric_limits<double>::quiet_NaN();
  std::string error;  // non-empty: the op failed (e.g. Newton-Schulz did not converge)

  bool ok() const { return error.empty() && !seconds.empty(); }
  double median() const {
    if (seconds.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> v = seconds;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  double min() const { return *std::min_element(seconds.begin(), seconds.end()); }
  double max() const { return *std::max_element(seconds.begin(), seconds.end()); }
  double spread() const { return seconds.empty() ? 0.0 : (max() - min()) / median(); }
  double rate() const {  // GFLOP/s or Msample/s at the median time
    if (!ok()) return std::numeric_limits<double>::quiet_NaN();
    return work / median() * (unit == "GFLOP/s" ? 1e-9 : 1e-6);
  }
};

// One warm-up call, then `repeat` timed calls; `setup` (untimed) restores the inputs before each call.
std::vector<double> time_calls(int repeat, const std::function<void()>& setup, const std::function<void()>& call) {
  std::vector<double> t;
  for (int r = 0; r <= repeat; ++r) {
    if (setup) setup();
    la::Stopwatch sw;
    call();
    const double s = sw.seconds();
    if (r > 0) t.push_back(s);
  }
  return t;
}

double logged_flops(const la::KernelLog& log) {
  double f = 0;
  for (const auto& rec : log.records()) f += rec.flops;
  return f;
}

// ---- inputs -----------------------------------------------------------------------------------------------------

template <class T>
la::MatrixT<T> random_matrix(Index rows, Index cols, std::uint64_t stream) {
  la::MatrixT<T> m(rows, cols);
  la::PhiloxStream(kSeed, stream).parallel_uniform(m.data(), static_cast<std::size_t>(m.size()));
  m.array() = m.array() * T(2) - T(1);  // uniform in (-1, 1)
  return m;
}

// The SPD test matrix of order n: A = Q diag(w) Q^T, Q a random orthogonal matrix (QR of a Gaussian matrix), w
// log-spaced from 1 down to 1/condition; and its Cholesky factor L (for trsm). Made once per size, in fp64.
struct SpdInput {
  la::Matrix a, l;
};

SpdInput make_spd(Index n, double condition) {
  la::Matrix g(n, n);
  la::PhiloxStream(kSeed, 1000 + static_cast<std::uint64_t>(n)).parallel_normal(g.data(), static_cast<std::size_t>(g.size()));
  const la::Matrix q = Eigen::HouseholderQR<la::Matrix>(g).householderQ();
  la::Vector w(n);
  for (Index k = 0; k < n; ++k) w[k] = n == 1 ? 1.0 : std::pow(condition, -double(k) / double(n - 1));
  const la::Matrix qw = q * w.asDiagonal();
  SpdInput s;
  s.a = qw * q.transpose();
  s.a = (0.5 * (s.a + s.a.transpose())).eval();
  s.l = s.a.llt().matrixL();
  return s;
}

// S (n x n) for spmm: a random choice of round(density x blocks) of the kSpmmBlock x kSpmmBlock blocks (at least
// one), each dense with entries uniform in (-1, 1); all other entries zero. CSR and BSR store the same matrix.
template <class T>
la::MatrixT<T> block_sparse_matrix(Index n, double density, std::uint64_t stream) {
  const Index nb = (n + kSpmmBlock - 1) / kSpmmBlock;
  const Index total = nb * nb;
  const Index keep = std::clamp<Index>(Index(std::llround(density * double(total))), 1, total);
  // Choose `keep` distinct blocks: a Fisher-Yates shuffle driven by Philox numbers.
  std::vector<Index> order(static_cast<std::size_t>(total));
  std::iota(order.begin(), order.end(), Index(0));
  const la::PhiloxStream rng(kSeed, stream);
  for (Index i = total - 1; i > 0; --i) {
    const Index j = std::min<Index>(i, Index(rng.uniform_at(static_cast<std::uint64_t>(i)) * double(i + 1)));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  const la::MatrixT<T> values = random_matrix<T>(n, n, stream + 1);
  la::MatrixT<T> s = la::MatrixT<T>::Zero(n, n);
  for (Index b = 0; b < keep; ++b) {
    const Index bi = order[static_cast<std::size_t>(b)] / nb, bj = order[static_cast<std::size_t>(b)] % nb;
    const Index r0 = bi * kSpmmBlock, c0 = bj * kSpmmBlock;
    const Index mr = std::min(kSpmmBlock, n - r0), mc = std::min(kSpmmBlock, n - c0);
    s.block(r0, c0, mr, mc) = values.block(r0, c0, mr, mc);
  }
  return s;
}

// ---- the ops ----------------------------------------------------------------------------------------------------

struct Context {
  const Options& o;
  std::map<Index, SpdInput>& spd;  // by size
  std::vector<Row>& rows;
};

void progress(const Row& r) {
  if (r.ok()) {
    std::cerr << fmt::format("  {:<13} {:<8} {:<4} N={:<5} {:>10.4g} s  {:>8.2f} {}{}\n", r.op, r.backend, r.dtype,
                             r.size, r.median(), r.rate(), r.unit, r.extra.empty() ? "" : "  " + r.extra);
  } else {
    std::cerr << fmt::format("  {:<13} {:<8} {:<4} N={:<5} failed: {}\n", r.op, r.backend, r.dtype, r.size, r.error);
  }
}

template <class T>
void run_dense_ops(la::Backend& backend, Context& ctx) {
  const Options& o = ctx.o;
  const std::string dtype(la::dtype_name(la::dtype_of<T>()));
  la::KernelLog log;
  la::Kernels kernels(backend, log);

  auto add = [&](Row r) {
    r.backend = backend.name();
    r.dtype = dtype;
    progress(r);
    ctx.rows.push_back(std::move(r));
  };

  for (const std::string& op : o.ops) {
    if (op == "rng") continue;
    for (const Index n : o.sizes) {
      Row row;
      row.op = op;
      row.size = n;
      log.clear();
      if (op == "gemm") {
        const auto a = random_matrix<T>(n, n, 1), b = random_matrix<T>(n, n, 2);
        la::MatrixT<T> c(n, n);
        row.seconds = time_calls(o.repeat, nullptr, [&] {
          kernels.gemm<T>("bench", la::Trans::no, la::Trans::no, T(1), la::view(a), la::view(b), T(0), la::view(c));
        });
        row.work = la::gemm_cost(n, n, n).flops;
      } else if (op == "gemm_batched") {
        const Index m = std::max<Index>(1, n / 4);
        const auto a = random_matrix<T>(m, m, 3);                // shared by every problem (stride 0)
        const auto b = random_matrix<T>(m, m * kBatchCount, 4);  // problem p: columns p m .. p m + m - 1
        la::MatrixT<T> c(m, m * kBatchCount);
        const la::BatchStrides strides{0, m * m, m * m};
        row.seconds = time_calls(o.repeat, nullptr, [&] {
          kernels.gemm_batched<T>("bench", la::Trans::no, la::Trans::no, kBatchCount, strides, T(1), la::view(a),
                                  la::ConstMatrixViewT<T>(b.data(), m, m, m), T(0),
                                  la::MatrixViewT<T>{c.data(), m, m, m});
        });
        row.work = la::gemm_batched_cost(kBatchCount, m, m, m).flops;
        row.extra = fmt::format("{} x {}^3", kBatchCount, m);
      } else if (op == "syrk") {
        const auto a = random_matrix<T>(n, n, 5);
        la::MatrixT<T> c(n, n);
        row.seconds = time_calls(o.repeat, nullptr, [&] {
          kernels.syrk<T>("bench", la::Uplo::lower, la::Trans::no, T(1), la::view(a), T(0), la::view(c));
        });
        row.work = la::syrk_cost(n, n).flops;
      } else if (op == "trsm") {
        const la::MatrixT<T> l = ctx.spd.at(n).l.template cast<T>();
        const auto b0 = random_matrix<T>(kTrsmRowsFactor * n, n, 6);
        la::MatrixT<T> b;
        row.seconds = time_calls(
            o.repeat, [&] { b = b0; },
            [&] {
              kernels.trsm<T>("bench", la::Side::right, la::Uplo::lower, la::Trans::yes, la::Diag::non_unit, T(1),
                              la::view(l), la::view(b));
            });
        row.work = la::trsm_cost(la::Side::right, double(kTrsmRowsFactor * n), double(n)).flops;
        row.extra = fmt::format("B {} x {}", kTrsmRowsFactor * n, n);
      } else if (op == "cholesky" || op == "eigh" || op == "invsqrt_eigh" || op == "invsqrt_ns") {
        const la::MatrixT<T> a0 = ctx.spd.at(n).a.template cast<T>();
        la::MatrixT<T> a;
        la::VectorT<T> w(n);
        la::InverseSqrtReport report;
        std::vector<int> iterations;
        std::function<void()> call;
        if (op == "cholesky") {
          call = [&] { kernels.cholesky<T>("bench", la::Uplo::lower, la::view(a)); };
          row.work = la::cholesky_cost(n).flops;
        } else if (op == "eigh") {
          call = [&] { kernels.eigh<T>("bench", la::view(a), w.data()); };
          row.work = la::eigh_cost(n).flops;
        } else if (op == "invsqrt_eigh") {
          call = [&] { report = la::inverse_sqrt_eigh<T>(kernels, "bench", la::view(a)); };
        } else {
          call = [&] {
            report = la::inverse_sqrt_newton_schulz<T>(kernels, "bench", la::view(a));
            iterations.push_back(report.iterations);
          };
        }
        const auto setup = [&] {
          a = a0;
          log.clear();
        };
        try {
          row.seconds = time_calls(o.repeat, setup, call);
        } catch (const dfmp2::NumericalError& e) {
          row.error = e.what();
        }
        if (op == "invsqrt_eigh" || op == "invsqrt_ns") row.work = logged_flops(log);  // of the last call
        if (op == "invsqrt_eigh" && row.ok()) row.extra = fmt::format("dropped {}", report.dropped);
        if (op == "invsqrt_ns" && !iterations.empty()) {
          row.iterations = iterations.back();
          row.residual = report.residual;
          const auto [lo, hi] = std::minmax_element(iterations.begin(), iterations.end());
          row.extra = *lo == *hi ? fmt::format("{} it, res {:.1e}", *hi, report.residual)
                                 : fmt::format("{}-{} it, res {:.1e}", *lo, *hi, report.residual);
        }
        if (op == "cholesky" || op == "eigh") row.extra = fmt::format("cond {:.0e}", o.condition);
      } else if (op == "spmm_csr" || op == "spmm_bsr") {
        const auto b = random_matrix<T>(n, n, 7);
        la::MatrixT<T> c(n, n);
        for (const double density : o.densities) {
          Row r = row;
          const auto dense = block_sparse_matrix<T>(n, density, 100 + static_cast<std::uint64_t>(density * 1e6));
          const auto csr = la::csr_from_dense(dense);
          r.nnz = csr.nnz();
          r.density = csr.density();
          r.target_density = density;
          const std::string d = std::abs(r.density - density) <= 0.05 * density
                                    ? fmt::format("d {:.3g}", r.density)
                                    : fmt::format("d {:.3g} (asked {:.3g})", r.density, density);
          if (op == "spmm_csr") {
            r.seconds = time_calls(o.repeat, nullptr, [&] {
              kernels.spmm<T>("bench", la::Trans::no, T(1), csr, la::view(b), T(0), la::view(c));
            });
            r.extra = fmt::format("{}, nnz {}", d, r.nnz);
          } else {
            const auto bsr = la::bsr_from_dense(dense, kSpmmBlock, kSpmmBlock);
            r.seconds = time_calls(o.repeat, nullptr, [&] {
              kernels.spmm<T>("bench", la::Trans::no, T(1), bsr, la::view(b), T(0), la::view(c));
            });
            r.extra = fmt::format("{}, nnz {}, {} of {} blocks", d, r.nnz, bsr.nblocks(),
                                  bsr.block_row_count() * bsr.block_col_count());
          }
          r.work = 2.0 * double(r.nnz) * double(n);  // useful flops
          add(std::move(r));
        }
        continue;
      }
      add(std::move(row));
    }
  }
}

// Philox fills on the host: N^2 numbers per size, serial (one thread) and parallel (OpenMP, --threads).
template <class T>
void run_rng(Context& ctx) {
  const Options& o = ctx.o;
  const std::string dtype(la::dtype_name(la::dtype_of<T>()));
  const la::PhiloxStream stream(kSeed, 42);
  for (const char* kind : {"uniform", "normal"}) {
    for (const bool parallel : {false, true}) {
      for (const Index n : o.sizes) {
        const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
        std::vector<T> out(count);
        const bool uniform = std::string(kind) == "uniform";
        Row row;
        row.op = fmt::format("rng_{}", kind);
        row.backend = parallel ? "host-omp" : "host";
        row.dtype = dtype;
        row.size = n;
        row.unit = "Msample/s";
        row.work = double(count);
        row.seconds = time_calls(o.repeat, nullptr, [&] {
          if (uniform && parallel) stream.parallel_uniform(out.data(), count);
          else if (uniform) stream.uniform(out.data(), count);
          else if (parallel) stream.parallel_normal(out.data(), count);
          else stream.normal(out.data(), count);
        });
        row.extra = fmt::format("{} samples, {}", count,
                                parallel ? fmt::format("{} threads", la::random_fill_uses_openmp() ? o.threads : 1)
                                         : std::string("1 thread"));
        progress(row);
        ctx.rows.push_back(std::move(row));
      }
    }
  }
}

// ---- Newton-Schulz vs eigh --------------------------------------------------------------------------------------

struct NsPoint {
  Index size;
  double t_ns, t_eigh, t_eigh_kernel;  // NaN when missing or failed
  bool ns_failed;                       // Newton-Schulz ran and threw (did not converge or diverged)
  double ratio() const { return t_ns / t_eigh; }
};

struct NsComparison {
  std::string backend, dtype;
  std::vector<NsPoint> points;
  std::string verdict;
  std::optional<Index> crossover_low, crossover_high;  // NS slower at low, faster at high and every larger size
  std::optional<double> crossover_estimate;            // log-log interpolation (or extrapolation) of ratio = 1
  bool extrapolated = false;
};

const Row* find_row(const std::vector<Row>& rows, const std::string& op, const std::string& backend,
                    const std::string& dtype, Index size) {
  for (const auto& r : rows)
    if (r.op == op && r.backend == backend && r.dtype == dtype && r.size == size) return &r;
  return nullptr;
}

NsComparison compare_ns(const std::vector<Row>& rows, const std::string& backend, const std::string& dtype,
                        const std::vector<Index>& sizes) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  NsComparison c{backend, dtype, {}, {}, {}, {}, {}, false};
  for (const Index n : sizes) {
    const Row* ns = find_row(rows, "invsqrt_ns", backend, dtype, n);
    const Row* eg = find_row(rows, "invsqrt_eigh", backend, dtype, n);
    const Row* ek = find_row(rows, "eigh", backend, dtype, n);
    c.points.push_back({n, ns && ns->ok() ? ns->median() : nan, eg && eg->ok() ? eg->median() : nan,
                        ek && ek->ok() ? ek->median() : nan, ns && !ns->error.empty()});
  }
  std::vector<Index> failed;
  for (const auto& p : c.points)
    if (p.ns_failed) failed.push_back(p.size);
  const std::string failed_note =
      failed.empty() ? std::string()
                     : fmt::format("; Newton-Schulz did not converge at N = {}", fmt::join(failed, ", "));
  std::vector<NsPoint> valid;
  for (const auto& p : c.points)
    if (std::isfinite(p.ratio())) valid.push_back(p);
  if (valid.empty()) {
    c.verdict = "no size where both ran (Newton-Schulz failed or an op was not selected)" + failed_note;
    return c;
  }
  const Index largest = valid.back().size;
  std::vector<bool> faster;
  for (const auto& p : valid) faster.push_back(p.ratio() < 1.0);
  // First index from which NS is faster at every larger measured size.
  std::size_t from = valid.size();
  while (from > 0 && faster[from - 1]) --from;
  if (from == 0) {
    c.verdict = fmt::format("Newton-Schulz is faster at every size measured (N = {} .. {})", valid.front().size, largest);
  } else if (from < valid.size()) {
    const NsPoint& lo = valid[from - 1];
    const NsPoint& hi = valid[from];
    c.crossover_low = lo.size;
    c.crossover_high = hi.size;
    const double x0 = std::log(double(lo.size)), x1 = std::log(double(hi.size));
    const double y0 = std::log(lo.ratio()), y1 = std::log(hi.ratio());
    c.crossover_estimate = std::exp(x0 + (0.0 - y0) * (x1 - x0) / (y1 - y0));
    c.verdict = fmt::format("Newton-Schulz overtakes eigh between N = {} and N = {} (about N = {:.0f}, log-log "
                            "interpolation) and stays faster up to N = {}",
                            lo.size, hi.size, *c.crossover_estimate, largest);
  } else {
    const bool ever = std::find(faster.begin(), faster.end(), true) != faster.end();
    c.verdict = fmt::format("Newton-Schulz does not overtake eigh up to N = {}{}", largest,
                            ever ? " (it is faster at some smaller size only)" : "");
    if (valid.size() >= 2) {
      // Trend: least-squares fit of log(ratio) against log(N) over every size where both ran.
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      const double m = double(valid.size());
      for (const auto& p : valid) {
        const double x = std::log(double(p.size)), y = std::log(p.ratio());
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
      }
      const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
      const double intercept = (sy - slope * sx) / m;
      const double estimate = slope < 0 ? std::exp(-intercept / slope) : 0.0;
      constexpr double kHorizon = 16;  // extrapolate at most this factor beyond the largest size
      const std::string fit = fmt::format("ratio ~ N^{:.2f} (fit over N = {} .. {})", slope, valid.front().size, largest);
      if (slope < 0 && estimate <= kHorizon * double(largest)) {
        c.crossover_estimate = estimate;
        c.extrapolated = true;
        c.verdict += fmt::format("; {}, which would reach 1 near N = {:.0f} (extrapolated, not measured)", fit, estimate);
      } else if (slope < 0) {
        c.verdict += fmt::format("; {}, falling too slowly to reach 1 below N = {:.0f} even if the trend held", fit,
                                 kHorizon * double(largest));
      } else {
        c.verdict += fmt::format("; {}, not falling with N", fit);
      }
    }
  }
  c.verdict += failed_note;
  return c;
}

// ---- output -----------------------------------------------------------------------------------------------------

std::string fmt_rate(double x) {
  if (!std::isfinite(x)) return "-";
  return x >= 100 ? fmt::format("{:.0f}", x) : x >= 10 ? fmt::format("{:.1f}", x) : fmt::format("{:.2f}", x);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string num_or_empty(double x) { return std::isfinite(x) ? fmt::format("{:.9g}", x) : std::string(); }

void write_text_file(const std::string& flag, const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) throw dfmp2::OutputError(fmt::format("{}: cannot write '{}'", flag, path));
}

int run(const Options& o) {
  // Every backend first, so an unknown name stops the run before any timing.
  const std::vector<std::string> names = o.backends.empty() ? dfmp2::devices::built_backends() : o.backends;
  std::vector<std::unique_ptr<la::Backend>> backends;
  for (const auto& name : names) backends.push_back(dfmp2::devices::make_backend(name));
  if (o.csv) check_output_folder("--csv", *o.csv);
  if (o.json) check_output_folder("--json", *o.json);

  omp_set_num_threads(o.threads);
  Eigen::setNbThreads(o.threads);
  for (auto& b : backends) b->set_threads(o.threads);

  const std::string started = utc_now();
  fmt::print("bench_ops: every op of the linear-algebra layer, through linalg::Kernels\n\n");
  fmt::print("  date               {}\n", started);
  fmt::print("  threads            {} (hardware {})\n", o.threads, std::thread::hardware_concurrency());
  fmt::print("  OPENBLAS_CORETYPE  {}\n", env_or_unset("OPENBLAS_CORETYPE"));
  fmt::print("  OPENBLAS_L2_SIZE   {}\n", env_or_unset("OPENBLAS_L2_SIZE"));
  for (const auto& b : backends) fmt::print("  backend {:<10} {}\n", b->name(), b->details());
  fmt::print("  ops                {}\n", fmt::join(o.ops, ", "));
  fmt::print("  sizes              {}\n", fmt::join(o.sizes, ", "));
  fmt::print("  dtypes             {}\n", fmt::join(o.dtypes, ", "));
  fmt::print("  repeat             {} (after one warm-up); median time, spread = (max - min) / median\n", o.repeat);
  fmt::print("  SPD matrix         Q diag(w) Q^T, w log-spaced in [1/{:.3g}, 1] (condition {:.3g})\n", o.condition,
             o.condition);
  fmt::print("  spmm densities     {} (fraction of {}x{} blocks stored)\n", fmt::join(o.densities, ", "), kSpmmBlock,
             kSpmmBlock);
  fmt::print("  parallel rng       {}\n\n", la::random_fill_uses_openmp() ? "OpenMP" : "serial (no OpenMP)");
  std::fflush(stdout);

  la::Stopwatch total_clock;
  std::vector<Row> rows;
  std::map<Index, SpdInput> spd;
  const bool need_spd = o.has("trsm") || o.has("cholesky") || o.has("eigh") || o.has("invsqrt_eigh") ||
                        o.has("invsqrt_ns");
  if (need_spd) {
    la::Stopwatch sw;
    for (const Index n : o.sizes) spd.emplace(n, make_spd(n, o.condition));
    std::cerr << fmt::format("bench_ops: SPD test matrices made in {:.2f} s\n", sw.seconds());
  }
  Context ctx{o, spd, rows};
  const bool any_backend_op = std::any_of(o.ops.begin(), o.ops.end(), [](const auto& op) { return op != "rng"; });
  if (any_backend_op) {
    for (auto& b : backends) {
      for (const auto& dt : o.dtypes) {
        if (dt == "fp64") run_dense_ops<double>(*b, ctx);
        else run_dense_ops<float>(*b, ctx);
      }
      b->release();  // idle OpenBLAS workers would otherwise compete with the next backend's threads
    }
  }
  if (o.has("rng")) {
    for (const auto& dt : o.dtypes) {
      if (dt == "fp64") run_rng<double>(ctx);
      else run_rng<float>(ctx);
    }
  }
  const double total_seconds = total_clock.seconds();

  // Table, in the order of kOps, then backend, dtype, density, size.
  auto op_rank = [](const std::string& op) {
    const std::string base = op.rfind("rng_", 0) == 0 ? "rng" : op;
    return std::find(kOps.begin(), kOps.end(), base) - kOps.begin();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (op_rank(a.op) != op_rank(b.op)) return op_rank(a.op) < op_rank(b.op);
    if (a.op != b.op) return a.op > b.op;  // rng_uniform before rng_normal
    if (a.backend != b.backend) {
      auto pos = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
      return pos(a.backend) < pos(b.backend);
    }
    if (a.dtype != b.dtype) return a.dtype == "fp64";
    const double da = std::isfinite(a.target_density) ? a.target_density : 0;
    const double db = std::isfinite(b.target_density) ? b.target_density : 0;
    if (da != db) return da < db;
    return a.size < b.size;
  });

  fmt::print("{:<13} {:<8} {:<5} {:>6} {:>11} {:>7} {:>9} {:<9}  {}\n", "op", "backend", "dtype", "N", "median s",
             "spread", "rate", "unit", "extra");
  fmt::print("{}\n", std::string(100, '-'));
  std::string previous_group;
  for (const auto& r : rows) {
    const std::string group = r.op + "/" + r.backend + "/" + r.dtype + "/" + num_or_empty(r.target_density);
    if (!previous_group.empty() && group != previous_group) fmt::print("\n");
    previous_group = group;
    if (r.ok()) {
      fmt::print("{:<13} {:<8} {:<5} {:>6} {:>11.4g} {:>6.1f}% {:>9} {:<9}  {}\n", r.op, r.backend, r.dtype, r.size,
                 r.median(), 100.0 * r.spread(), fmt_rate(r.rate()), r.unit, r.extra);
    } else {
      fmt::print("{:<13} {:<8} {:<5} {:>6} {:>11} {:>7} {:>9} {:<9}  FAILED: {}\n", r.op, r.backend, r.dtype, r.size,
                 "-", "-", "-", r.unit, r.error);
    }
  }

  // Newton-Schulz vs eigh.
  std::vector<NsComparison> comparisons;
  fmt::print("\nNewton-Schulz vs eigh (inverse square root of the SPD matrix, condition {:.3g})\n", o.condition);
  if (!o.has("invsqrt_ns") || !o.has("invsqrt_eigh")) {
    fmt::print("  needs both invsqrt_ns and invsqrt_eigh in --ops\n");
  } else {
    fmt::print("  ratio = t(invsqrt_ns) / t(invsqrt_eigh), median wall times; < 1: Newton-Schulz is faster.\n");
    fmt::print("  t(eigh) alone is the eigh kernel without the scaling and SYRK of invsqrt_eigh ('-' if not run).\n");
    for (const auto& b : backends) {
      for (const auto& dt : o.dtypes) {
        NsComparison c = compare_ns(rows, b->name(), dt, o.sizes);
        fmt::print("\n  {} {}\n", c.backend, c.dtype);
        fmt::print("    {:>6} {:>12} {:>14} {:>9} {:>14} {:>9}\n", "N", "t(NS) s", "t(inv eigh) s", "ratio",
                   "t(eigh) s", "NS/eigh");
        for (const auto& p : c.points) {
          auto s = [](double x) { return std::isfinite(x) ? fmt::format("{:.4g}", x) : std::string("-"); };
          auto q = [](double x) { return std::isfinite(x) ? fmt::format("{:.2f}", x) : std::string("-"); };
          fmt::print("    {:>6} {:>12} {:>14} {:>9} {:>14} {:>9}\n", p.size, p.ns_failed ? "failed" : s(p.t_ns),
                     s(p.t_eigh), q(p.ratio()),
                     s(p.t_eigh_kernel), q(p.t_ns / p.t_eigh_kernel));
        }
        fmt::print("    => {}\n", c.verdict);
        comparisons.push_back(std::move(c));
      }
    }
  }
  fmt::print("\ntotal benchmark time {:.1f} s\n", total_seconds);

  if (o.csv) {
    std::string text =
        "op,backend,dtype,size,repeat,median_s,min_s,max_s,spread,work_per_call,rate,unit,target_density,density,nnz,"
        "iterations,"
        "residual,extra,error\n";
    for (const auto& r : rows) {
      text += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.op, r.backend, r.dtype, r.size,
                          r.seconds.size(), num_or_empty(r.median()), r.seconds.empty() ? "" : num_or_empty(r.min()),
                          r.seconds.empty() ? "" : num_or_empty(r.max()), num_or_empty(r.spread()),
                          num_or_empty(r.work), num_or_empty(r.rate()), r.unit, num_or_empty(r.target_density), num_or_empty(r.density),
                          r.nnz >= 0 ? std::to_string(r.nnz) : "", r.iterations >= 0 ? std::to_string(r.iterations) : "",
                          num_or_empty(r.residual), csv_field(r.extra), csv_field(r.error));
    }
    write_text_file("--csv", *o.csv, text);
    fmt::print("csv  {}\n", *o.csv);
  }
  if (o.json) {
    auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
    nlohmann::json j;
    j["benchmark"] = "ops";
    j["date"] = started;
    j["threads"] = o.threads;
    j["hardware_threads"] = std::thread::hardware_concurrency();
    j["env"] = {{"OPENBLAS_CORETYPE", env_or_unset("OPENBLAS_CORETYPE")},
                {"OPENBLAS_L2_SIZE", env_or_unset("OPENBLAS_L2_SIZE")}};
    j["openblas_core"] = openblas_core();
    j["backends"] = nlohmann::json::array();
    for (const auto& b : backends) j["backends"].push_back({{"name", b->name()}, {"details", b->details()}});
    j["options"] = {{"ops", o.ops},       {"sizes", o.sizes},         {"dtypes", o.dtypes},
                    {"repeat", o.repeat}, {"condition", o.condition}, {"densities", o.densities}};
    j["conventions"] = {{"gemm_batched", fmt::format("{} problems of (N/4)^3, A shared", kBatchCount)},
                        {"trsm", fmt::format("right, lower, transposed; B {}N x N", kTrsmRowsFactor)},
                        {"spmm", fmt::format("S N x N of dense {0}x{0} blocks, B N x N; useful flops 2 nnz N", kSpmmBlock)},
                        {"rng", "N^2 samples per call"},
                        {"invsqrt", "flops = sum of the kernel flops in the KernelLog for one call"}};
    j["rows"] = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json jr = {{"op", r.op},           {"backend", r.backend}, {"dtype", r.dtype},
                           {"size", r.size},       {"seconds", r.seconds}, {"median_s", num(r.median())},
                           {"spread", num(r.spread())}, {"work_per_call", r.work}, {"rate", num(r.rate())},
                           {"unit", r.unit},       {"extra", r.extra}};
      if (std::isfinite(r.target_density)) jr["target_density"] = r.target_density;
      if (std::isfinite(r.density)) jr["density"] = r.density;
      if (r.nnz >= 0) jr["nnz"] = r.nnz;
      if (r.iterations >= 0) jr["iterations"] = r.iterations;
      if (std::isfinite(r.residual)) jr["residual"] = r.residual;
      if (!r.error.empty()) jr["error"] = r.error;
      j["rows"].push_back(jr);
    }
    j["newton_schulz_vs_eigh"] = nlohmann::json::array();
    for (const auto& c : comparisons) {
      nlohmann::json pts = nlohmann::json::array();
      for (const auto& p : c.points)
        pts.push_back({{"size", p.size},
                       {"t_newton_schulz", num(p.t_ns)},
                       {"newton_schulz_failed", p.ns_failed},
                       {"t_invsqrt_eigh", num(p.t_eigh)},
                       {"t_eigh_kernel", num(p.t_eigh_kernel)},
                       {"ratio", num(p.ratio())}});
      nlohmann::json jc = {{"backend", c.backend}, {"dtype", c.dtype}, {"points", pts}, {"verdict", c.verdict}};
      jc["crossover_between"] = c.crossover_low ? nlohmann::json({*c.crossover_low, *c.crossover_high}) : nlohmann::json(nullptr);
      jc["crossover_estimate"] = c.crossover_estimate ? nlohmann::json(*c.crossover_estimate) : nlohmann::json(nullptr);
      jc["crossover_extrapolated"] = c.extrapolated;
      j["newton_schulz_vs_eigh"].push_back(jc);
    }
    j["total_seconds"] = total_seconds;
    write_text_file("--json", *o.json, j.dump(2) + "\n");
    fmt::print("json {}\n", *o.json);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto options = parse_args(argc, argv);
    if (!options) {
      std::cout << kUsage;
      return 0;
    }
    return run(*options);
  } catch (const dfmp2::Error& e) {
    std::cerr << "bench_ops: " << e.what() << '\n';
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "bench_ops: " << e.what() << '\n';
    return 1;
  }
}
