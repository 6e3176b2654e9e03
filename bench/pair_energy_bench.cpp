// bench_pair_energy: the DF-MP2 pair-energy step (step 4 of chem/mp2/dfmp2.hpp) on a synthetic fitted tensor, timed
// against the machine's own DGEMM rate on the same backend in the same run.
//
//   ratio = (pair-step flops / median pair-step wall time) / (2 N^3 / median DGEMM time)
//
// The pair-step flops are those of the kernels actually executed, as linalg::Kernels records them (gemm 2mnk,
// syrk n(n+1)k); the wall time is the whole step including the energy reduction. See bench/README.md.
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/input.hpp"
#include "chem/mp2/dfmp2.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "linalg/kernel_log.hpp"
#include "linalg/kernels.hpp"

namespace {

// The kernel names the pair step logs: its two ops (their descriptors) and the energy reduction on the host.
const std::string kSyrk(dfmp2::linalg::Syrk<double>::kernel), kGemm(dfmp2::linalg::Gemm<double>::kernel),
    kReduce(dfmp2::chem::kPairReduceKernel);


using dfmp2::linalg::Index;
using dfmp2::linalg::Matrix;
using dfmp2::linalg::Vector;

constexpr double kTarget = 0.8;

struct Options {
  Index nocc = 80;  // active occupied
  Index nvir = 304;
  Index naux = 1344;
  std::string backend = dfmp2::devices::default_backend();  // the run-time default, as dfmp2 without `backends`
  int threads = 0;  // 0: all cores
  double memory_bytes = 2.0 * double(1 << 30);
  std::string memory_text = "2 GiB";
  int repeat = 3;
  Index dgemm_size = 4096;
  std::optional<std::string> json;
};

constexpr const char* kUsage = R"(usage: bench_pair_energy [options]

Times the DF-MP2 pair-energy step (occupied block pairs I >= J: syrk/gemm of the fitted tensor, then the energy
reduction) on a synthetic fitted tensor, and compares its GFLOP/s with a square DGEMM on the same backend.

