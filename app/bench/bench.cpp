// `dfmp2 bench`: the four modes (kernels, dfmp2, trace, calibration) and their tables.
#include "app/bench/bench.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "app/bench/calls.hpp"
#include "app/bench/newton_schulz.hpp"
#include "app/bench/output.hpp"
#include "app/bench/trace.hpp"
#include "app/report.hpp"
#include "app/results.hpp"
#include "app/run.hpp"
#include "chem/mp2/mp2.hpp"
#include "devices/neuron/calibration.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app::bench {

namespace fs = std::filesystem;
using linalg::Index;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Formatting

std::string num(double v) { return fmt::format("{:.9g}", v); }
std::string ms(double seconds) { return fmt::format("{:.3f}", seconds * 1e3); }
std::string opt_num(bool present, double v) { return present ? num(v) : std::string(); }

// A device backend's compile cache: the --compile-cache folder, or a fresh temporary folder per backend instance
// (removed with it), so the first call of each cell is a real cold call.
class CacheFolder {
 public:
  explicit CacheFolder(const std::string& persistent) {
    if (!persistent.empty()) {
      path_ = persistent;
      return;
    }
    std::string pattern = (fs::temp_directory_path() / "dfmp2-bench-cache-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw OutputError("--compile-cache: cannot make a temporary folder");
    path_ = pattern;
    owned_ = true;
  }
  ~CacheFolder() {
    if (owned_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  CacheFolder(const CacheFolder&) = delete;
  CacheFolder& operator=(const CacheFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

// A backend with its own compile cache folder and threads set.
struct BackendSession {
  std::unique_ptr<CacheFolder> cache;
  std::unique_ptr<linalg::Backend> backend;
};

BackendSession open_backend(const std::string& name, const BenchOptions& o) {
  BackendSession s;
  s.cache = std::make_unique<CacheFolder>(o.compile_cache);
  devices::DeviceOptions device;
  device.compile_cache = s.cache->path();
  s.backend = devices::make_backend(name, device);
  s.backend->set_threads(o.threads);
  return s;
}

// The modelled-time columns shared by the kernel and trace tables.
const std::vector<std::string> kModelColumns = {
    "model_cold_s",       "model_warm_s",    "model_tflops",       "peak_fraction",     "cold_compile_s",
    "cold_launches",      "cold_compiles",   "warm_dispatch_s",    "warm_transfer_s",   "warm_dma_s",
    "warm_compute_s",     "warm_host_s",     "warm_compile_s",     "warm_launches"};

std::vector<std::string> model_cells(const Timing& t) {
  if (!t.modelled) return std::vector<std::string>(kModelColumns.size());
  const double tflops = t.warm.total > 0 ? t.flops / t.warm.total / 1e12 : 0;
  return {num(t.cold.total),
          num(t.warm.total),
          t.flops > 0 ? num(tflops) : "",
          t.flops > 0 && t.peak_flops > 0 ? num(tflops * 1e12 / t.peak_flops) : "",
          num(t.cold.compile),
          std::to_string(t.cold.launches),
          std::to_string(t.cold.compiles),
          num(t.warm.dispatch),
          num(t.warm.transfer),
          num(t.warm.dma),
          num(t.warm.compute),
          num(t.warm.host),
          num(t.warm.compile),
          std::to_string(t.warm.launches)};
}

// ---------------------------------------------------------------------------------------------------------------
// Kernels mode

struct Cell {
  std::string op;  // as the table names it (gemm_df:fit, gemm_df:pair)
  CallSpec call;
  Index size = 0;
  std::optional<double> density;
};

// The calls one --ops name stands for at size n (bench/README.md, "dfmp2 bench", lists them).
std::vector<Cell> cells_for(const std::string& op, Index n, const BenchOptions& o) {
  std::vector<Cell> out;
  auto make = [&](const std::string& label, CallSpec c, std::optional<double> density = {}) {
    c.op = c.op.empty() ? op : c.op;
    out.push_back(Cell{label, c, n, density});
  };
  CallSpec c;
  if (op == "gemm") {
    c.m = c.n = c.k = n;
    make(op, c);
  } else if (op == "gemm_df") {
    // n = nbasis with the synthetic shapes' proportions: nocc = n/8, nvir = n - nocc, naux = 3n.
    const Index nocc = std::max<Index>(1, n / 8), nvir = n - nocc, naux = 3 * n, occ_block = std::min<Index>(nocc, 8);
    CallSpec fit;
    fit.op = "gemm";
    fit.m = nocc * nvir, fit.n = naux, fit.k = naux;
    make("gemm_df:fit", fit);
    CallSpec pair;
    pair.op = "gemm";
    pair.m = pair.n = occ_block * nvir, pair.k = naux, pair.trans_b = true;
    make("gemm_df:pair", pair);
  } else if (op == "gemm_batched") {
    c.count = o.batch_count, c.m = n, c.n = std::max<Index>(1, n / 4), c.k = n;
    make(op, c);
  } else if (op == "syrk") {
    c.n = c.k = n;
    make(op, c);
  } else if (op == "trsm") {
    c.m = c.n = n, c.side = linalg::Side::right, c.trsm_trans = true;
    make(op, c);
  } else if (op == "trsm_left") {
    c.m = c.n = n, c.side = linalg::Side::left, c.trsm_trans = false;
    make(op, c);
  } else if (op == "random") {
    c.n = n * n;
    make(op, c);
  } else if (op == "spmm_csr" || op == "spmm_bsr") {
    for (const double d : o.densities) {
      c.m = c.n = c.k = n, c.density = d, c.block = o.bsr_block;
      make(op, c, d);
    }
  } else {  // cholesky, eigh, invsqrt_eigh, invsqrt_ns
    c.n = n, c.condition = o.condition;
    make(op, c);
  }
  return out;
}

struct KernelResult {
  Cell cell;
  std::string backend, precision;
  Timing timing;
};

std::vector<KernelResult> run_kernels(const BenchOptions& o) {
  // Every cell's support is checked before any runs, so a refusal costs nothing and prints nothing.
  std::vector<KernelResult> plan;
  for (const auto& backend_name : o.backends) {
    BackendSession probe = open_backend(backend_name, o);
    for (const auto& precision : o.precisions) {
      for (const auto& op : o.ops) {
        for (const Index n : o.sizes) {
          for (const Cell& cell : cells_for(op, n, o)) {
            // random runs on the host: one row per precision, under the first backend only.
            if (op == "random" && backend_name != o.backends.front()) continue;
            if (op == "random" && (precision == "bf16" || precision == "bf16x3")) continue;
            KernelResult r{cell, op == "random" ? "host" : backend_name, precision, {}};
            const std::string reason = unsupported_reason(*probe.backend, cell.call, precision);
            if (!reason.empty()) {
              if (!o.allow_fallback) throw UnsupportedError(reason + "; --allow-fallback marks such cells instead");
              r.timing.status = CellStatus::unsupported;
              r.timing.note = reason;
            }
            plan.push_back(r);
          }
        }
      }
    }
  }
  for (auto& r : plan) {
    if (r.timing.status != CellStatus::ok) continue;
    BackendSession s = open_backend(r.backend == "host" ? o.backends.front() : r.backend, o);
    linalg::KernelLog log;
    linalg::Kernels kernels(*s.backend, log);
    kernels.set_matmul_mode(matmul_mode_of(r.precision));
    const PreparedCall call = prepare_call(r.cell.call, r.precision == "fp64", o.seed);
    try {
      r.timing = measure(kernels, call, o.warmup, o.repeat);
    } catch (const NumericalError& e) {
      // A measurement, not a calculation: the cell says it failed and why, and the others still run.
      r.timing = Timing{};
      r.timing.status = CellStatus::failed;
      r.timing.note = e.what();
    }
    if (call.host_only) r.timing.modelled = false;
    s.backend->release();
  }
  return plan;
}

Table kernel_table(const std::vector<KernelResult>& results) {
  Table t;
  t.columns = {"op", "shape", "size", "density", "backend", "precision", "status", "calls", "median_s", "min_s",
               "max_s", "spread_pct", "gflops", "samples_per_s"};
  t.columns.insert(t.columns.end(), kModelColumns.begin(), kModelColumns.end());
  t.columns.push_back("note");
  for (const auto& r : results) {
    const Timing& x = r.timing;
    const bool ok = x.status == CellStatus::ok;
    std::vector<std::string> row = {
        r.cell.op, r.cell.call.shape_label(), std::to_string(r.cell.size), r.cell.density ? num(*r.cell.density) : "",
        r.backend, r.precision, status_name(x.status), ok ? std::to_string(x.calls) : "",
        opt_num(ok, x.median), opt_num(ok, x.min), opt_num(ok, x.max),
        ok && x.median > 0 ? num((x.max - x.min) / x.median * 100) : "",
        ok && x.flops > 0 && x.median > 0 ? num(x.flops / x.median / 1e9) : "",
        ok && x.samples > 0 && x.median > 0 ? num(x.samples / x.median) : ""};
    const auto m = model_cells(x);
    row.insert(row.end(), m.begin(), m.end());
    row.push_back(x.note);
    t.add(row);
  }
  return t;
}

std::string kernel_text(const std::vector<KernelResult>& results) {
  std::vector<std::vector<std::string>> measured, modelled;
  for (const auto& r : results) {
    const Timing& x = r.timing;
    const std::string density = r.cell.density ? fmt::format("{:g}", *r.cell.density) : "";
    if (x.status != CellStatus::ok) {
      measured.push_back({r.cell.op, r.cell.call.shape_label(), density, r.backend, r.precision, status_name(r.timing.status)});
      continue;
    }
    std::string rate = "-";
    if (x.flops > 0 && x.median > 0) rate = fmt::format("{:.2f} GFLOP/s", x.flops / x.median / 1e9);
    if (x.samples > 0 && x.median > 0) rate = fmt::format("{:.1f} Msample/s", x.samples / x.median / 1e6);
    measured.push_back({r.cell.op, r.cell.call.shape_label(), density, r.backend, r.precision, std::to_string(x.calls),
                        ms(x.median), ms(x.min), ms(x.max), rate});
    if (x.modelled) {
      const double tflops = x.warm.total > 0 ? x.flops / x.warm.total / 1e12 : 0;
      modelled.push_back({r.cell.op, r.cell.call.shape_label(), density, r.backend, r.precision, ms(x.cold.total),
                          ms(x.warm.total), fmt::format("{:.3f}", tflops),
                          x.peak_flops > 0 ? fmt::format("{:.1f}%", tflops * 1e12 / x.peak_flops * 100) : "-",
                          ms(x.warm.dispatch), ms(x.warm.transfer), ms(x.warm.dma), ms(x.warm.compute),
                          ms(x.warm.host), ms(x.cold.compile)});
    }
  }
  std::string out = "Kernels: measured host time per call (ms; median, min, max of the timed calls)\n";
  out += format_text_table({"op", "shape", "density", "backend", "precision", "calls", "median", "min", "max", "rate"},
                           measured);
  if (!modelled.empty()) {
    out += "\nDevice models: modelled time per call (ms; cold = first call with its compile, warm = the timed calls;"
           " breakdown of a warm call)\n";
    out += format_text_table({"op", "shape", "density", "backend", "precision", "cold", "warm", "TFLOPS", "of peak",
                              "dispatch", "transfer", "dma", "compute", "host", "cold compile"},
                             modelled);
  }
  return out;
}

// Newton-Schulz against eigh, per backend and precision that ran both inverse square roots (newton_schulz.hpp).
std::vector<NsComparison> newton_schulz_comparisons(const std::vector<KernelResult>& results, const BenchOptions& o) {
  const bool both = std::count(o.ops.begin(), o.ops.end(), "invsqrt_ns") && std::count(o.ops.begin(), o.ops.end(), "invsqrt_eigh");
  std::vector<NsComparison> out;
  if (!both) return out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto find = [&](const std::string& op, const std::string& backend, const std::string& precision,
                  Index n) -> const KernelResult* {
    for (const auto& r : results)
      if (r.cell.op == op && r.backend == backend && r.precision == precision && r.cell.size == n) return &r;
    return nullptr;
  };
  auto median_of = [&](const KernelResult* r) {
    return r != nullptr && r->timing.status == CellStatus::ok ? r->timing.median : nan;
  };
  for (const auto& backend : o.backends) {
    for (const auto& precision : o.precisions) {
      std::vector<NsPoint> points;
      bool any = false;
      for (const Index n : o.sizes) {
        const KernelResult* ns = find("invsqrt_ns", backend, precision, n);
        const KernelResult* eg = find("invsqrt_eigh", backend, precision, n);
        any = any || (ns != nullptr && ns->timing.status != CellStatus::unsupported);
        points.push_back({n, median_of(ns), median_of(eg), median_of(find("eigh", backend, precision, n)),
                          ns != nullptr && ns->timing.status == CellStatus::failed});
      }
      if (any) out.push_back(compare_newton_schulz(backend, precision, std::move(points)));
    }
  }
  return out;
}

std::vector<Series> kernel_series(const std::vector<KernelResult>& results) {
  std::map<std::string, Series> by_label;
  std::vector<std::string> order;
  for (const auto& r : results) {
    if (r.timing.status != CellStatus::ok) continue;
    std::string label = fmt::format("{} {} {}", r.cell.op, r.backend, r.precision);
    if (r.cell.density) label += fmt::format(" d={:g}", *r.cell.density);
    if (r.timing.modelled) label += " (modelled)";
    if (!by_label.count(label)) order.push_back(label);
    Series& s = by_label[label];
    s.label = label;
    s.points.emplace_back(double(r.cell.size), r.timing.modelled ? r.timing.warm.total : r.timing.median);
  }
  std::vector<Series> out;
  for (const auto& l : order) out.push_back(by_label[l]);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// DF-MP2 mode

const std::vector<std::string>& kSteps = chem::matmul_steps();  // the DF-MP2 steps, from their one name table

struct Dfmp2Result {
  std::string shape, backend, precision, note;
  CellStatus status = CellStatus::ok;
  chem::SyntheticShape dims;
  int runs = 0;
  double wall_median = 0, wall_min = 0, wall_max = 0;
  std::map<std::string, double> step_seconds;  // median over the timed runs
  double correlation = 0, opposite_spin = 0, same_spin = 0;
  bool modelled = false;
  double model_cold = 0, model_warm = 0;
  std::map<std::string, double> model_steps;  // warm
};

chem::Precision precision_of(const std::string& p) {
  if (p == "fp64") return chem::Precision::fp64;
  if (p == "fp32") return chem::Precision::fp32;
  if (p == "mixed") return chem::Precision::mixed;
  if (p == "bf16x3") return chem::Precision::bf16x3;
  return chem::Precision::bf16;
}

// A cell as the program would run it (app/run.hpp): the synthetic shape as an input on one backend in one precision,
// within the default `memory`, so that the memory plan, the check of what the backend can run and DF-MP2's options
// are the command line's.
Input cell_input(const Dfmp2Result& r, const BenchOptions& o) {
  Input in;
  in.path = "dfmp2 bench";
  in.synthetic = r.dims;
  in.synthetic_name = r.shape;
  in.backends = {r.backend};
  in.precisions = {precision_of(r.precision)};
  if (o.threads > 0) in.threads = o.threads;
  in.resident_at_start = resident_bytes();
  return in;
}

std::vector<Dfmp2Result> run_dfmp2_mode(const BenchOptions& o) {
  std::vector<Dfmp2Result> cells;
  for (const auto& backend_name : o.backends)
    for (const auto& precision : o.precisions)
      for (const auto& shape : o.shapes) {
        Dfmp2Result r;
        r.shape = shape, r.backend = backend_name, r.precision = precision;
        r.dims = *chem::named_synthetic_shape(shape);
        cells.push_back(r);
      }
  // What a backend cannot run is found for every cell before any runs.
  for (auto& r : cells) {
    BackendSession probe = open_backend(r.backend, o);
    try {
      check_backend_can_run(cell_input(r, o), *probe.backend, nullptr);
    } catch (const UnsupportedError& e) {
      if (!o.allow_fallback) throw UnsupportedError(std::string(e.what()) + "; --allow-fallback marks such runs instead");
      r.status = CellStatus::unsupported;
      r.note = e.what();
    }
  }
  linalg::SerialComm alone;
  for (auto& r : cells) {
    if (r.status != CellStatus::ok) continue;
    const Input in = cell_input(r, o);
    BackendSession s = open_backend(r.backend, o);  // kept over the repetitions: the first is cold, the rest warm
    const Reference reference = make_reference(in);
    const MemoryPlan plan = make_memory_plan(in, reference, {s.backend.get()}, 1, in.resident_at_start);
    check_scratch(plan);
    const chem::DfMp2Options options = dfmp2_options(in, reference, alone);
    std::vector<double> walls, model_totals;
    std::map<std::string, std::vector<double>> steps, model_steps;
    for (int i = 0; i < o.warmup + o.repeat; ++i) {
      const BackendRun run = run_dfmp2_on(*s.backend, nullptr, in.precisions.front(), in, reference, plan, options);
      const double modelled = run.log.wall_with_modelled_kernels(run.wall_seconds);
      std::map<std::string, double> step_t, step_m;
      for (const auto& rec : run.log.records()) {
        step_t[rec.step] += rec.seconds;
        step_m[rec.step] += rec.modelled ? rec.model.total : rec.seconds;
      }
      r.modelled = run.log.any_modelled();
      if (i == 0) r.model_cold = modelled;
      r.correlation = run.result.correlation();
      r.opposite_spin = run.result.opposite_spin;
      r.same_spin = run.result.same_spin;
      if (i < o.warmup) continue;
      walls.push_back(run.wall_seconds);
      model_totals.push_back(modelled);
      for (const auto& step : kSteps) {
        steps[step].push_back(step_t[step]);
        model_steps[step].push_back(step_m[step]);
      }
    }
    s.backend->release();
    r.runs = o.repeat;
    r.wall_median = median(walls);
    r.wall_min = *std::min_element(walls.begin(), walls.end());
    r.wall_max = *std::max_element(walls.begin(), walls.end());
    r.model_warm = median(model_totals);
    for (const auto& step : kSteps) {
      r.step_seconds[step] = median(steps[step]);
      r.model_steps[step] = median(model_steps[step]);
    }
  }
  return cells;
}

// The run a result's energy is judged against, by the program's own rule (app/report.hpp accuracy_reference) over
// the runs of the same shape.
const Dfmp2Result* energy_reference(const std::vector<Dfmp2Result>& results, const Dfmp2Result& r) {
  std::vector<RunKey> keys;
  std::vector<const Dfmp2Result*> same_shape;
  std::size_t me = 0;
  for (const auto& o : results) {
    if (o.status != CellStatus::ok || o.shape != r.shape) continue;
    if (&o == &r) me = keys.size();
    keys.push_back({o.backend, precision_of(o.precision)});
    same_shape.push_back(&o);
  }
  const auto i = accuracy_reference(keys, me);
  return i ? same_shape[*i] : nullptr;
}

std::string energy_error(const std::vector<Dfmp2Result>& results, const Dfmp2Result& r, bool with_reference) {
  const Dfmp2Result* ref = r.status == CellStatus::ok ? energy_reference(results, r) : nullptr;
  if (ref == nullptr) return with_reference ? "-" : "";
  const std::string err = fmt::format("{:.3e}", r.correlation - ref->correlation);
  return with_reference ? fmt::format("{} ({} {})", err, ref->backend, ref->precision) : err;
}

Table dfmp2_table(const std::vector<Dfmp2Result>& results) {
  Table t;
  t.columns = {"shape", "nbasis", "nocc", "naux", "backend", "precision", "status", "runs", "wall_median_s",
               "wall_min_s", "wall_max_s"};
  for (const auto& s : kSteps) t.columns.push_back(s + "_s");
  t.columns.insert(t.columns.end(), {"correlation_energy", "opposite_spin_energy", "same_spin_energy",
                                     "correlation_error", "error_against", "model_cold_s", "model_warm_s"});
  for (const auto& s : kSteps) t.columns.push_back("model_" + s + "_s");
  t.columns.push_back("note");
  for (const auto& r : results) {
    const bool ok = r.status == CellStatus::ok;
    std::vector<std::string> row = {r.shape, std::to_string(r.dims.nbasis), std::to_string(r.dims.nocc),
                                    std::to_string(r.dims.naux), r.backend, r.precision, status_name(r.status),
                                    ok ? std::to_string(r.runs) : "", opt_num(ok, r.wall_median),
                                    opt_num(ok, r.wall_min), opt_num(ok, r.wall_max)};
    for (const auto& s : kSteps) row.push_back(ok ? num(r.step_seconds.at(s)) : "");
    for (const double e : {r.correlation, r.opposite_spin, r.same_spin}) row.push_back(ok ? fmt::format("{:.15g}", e) : "");
    const Dfmp2Result* ref = ok ? energy_reference(results, r) : nullptr;
    row.push_back(ref ? fmt::format("{:.6e}", r.correlation - ref->correlation) : "");
    row.push_back(ref ? ref->backend + " " + ref->precision : "");
    row.push_back(opt_num(ok && r.modelled, r.model_cold));
    row.push_back(opt_num(ok && r.modelled, r.model_warm));
    for (const auto& s : kSteps) row.push_back(ok && r.modelled ? num(r.model_steps.at(s)) : "");
    row.push_back(r.note);
    t.add(row);
  }
  return t;
}

std::string dfmp2_text(const std::vector<Dfmp2Result>& results) {
  std::vector<std::vector<std::string>> rows, modelled;
  for (const auto& r : results) {
    const std::string dims = fmt::format("{}/{}/{}", r.dims.nbasis, r.dims.nocc, r.dims.naux);
    if (r.status != CellStatus::ok) {
      rows.push_back({r.shape, dims, r.backend, r.precision, status_name(r.status)});
      continue;
    }
    std::vector<std::string> row = {r.shape, dims, r.backend, r.precision, std::to_string(r.runs),
                                    fmt::format("{:.4f}", r.wall_median), fmt::format("{:.4f}", r.wall_min),
                                    fmt::format("{:.4f}", r.wall_max)};
    for (const auto& s : kSteps) row.push_back(fmt::format("{:.4f}", r.step_seconds.at(s)));
    row.push_back(fmt::format("{:.12f}", r.correlation));
    row.push_back(energy_error(results, r, true));
    rows.push_back(row);
    if (r.modelled) {
      std::vector<std::string> m = {r.shape, dims, r.backend, r.precision, fmt::format("{:.4f}", r.model_cold),
                                    fmt::format("{:.4f}", r.model_warm)};
      for (const auto& s : kSteps) m.push_back(fmt::format("{:.4f}", r.model_steps.at(s)));
      modelled.push_back(m);
    }
  }
  std::string out = "DF-MP2 on synthetic shapes (nbasis/nocc/naux): measured wall seconds (median, min, max) and "
                    "per step (median), correlation energy (Eh)\n";
  std::vector<std::string> header = {"shape", "dims", "backend", "precision", "runs", "wall", "min", "max"};
  header.insert(header.end(), kSteps.begin(), kSteps.end());
  header.insert(header.end(), {"E_corr", "error (against)"});
  out += format_text_table(header, rows);
  if (!modelled.empty()) {
    out += "\nDevice models: modelled seconds (cold = first run with its compiles; warm = median of the timed runs, "
           "per step)\n";
    std::vector<std::string> model_header = {"shape", "dims", "backend", "precision", "cold", "warm"};
    model_header.insert(model_header.end(), kSteps.begin(), kSteps.end());
    out += format_text_table(model_header, modelled);
  }
  return out;
}

std::vector<Series> dfmp2_series(const std::vector<Dfmp2Result>& results) {
  std::map<std::string, Series> by_label;
  std::vector<std::string> order;
  for (const auto& r : results) {
    if (r.status != CellStatus::ok) continue;
    const std::string label = fmt::format("dfmp2 {} {}{}", r.backend, r.precision, r.modelled ? " (modelled)" : "");
    if (!by_label.count(label)) order.push_back(label);
    by_label[label].label = label;
    by_label[label].points.emplace_back(double(r.dims.nbasis), r.modelled ? r.model_warm : r.wall_median);
  }
  std::vector<Series> out;
  for (const auto& l : order) out.push_back(by_label[l]);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Trace mode

struct TraceEntryResult {
  const TraceEntry* entry = nullptr;
  std::string precision, note;
  CellStatus status = CellStatus::ok;
  Timing timing;  // per pass of the entry (its `repeat` calls together)
};

struct TraceRun {
  std::string backend, precision;
  std::vector<TraceEntryResult> entries;
  Timing total;  // per pass of the whole trace
};

std::vector<TraceRun> run_trace(const Trace& trace, const BenchOptions& o, const std::vector<std::string>& precisions) {
  std::vector<TraceRun> runs;
  for (const auto& backend_name : o.backends) {
    for (const auto& precision : precisions) {
      TraceRun run;
      run.backend = backend_name, run.precision = precision;
      BackendSession s = open_backend(backend_name, o);
      for (const auto& e : trace.entries) {
        TraceEntryResult er;
        er.entry = &e;
        er.precision = e.precision.empty() ? precision : e.precision;
        er.note = unsupported_reason(*s.backend, e.call, er.precision);
        if (!er.note.empty()) {
          if (!o.allow_fallback) {
            throw UnsupportedError(fmt::format("{}: entry '{}': {}; --allow-fallback marks such entries instead",
                                               trace.path, e.label, er.note));
          }
          er.status = CellStatus::unsupported;
        }
        run.entries.push_back(er);
      }
      runs.push_back(std::move(run));
    }
  }
  for (auto& run : runs) {
    BackendSession s = open_backend(run.backend, o);
    linalg::KernelLog log;
    linalg::Kernels k(*s.backend, log);
    std::vector<PreparedCall> calls;
    for (const auto& er : run.entries) {
      calls.push_back(er.status == CellStatus::ok ? prepare_call(er.entry->call, er.precision == "fp64", o.seed) : PreparedCall{});
    }
    // Passes over the whole trace: the first is cold (every signature new to this backend instance); `warmup`
    // passes in all are untimed, then `repeat` timed ones.
    const int passes = std::max(1, o.warmup) + o.repeat;
    std::vector<std::vector<double>> seconds(run.entries.size()), model(run.entries.size());
    std::vector<std::vector<linalg::ModelledTime>> breakdown(run.entries.size());
    std::vector<double> total_seconds, total_model;
    linalg::ModelledTime total_cold;
    for (int pass = 0; pass < passes; ++pass) {
      const bool timed = pass >= std::max(1, o.warmup);
      double pass_seconds = 0, pass_model = 0;
      for (std::size_t i = 0; i < run.entries.size(); ++i) {
        auto& er = run.entries[i];
        if (er.status != CellStatus::ok) continue;
        // The entry's operand format (fp32, bf16, bf16x3), handed to the backend before each of its calls.
        k.set_matmul_mode(matmul_mode_of(er.precision));
        double entry_seconds = 0, entry_flops = 0;
        linalg::ModelledTime entry_model;
        bool modelled = false;
        for (int c = 0; c < er.entry->repeat; ++c) {
          calls[i].reset();
          log.clear();
          linalg::Stopwatch clock;
          calls[i].run(k);
          entry_seconds += clock.seconds();
          for (const auto& rec : log.records()) {
            entry_flops += rec.flops;  // the descriptors' costs, composites (inverse square roots) included
            if (rec.modelled) {
              modelled = true;
              entry_model += rec.model;
            } else {
              entry_model.host += rec.seconds;
              entry_model.total += rec.seconds;
            }
          }
        }
        if (calls[i].host_only) entry_model.total = entry_seconds;
        er.timing.modelled = modelled;
        er.timing.flops = entry_flops;
        er.timing.samples = calls[i].samples * er.entry->repeat;
        er.timing.peak_flops = s.backend->peak_flops(matmul_mode_of(er.precision));
        if (pass == 0) {
          er.timing.cold = entry_model;
          total_cold += entry_model;
        }
        if (timed) {
          seconds[i].push_back(entry_seconds);
          model[i].push_back(entry_model.total);
          breakdown[i].push_back(entry_model);
        }
        pass_seconds += entry_seconds;
        pass_model += entry_model.total;
      }
      if (timed) {
        total_seconds.push_back(pass_seconds);
        total_model.push_back(pass_model);
      }
    }
    for (std::size_t i = 0; i < run.entries.size(); ++i) {
      auto& t = run.entries[i].timing;
      if (run.entries[i].status != CellStatus::ok) continue;
      t.calls = o.repeat;
      t.median = median(seconds[i]);
      t.min = *std::min_element(seconds[i].begin(), seconds[i].end());
      t.max = *std::max_element(seconds[i].begin(), seconds[i].end());
      // The timed pass whose modelled total is the median, with its breakdown.
      auto sorted = breakdown[i];
      std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.total < b.total; });
      t.warm = sorted[sorted.size() / 2];
      run.total.flops += t.flops;
      run.total.modelled = run.total.modelled || t.modelled;
      run.total.warm += t.warm;
    }
    run.total.calls = o.repeat;
    run.total.median = median(total_seconds);
    run.total.min = *std::min_element(total_seconds.begin(), total_seconds.end());
    run.total.max = *std::max_element(total_seconds.begin(), total_seconds.end());
    run.total.cold = total_cold;
    run.total.warm.total = median(total_model);
    run.total.peak_flops = s.backend->peak_flops(k.matmul_mode(kBenchStep));
    s.backend->release();
  }
  return runs;
}

Table trace_table(const std::vector<TraceRun>& runs) {
  Table t;
  t.columns = {"entry", "label", "op", "shape", "calls_per_pass", "backend", "precision", "status", "passes",
               "median_s", "min_s", "max_s", "gflops"};
  t.columns.insert(t.columns.end(), kModelColumns.begin(), kModelColumns.end());
  t.columns.push_back("note");
  auto row_of = [&](const std::string& index, const std::string& label, const std::string& op, const std::string& shape,
                    const std::string& calls, const TraceRun& run, const std::string& precision,
                    CellStatus status, const Timing& x, const std::string& note) {
    const bool ok = status == CellStatus::ok;
    std::vector<std::string> row = {index, label, op, shape, calls, run.backend, precision, status_name(status),
                                    ok ? std::to_string(x.calls) : "", opt_num(ok, x.median), opt_num(ok, x.min),
                                    opt_num(ok, x.max),
                                    ok && x.flops > 0 && x.median > 0 ? num(x.flops / x.median / 1e9) : ""};
    const auto m = ok ? model_cells(x) : std::vector<std::string>(kModelColumns.size());
    row.insert(row.end(), m.begin(), m.end());
    row.push_back(note);
    t.add(row);
  };
  for (const auto& run : runs) {
    for (std::size_t i = 0; i < run.entries.size(); ++i) {
      const auto& er = run.entries[i];
      row_of(std::to_string(i + 1), er.entry->label, er.entry->call.op, er.entry->call.shape_label(),
             std::to_string(er.entry->repeat), run, er.precision, er.status, er.timing, er.note);
    }
    row_of("total", "total", "", "", "", run, run.precision, CellStatus::ok, run.total, "");
  }
  return t;
}

std::string trace_text(const Trace& trace, const std::vector<TraceRun>& runs) {
  std::string out = fmt::format("Trace {} ({} entries){}\n", trace.path, trace.entries.size(),
                                trace.description.empty() ? "" : ": " + trace.description);
  for (const auto& run : runs) {
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < run.entries.size(); ++i) {
      const auto& er = run.entries[i];
      const Timing& x = er.timing;
      std::vector<std::string> row = {std::to_string(i + 1), er.entry->label, er.entry->call.op,
                                      er.entry->call.shape_label(), std::to_string(er.entry->repeat), er.precision};
      if (er.status != CellStatus::ok) {
        row.push_back(status_name(er.status));
      } else {
        row.push_back(ms(x.median));
        row.push_back(x.modelled ? ms(x.cold.total) : "-");
        row.push_back(x.modelled ? ms(x.warm.total) : "-");
        for (const double v : {x.warm.dispatch, x.warm.transfer, x.warm.dma, x.warm.compute, x.warm.host})
          row.push_back(x.modelled ? ms(v) : "-");
      }
      rows.push_back(row);
    }
    const Timing& tot = run.total;
    rows.push_back({"", "total", "", "", "", run.precision, ms(tot.median), tot.modelled ? ms(tot.cold.total) : "-",
                    tot.modelled ? ms(tot.warm.total) : "-"});
    out += fmt::format("\n{} ({}): per pass of the trace, ms (measured host median of {} passes; modelled cold = first "
                       "pass, warm = timed passes)\n",
                       run.backend, run.precision, tot.calls);
    out += format_text_table({"#", "label", "op", "shape", "calls", "precision", "measured", "model cold",
                              "model warm", "dispatch", "transfer", "dma", "compute", "host"},
                             rows);
  }
  if (trace.published_seconds) {
    out += "\n";
    bool shown = false;
    for (const auto& run : runs) {
      if (run.backend != trace.published_device || !run.total.modelled) continue;
      shown = true;
      out += fmt::format("published {} {:.3f} s (warm)   model {} ({}) warm {:.4f} s, cold {:.4f} s   ratio model/published "
                         "{:.2f}\n",
                         trace.published_device, *trace.published_seconds, run.backend, run.precision,
                         run.total.warm.total, run.total.cold.total, run.total.warm.total / *trace.published_seconds);
    }
    if (!shown) {
      out += fmt::format("published {} {:.3f} s (warm); run with --backends {} to compare the model with it\n",
                         trace.published_device, *trace.published_seconds, trace.published_device);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Calibration mode

struct CalibrationRun {
  std::string device;
  std::vector<devices::neuron::CalibrationRow> rows;
};

Table calibration_table(const std::vector<CalibrationRun>& runs) {
  Table t;
  t.columns = {"device", "role", "kernel", "shape", "published_s", "model_s", "error_pct", "pass", "dispatch_s",
               "transfer_s", "dma_s", "compute_s", "host_s", "compile_s", "launches", "source"};
  for (const auto& run : runs) {
    for (const auto& r : run.rows) {
      const auto& m = r.modelled;
      t.add({run.device, devices::neuron::row_role_name(r.role), r.kernel, r.shape, num(r.published_s),
             num(r.model_s), num(r.error * 100), r.pass ? "true" : "false", num(m.dispatch), num(m.transfer),
             num(m.dma), num(m.compute), num(m.host), num(m.compile), std::to_string(m.launches), r.source});
    }
  }
  return t;
}

std::string calibration_text(const std::vector<CalibrationRun>& runs) {
  std::string out;
  for (const auto& run : runs) {
    std::vector<std::vector<std::string>> rows;
    namespace neuron = devices::neuron;
    int passed = 0, calibration_rows = 0;
    for (const auto& r : run.rows) {
      const bool calibration = r.role == neuron::RowRole::calibration;
      calibration_rows += calibration ? 1 : 0;
      passed += calibration && r.pass ? 1 : 0;
      rows.push_back({neuron::row_role_name(r.role), r.kernel, r.shape, ms(r.published_s), ms(r.model_s),
                      fmt::format("{:+.1f}%", r.error * 100), calibration ? (r.pass ? "PASS" : "FAIL") : ""});
    }
    out += fmt::format(
        "Device model '{}' against the published trn1 measurements (ms; calibration rows: fitted, tolerance {:.0f}%; "
        "check rows: not fitted)\n",
        run.device, neuron::kCalibrationTolerance * 100);
    out += format_text_table({"role", "kernel", "shape", "published", "model", "error", "result"}, rows);
    out += fmt::format("{} of {} calibration rows within tolerance\n", passed, calibration_rows);
    out += neuron::row_error_summary(run.rows) + "\n";
  }
  return out;
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kernels: return "kernels";
    case Mode::dfmp2: return "dfmp2";
    case Mode::trace: return "trace";
    case Mode::calibration: return "calibration";
  }
  return "?";
}

}  // namespace

int run_bench(const BenchOptions& options) {
  BenchOptions o = options;
  if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  validate(o);
  // Output folders are checked before any work, so an unwritable path costs nothing and leaves nothing.
  for (const std::string* path : {&o.csv, &o.json, &o.svg}) {
    if (!path->empty()) check_output_path(*path);
  }
  omp_set_num_threads(o.threads);

  Table table;
  std::string text;
  std::vector<Series> series;
  std::string x_label;
  nlohmann::json extra = nlohmann::json::object();
  std::vector<std::string> precisions = o.precisions;

  switch (o.mode) {
    case Mode::kernels: {
      const auto results = run_kernels(o);
      table = kernel_table(results);
      text = kernel_text(results);
      const auto ns = newton_schulz_comparisons(results, o);
      text += newton_schulz_text(ns, o.condition);
      if (!ns.empty()) extra["newton_schulz"] = newton_schulz_json(ns);
      series = kernel_series(results);
      x_label = "size n";
      break;
    }
    case Mode::dfmp2: {
      const auto results = run_dfmp2_mode(o);
      table = dfmp2_table(results);
      text = dfmp2_text(results);
      series = dfmp2_series(results);
      x_label = "nbasis (synthetic shape)";
      break;
    }
    case Mode::trace: {
      const Trace trace = read_trace(o.trace_path);
      if (!o.precisions_given && !trace.precision.empty()) precisions = {trace.precision};
      const auto runs = run_trace(trace, o, precisions);
      table = trace_table(runs);
      text = trace_text(trace, runs);
      extra["trace"] = {{"path", trace.path}, {"description", trace.description}};
      if (trace.published_seconds) {
        nlohmann::json published = {{"device", trace.published_device}, {"seconds", *trace.published_seconds}};
        for (const auto& run : runs) {
          if (run.backend == trace.published_device && run.total.modelled) {
            published["model_warm_s"] = run.total.warm.total;
            published["model_cold_s"] = run.total.cold.total;
            published["ratio_model_to_published"] = run.total.warm.total / *trace.published_seconds;
          }
        }
        extra["published"] = published;
      }
      break;
    }
    case Mode::calibration: {
      std::vector<CalibrationRun> runs;
      for (const auto& b : o.backends) {
        if (b != "trn1" && b != "trn2") continue;
        CacheFolder cache(o.compile_cache);
        runs.push_back({b, devices::neuron::run_calibration(b, cache.path())});
      }
      if (runs.empty()) runs.push_back({"trn1", devices::neuron::run_calibration("trn1")});
      table = calibration_table(runs);
      text = calibration_text(runs);
      break;
    }
  }

  if (!o.csv.empty()) write_atomically(o.csv, table.csv());
  if (!o.json.empty()) {
    nlohmann::json doc = {{"program", "dfmp2 bench"},
                          {"version", DFMP2_VERSION},
                          {"mode", mode_name(o.mode)},
                          {"settings",
                           {{"ops", o.ops},
                            {"sizes", o.sizes},
                            {"densities", o.densities},
                            {"backends", o.backends},
                            {"precision", precisions},
                            {"shapes", o.shapes},
                            {"warmup", o.warmup},
                            {"repeat", o.repeat},
                            {"threads", o.threads},
                            {"batch_count", o.batch_count},
                            {"bsr_block", o.bsr_block},
                            {"seed", o.seed},
                            {"condition", o.condition == 0 ? nlohmann::json(nullptr) : nlohmann::json(o.condition)},
                            {"allow_fallback", o.allow_fallback},
                            {"compile_cache", o.compile_cache.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.compile_cache)}}},
                          {"columns", table.columns},
                          {"rows", table.json_rows()}};
    for (const auto& [k, v] : extra.items()) doc[k] = v;
    write_atomically(o.json, doc.dump(1) + "\n");
  }
  if (!o.svg.empty()) {
    const std::string title = o.mode == Mode::dfmp2 ? "dfmp2 bench: DF-MP2 on synthetic shapes"
                                                    : "dfmp2 bench: kernel time against size";
    write_atomically(o.svg, svg_chart(title, x_label, "seconds per call (device models: modelled warm)", series));
  }
  for (const auto& [flag, path] : {std::pair{"csv", &o.csv}, {"json", &o.json}, {"svg", &o.svg}}) {
    if (!path->empty()) text += fmt::format("\n  {} written to {}", flag, *path);
  }
  if (!o.csv.empty() || !o.json.empty() || !o.svg.empty()) text += "\n";
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace dfmp2::app::bench
