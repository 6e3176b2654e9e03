#include "devices/calibration.hpp"


#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "devices/packed/packed_backend.hpp"
#include "devices/registry.hpp"
#include "linalg/kept_files.hpp"
#include "linalg/ops.hpp"

namespace dfmp2::devices {

using linalg::Index;

const std::string kCalibrationCacheHeader =
    "# dfmp2 backend calibration (README 'Backends'); measured again when the key changes\n";

double CalibrationShape::flops() const {
  return op == linalg::Op::syrk ? linalg::syrk_cost(double(n), double(k)).flops
                                : linalg::gemm_cost(double(m), double(n), double(k)).flops;
}

const std::vector<CalibrationShape>& calibration_shapes() {
  // Sized so that the set takes tens of milliseconds per backend on a current core, with every dimension large
  // enough for each backend's blocked kernels, as in the calculations the default runs.
  static const std::vector<CalibrationShape> shapes = {
      {"DF-MP2 pair energies: (ia|jb) = B_i^T B_j", linalg::Op::gemm, true, false, 768, 768, 512},
      {"DF-MP2 transformation: (Q|mn)^T C_occ", linalg::Op::gemm, true, false, 1536, 96, 512},
      {"DF-SCF exchange: a row group's C_L^T S^T", linalg::Op::gemm, false, true, 96, 1024, 320},
      {"DF-SCF exchange: K = E^T E", linalg::Op::syrk, true, false, 0, 384, 6144},
  };
  return shapes;
}

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Operands of one shape, filled with smooth values (no denormals, no zeros the kernels could skip).
struct Operands {
  std::vector<double> a, b, c;
  explicit Operands(const CalibrationShape& s) {
    const Index ka = s.op == linalg::Op::syrk ? s.k * s.n : s.m * s.k;
    a.resize(static_cast<std::size_t>(ka));
    b.resize(static_cast<std::size_t>(s.k * s.n));
    c.resize(static_cast<std::size_t>(std::max(s.m, s.n) * s.n));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37 * double(i)) * 0.5;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11 * double(i)) * 0.5;
  }
};

void run_shape(linalg::Backend& backend, const CalibrationShape& s, Operands& x) {
  using linalg::ConstMatrixView;
  using linalg::MatrixView;
  const auto t = [](bool yes) { return yes ? linalg::Trans::yes : linalg::Trans::no; };
  if (s.op == linalg::Op::syrk) {
    // op(A) = A^T: A is k x n.
    backend.run(linalg::OpCall{linalg::Syrk<double>{linalg::Uplo::lower, t(s.trans_a), 1.0,
                                                    ConstMatrixView{x.a.data(), s.k, s.n, s.k}, 0.0,
                                                    MatrixView{x.c.data(), s.n, s.n, s.n}}});
    return;
  }
  const ConstMatrixView a = s.trans_a ? ConstMatrixView{x.a.data(), s.k, s.m, s.k} : ConstMatrixView{x.a.data(), s.m, s.k, s.m};
  const ConstMatrixView b = s.trans_b ? ConstMatrixView{x.b.data(), s.n, s.k, s.n} : ConstMatrixView{x.b.data(), s.k, s.n, s.k};
  backend.run(linalg::OpCall{linalg::Gemm<double>{t(s.trans_a), t(s.trans_b), 1.0, a, b, 0.0,
                                                  MatrixView{x.c.data(), s.m, s.n, s.m}}});
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU", family, number;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    const std::string value = line.substr(colon + 2);
    if (line.rfind("model name", 0) == 0) model = value;
    else if (line.rfind("cpu family", 0) == 0) family = value;
    else if (line.rfind("model", 0) == 0 && number.empty()) number = value;
    if (line.empty()) break;
  }
  return family.empty() ? model : fmt::format("{} (family {}, model {})", model, family, number);
}

// What the figures are valid for: the CPU, each candidate's details (library, kernel set, threads), the build of
// dfmp2's own kernels.
std::string calibration_key(const std::string& cpu) {
  std::string key = "cpu " + cpu + "\n";
  for (const auto& name : built_backends()) {
    if (is_device_model(name)) continue;
    key += fmt::format("backend {}: {}\n", name, make_backend(name)->details());
  }
  key += fmt::format("own kernels built {}\n", own_kernels_build());
  key += "shapes";
  for (const auto& s : calibration_shapes()) key += fmt::format(" {}{}{}:{}x{}x{}", linalg::op_name(s.op), s.trans_a ? "t" : "n", s.trans_b ? "t" : "n", s.m, s.n, s.k);
  return key + "\n";
}

// The most a valid cache file for `key` can hold: the header, the key and one short line per candidate.
std::size_t cache_bytes_at_most(const std::string& key, std::size_t candidates) {
  return kCalibrationCacheHeader.size() + key.size() + 256 * candidates;
}

}  // namespace

std::vector<BackendRate> read_calibration_cache(const std::string& text, const std::string& key) {
  if (text.rfind(kCalibrationCacheHeader + key, 0) != 0) return {};
  std::istringstream rest(text.substr(kCalibrationCacheHeader.size() + key.size()));
  std::vector<BackendRate> rates;
  std::string word;
  BackendRate r;
  while (rest >> word >> r.backend >> r.gflops >> r.seconds) {
    if (word != "rate" || !(r.gflops > 0) || !(r.seconds > 0)) return {};
    rates.push_back(r);
  }
  return rates;
}