  --nocc N          active occupied orbitals                 (default 80)
  --nvir N          virtual orbitals                         (default 304)
  --naux N          auxiliary functions                      (default 1344)
  --backend NAME    backend to run                           (default: dfmp2's run-time default)
  --threads N       threads for the backend and the reduction (default: all cores)
  --memory SIZE     working-set bound, e.g. "2 GiB", "500 MB" or bytes; chooses the block size (default 2 GiB)
  --repeat N        timed repetitions after one warm-up      (default 3)
  --dgemm-size N    order of the reference DGEMM             (default 4096)
  --json FILE       also write the numbers as JSON to FILE
  -h, --help        this text
)";

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

// Returns nullopt when --help was asked for.
std::optional<Options> parse_args(int argc, char** argv) {
  Options o;
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
    static const std::vector<std::string> known = {"--nocc",    "--nvir",   "--naux",   "--backend",    "--threads",
                                                   "--memory",  "--repeat", "--json",   "--dgemm-size"};
    if (std::find(known.begin(), known.end(), flag) == known.end()) {
      std::string msg = fmt::format("unknown option '{}'", flag);
      if (const auto near = dfmp2::app::nearest(flag, known)) msg += fmt::format("; did you mean '{}'?", *near);
      throw dfmp2::InputError(msg + " (see --help)");
    }
    if (!have_value) {
      if (i + 1 >= argc) throw dfmp2::InputError(fmt::format("{}: missing value", flag));
      value = argv[++i];
    }
    if (flag == "--nocc") o.nocc = parse_integer(flag, value, 1);
    else if (flag == "--nvir") o.nvir = parse_integer(flag, value, 1);
    else if (flag == "--naux") o.naux = parse_integer(flag, value, 1);
    else if (flag == "--backend") o.backend = value;
    else if (flag == "--threads") o.threads = static_cast<int>(parse_integer(flag, value, 1));
    else if (flag == "--repeat") o.repeat = static_cast<int>(parse_integer(flag, value, 1));
    else if (flag == "--dgemm-size") o.dgemm_size = parse_integer(flag, value, 1);
    else if (flag == "--json") o.json = value;
    else if (flag == "--memory") {
      const auto bytes = dfmp2::app::parse_memory_size(value);
      if (!bytes) throw dfmp2::InputError(fmt::format("--memory: expected a size such as '2 GiB' or '500 MB', got '{}'", value));
      o.memory_bytes = *bytes;
      o.memory_text = value;
    }
  }
  if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

std::string env_or_unset(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string("unset");
}

// OpenBLAS's own description of the kernel it chose, if libopenblas is loaded in this process (looked up at run
// time so the benchmark does not link OpenBLAS itself).
std::string openblas_info() {
  using Fn = char* (*)();
  const auto corename = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const auto config = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (!corename || !config) return "not loaded";
  return fmt::format("core {}, config '{}'", corename(), config());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::size_t median_index(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  return idx[(idx.size() - 1) / 2];
}

void fill_uniform(Matrix& m, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  double* p = m.data();
  for (Index k = 0, n = m.size(); k < n; ++k) p[k] = dist(rng);
}

Vector linspace(Index n, double lo, double hi) {
  Vector v(n);
  for (Index k = 0; k < n; ++k) v[k] = n == 1 ? hi : lo + (hi - lo) * double(k) / double(n - 1);
  return v;
}

struct KernelSum {
  long calls = 0;
  double seconds = 0, flops = 0;
};

struct PairRun {
  double wall = 0;
  std::map<std::string, KernelSum> kernels;  // syrk, gemm, pair_reduce
  double os = 0, ss = 0;
  double kernel_flops() const {
    double f = 0;
    for (const auto& [name, k] : kernels) {
      if (name == "gemm" || name == "syrk") f += k.flops;
    }
    return f;
  }
  double get(const std::string& name) const {
    const auto it = kernels.find(name);
    return it == kernels.end() ? 0.0 : it->second.seconds;
  }
};

double gflops(double flops, double seconds) { return seconds > 0 ? flops / seconds * 1e-9 : 0.0; }

int run(const Options& o) {
  namespace la = dfmp2::linalg;
  namespace chem = dfmp2::chem;

  auto backend = dfmp2::devices::make_backend(o.backend);
  omp_set_num_threads(o.threads);
  backend->set_threads(o.threads);

  const Index rows = o.nocc * o.nvir;
  const double b_bytes = 8.0 * double(rows) * double(o.naux);
  const chem::BlockPlan plan = chem::plan_blocks(chem::ThreeIndexForm::mo, /*nbf=*/0, /*nocc=*/o.nocc, /*nact=*/o.nocc,
                                                   o.nvir, o.naux, o.memory_bytes);
  const auto pairs = chem::occupied_block_pairs(o.nocc, plan.occupied_block);
  const long diag_pairs = std::count_if(pairs.begin(), pairs.end(), [](const auto& p) { return p.diagonal(); });

  fmt::print("bench_pair_energy: DF-MP2 pair-energy step (step 4) vs DGEMM\n\n");
  fmt::print("  backend            {}\n", backend->name());
  fmt::print("  threads            {} (OpenMP max threads {}, hardware {})\n", o.threads, omp_get_max_threads(),
             std::thread::hardware_concurrency());
  if (backend->name() == "openblas") fmt::print("  OpenBLAS           {}\n", openblas_info());
  fmt::print("  OPENBLAS_CORETYPE  {}\n", env_or_unset("OPENBLAS_CORETYPE"));
  fmt::print("  OPENBLAS_L2_SIZE   {}\n", env_or_unset("OPENBLAS_L2_SIZE"));
  fmt::print("  size               nocc {}  nvir {}  naux {}  B {} x {} ({:.1f} MB)\n", o.nocc, o.nvir, o.naux, rows,
             o.naux, b_bytes / 1e6);
  fmt::print("  memory             {} ({:.0f} bytes), peak planned {:.2f} GiB\n", o.memory_text, o.memory_bytes,
             plan.peak_bytes / double(1 << 30));
  fmt::print("  occupied block     {}  block pairs {} ({} syrk, {} gemm)\n", plan.occupied_block, pairs.size(),
             diag_pairs, long(pairs.size()) - diag_pairs);
  fmt::print("  repeat             {} (after one warm-up)\n\n", o.repeat);

  // --- 1. DGEMM reference --------------------------------------------------------------------------------------
  std::vector<double> dgemm_times;
  {
    const Index n = o.dgemm_size;
    Matrix a(n, n), b(n, n), c(n, n);
    fill_uniform(a, -1.0, 1.0, 11);
    fill_uniform(b, -1.0, 1.0, 12);
    c.setZero();
    la::KernelLog log;
    la::Kernels kernels(*backend, log);
    for (int r = 0; r <= o.repeat; ++r) {
      la::Stopwatch sw;
      kernels.gemm("dgemm", la::Trans::no, la::Trans::no, 1.0, la::view(a), la::view(b), 0.0, la::view(c));
      const double t = sw.seconds();
      if (r > 0) dgemm_times.push_back(t);
    }
  }
  const double dgemm_flops = 2.0 * std::pow(double(o.dgemm_size), 3);
  const double dgemm_best = *std::min_element(dgemm_times.begin(), dgemm_times.end());
  const double dgemm_median = median(dgemm_times);
  fmt::print("DGEMM {0} x {0} x {0} ({1:.1f} GFLOP per call)\n", o.dgemm_size, dgemm_flops * 1e-9);
  fmt::print("  times (s)          {:.4f}\n", fmt::join(dgemm_times, "  "));
  fmt::print("  GFLOP/s            best {:.1f}  median {:.1f}\n\n", gflops(dgemm_flops, dgemm_best),
             gflops(dgemm_flops, dgemm_median));

  // --- 2. Pair-energy step -------------------------------------------------------------------------------------
  Matrix fitted(rows, o.naux);
  fill_uniform(fitted, -0.05, 0.05, 2026);
  const Vector eps_occ = linspace(o.nocc, -20.0, -0.3);
  const Vector eps_vir = linspace(o.nvir, 0.1, 5.0);

  Matrix workspace;  // reused across pairs and repetitions, as run_dfmp2 reuses it across pairs
  std::vector<PairRun> runs;
  for (int r = 0; r <= o.repeat; ++r) {
    la::KernelLog log;
    la::Kernels kernels(*backend, log);
    chem::PairEnergy total;
    la::Stopwatch sw;
    for (const auto& pair : pairs) total += chem::block_pair_energy(pair, fitted, eps_occ, eps_vir, kernels, workspace);
    PairRun pr;
    pr.wall = sw.seconds();
    pr.os = total.opposite_spin;
    pr.ss = total.same_spin;
    for (const auto& rec : log.records()) {
      if (rec.step != dfmp2::chem::step_name(dfmp2::chem::Mp2Step::pair_energy)) continue;
      auto& k = pr.kernels[rec.kernel];
      k.calls += rec.calls;
      k.seconds += rec.seconds;
      k.flops += rec.flops;
    }
    if (r > 0) runs.push_back(pr);
  }

  std::vector<double> walls;
  for (const auto& pr : runs) walls.push_back(pr.wall);
  const double step_flops = runs.front().kernel_flops();
  const double wall_median = median(walls);
  const double wall_best = *std::min_element(walls.begin(), walls.end());
  const PairRun& mid = runs[median_index(walls)];
  const double step_rate = gflops(step_flops, wall_median);
  const double dgemm_rate = gflops(dgemm_flops, dgemm_median);
  const double ratio = step_rate / dgemm_rate;
  const double ratio_best = gflops(step_flops, wall_best) / gflops(dgemm_flops, dgemm_best);
  double e_spread = 0;
  for (const auto& pr : runs) e_spread = std::max(e_spread, std::abs((pr.os + pr.ss) - (runs.front().os + runs.front().ss)));

  fmt::print("Pair-energy step ({:.1f} GFLOP of syrk + gemm per step)\n", step_flops * 1e-9);
  fmt::print("  {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>22}\n", "run", "wall s", "syrk s", "gemm s", "reduce s",
             "other s", "GFLOP/s", "E_corr (os + ss)");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& pr = runs[i];
    const double other = pr.wall - pr.get(kSyrk) - pr.get(kGemm) - pr.get(kReduce);
    fmt::print("  {:>4} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.1f} {:>22.12f}\n", i + 1, pr.wall,
               pr.get(kSyrk), pr.get(kGemm), pr.get(kReduce), other, gflops(step_flops, pr.wall),
               pr.os + pr.ss);
  }
  fmt::print("  energy             E_os {:.12f}  E_ss {:.12f}  (max spread over repeats {:.1e})\n", mid.os, mid.ss,
             e_spread);
  fmt::print("  kernels (run {}, the median wall time)\n", median_index(walls) + 1);
  fmt::print("    {:<12} {:>6} {:>12} {:>9} {:>9} {:>7}\n", "kernel", "calls", "GFLOP", "s", "GFLOP/s", "share");
  for (const std::string& name : {kSyrk, kGemm, kReduce}) {
    const auto it = mid.kernels.find(name);
    if (it == mid.kernels.end()) continue;
    const auto& k = it->second;
    // pair_reduce's "flops" are the 7 per element KernelLog records for the reduction, not BLAS flops.
    fmt::print("    {:<12} {:>6} {:>12.1f} {:>9.3f} {:>9.1f} {:>6.1f}%\n", name, k.calls, k.flops * 1e-9, k.seconds,
               gflops(k.flops, k.seconds), 100.0 * k.seconds / mid.wall);
  }
  fmt::print("\nResult\n");
  fmt::print("  DGEMM              {:.1f} GFLOP/s (median of {})\n", dgemm_rate, o.repeat);
  fmt::print("  pair step          {:.1f} GFLOP/s (median wall {:.3f} s)\n", step_rate, wall_median);
  fmt::print("  ratio              {:.3f} (best/best {:.3f}); target >= {:.2f}: {}\n", ratio, ratio_best, kTarget,
             ratio >= kTarget ? "PASS" : "BELOW TARGET");

  if (o.json) {
    nlohmann::json j;
    j["benchmark"] = "pair_energy";
    j["backend"] = backend->name();
    j["threads"] = o.threads;
    j["openblas"] = openblas_info();
    j["env"] = {{"OPENBLAS_CORETYPE", env_or_unset("OPENBLAS_CORETYPE")},
                {"OPENBLAS_L2_SIZE", env_or_unset("OPENBLAS_L2_SIZE")}};
    j["size"] = {{"nocc", o.nocc}, {"nvir", o.nvir}, {"naux", o.naux}};
    j["memory_bytes"] = o.memory_bytes;
    j["repeat"] = o.repeat;
    j["plan"] = {{"occupied_block", plan.occupied_block},
                 {"block_pairs", pairs.size()},
                 {"syrk_pairs", diag_pairs},
                 {"gemm_pairs", long(pairs.size()) - diag_pairs},
                 {"peak_bytes", plan.peak_bytes}};
    j["dgemm"] = {{"n", o.dgemm_size},
                  {"flops", dgemm_flops},
                  {"seconds", dgemm_times},
                  {"gflops_best", gflops(dgemm_flops, dgemm_best)},
                  {"gflops_median", dgemm_rate}};
    nlohmann::json jruns = nlohmann::json::array();
    for (const auto& pr : runs) {
      nlohmann::json k = nlohmann::json::object();
      for (const auto& [name, s] : pr.kernels) k[name] = {{"calls", s.calls}, {"seconds", s.seconds}, {"flops", s.flops}};
      jruns.push_back({{"wall_seconds", pr.wall}, {"opposite_spin", pr.os}, {"same_spin", pr.ss}, {"kernels", k}});
    }
    j["pair_step"] = {{"flops", step_flops},
                      {"runs", jruns},
                      {"wall_seconds_median", wall_median},
                      {"wall_seconds_best", wall_best},
                      {"gflops_median", step_rate}};
    j["ratio"] = ratio;
    j["ratio_best"] = ratio_best;
    j["target"] = kTarget;
    j["pass"] = ratio >= kTarget;
    std::ofstream out(*o.json);
    out << j.dump(2) << '\n';
    out.close();
    if (!out) throw dfmp2::OutputError(fmt::format("--json: cannot write '{}'", *o.json));
    fmt::print("  json               {}\n", *o.json);
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
    std::cerr << "bench_pair_energy: " << e.what() << '\n';
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "bench_pair_energy: " << e.what() << '\n';
    return 1;
  }
}