namespace {

std::string cache_text(const std::string& key, const std::vector<BackendRate>& rates) {
  std::string text = kCalibrationCacheHeader + key;
  for (const auto& r : rates) text += fmt::format("rate {} {:.6g} {:.6g}\n", r.backend, r.gflops, r.seconds);
  return text;
}

std::vector<Candidate> cpu_candidates() {
  std::vector<Candidate> out;
  for (const auto& name : built_backends())
    if (!is_device_model(name)) out.push_back({name, [name] { return make_backend(name); }});
  return out;
}

}  // namespace

std::vector<BackendRate> measure_rates(const std::vector<Candidate>& candidates, int passes) {
  const auto& shapes = calibration_shapes();
  double flops = 0;
  for (const auto& s : shapes) flops += s.flops();
  std::vector<Operands> operands;
  for (const auto& s : shapes) operands.emplace_back(s);
  std::vector<std::unique_ptr<linalg::Backend>> backends;
  for (const Candidate& c : candidates) backends.push_back(c.make());
  std::vector<double> best(candidates.size(), INFINITY);
  // Pass by pass, every candidate in turn: a spell of load from elsewhere hits them all alike, rather than the one
  // that happened to be measuring. Pass 0 warms the caches and the threads and is not counted.
  for (int pass = 0; pass <= passes; ++pass) {
    for (std::size_t b = 0; b < backends.size(); ++b) {
      const double start = now();
      for (std::size_t i = 0; i < shapes.size(); ++i) run_shape(*backends[b], shapes[i], operands[i]);
      if (pass > 0) best[b] = std::min(best[b], now() - start);
      backends[b]->release();  // its idle threads must not slow the next candidate
    }
  }
  std::vector<BackendRate> out;
  for (std::size_t b = 0; b < candidates.size(); ++b) out.push_back({candidates[b].name, flops / best[b] * 1e-9, best[b]});
  return out;
}

const BackendRate& fastest(const std::vector<BackendRate>& rates) {
  if (rates.empty()) throw std::logic_error("no backend was calibrated");
  const BackendRate* best = &rates.front();
  for (const auto& r : rates)
    if (r.seconds < best->seconds) best = &r;
  return *best;
}

namespace {

// Every backend named in the key has a rate, and no other: a file cut short or edited by hand is measured again.
bool covers(const std::vector<BackendRate>& rates, const std::vector<Candidate>& candidates) {
  if (rates.size() != candidates.size()) return false;
  for (std::size_t i = 0; i < rates.size(); ++i)
    if (rates[i].backend != candidates[i].name) return false;
  return true;
}

}  // namespace

Calibration calibrate(const std::vector<Candidate>& candidates, const std::string& folder, double lock_patience) {
  Calibration c;
  c.cpu = read_cpu_model();
  c.key = calibration_key(c.cpu);
  const auto measure = [&] { c.rates = measure_rates(candidates); };
  const std::string unusable = folder.empty() ? "neither XDG_CACHE_HOME nor HOME is set" : linalg::prepare_kept_folder(folder);
  if (!unusable.empty()) {
    c.note = "not cached: " + unusable;
    measure();
    return c;
  }
  const std::string name = fmt::format("backend-calibration-{:016x}.txt", std::hash<std::string>{}(c.key));
  c.file = folder + "/" + name;
  // One process measures while the others wait, then read its figures: runs that start together agree. A lock held
  // longer than the calibration could take (a run suspended during its own) is not waited for.
  const linalg::KeptLock lock(folder, "backend-calibration.lock", lock_patience);
  const linalg::KeptText kept = linalg::read_kept_file(folder, name, cache_bytes_at_most(c.key, candidates.size()));
  if (kept.text) c.rates = read_calibration_cache(*kept.text, c.key);
  c.cached = covers(c.rates, candidates);
  if (c.cached) return c;
  measure();
  std::vector<std::string> notes;
  if (!lock.held()) notes.push_back("lock not taken: " + lock.why_not());
  if (!kept.refused.empty()) notes.push_back("not read: " + kept.refused);
  try {
    linalg::write_kept_file(folder, name, cache_text(c.key, c.rates));
  } catch (const std::exception& e) {
    notes.push_back(fmt::format("not cached: {}", e.what()));
    c.file.clear();
  }
  c.note = fmt::format("{}", fmt::join(notes, "; "));
  return c;
}

const Calibration& machine_calibration() {
  static const Calibration calibration = calibrate(cpu_candidates(), linalg::user_cache_folder());
  return calibration;
}

std::string calibration_summary(const Calibration& c) {
  std::string rates;
  for (const auto& r : c.rates) rates += fmt::format("{}{} {:.1f}", rates.empty() ? "" : ", ", r.backend, r.gflops);
  std::string where = c.cached ? "cached " + c.file : c.file.empty() ? "measured now" : "measured now, cached in " + c.file;
  if (!c.note.empty()) where += "; " + c.note;
  return fmt::format("{} GFLOP/s on the DF calibration set ({}; {})", rates, where, c.cpu);
}

}  // namespace dfmp2::devices
