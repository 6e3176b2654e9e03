#include "devices/neuron/calibration.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>
#include <tuple>
#include <utility>

#include "devices/neuron/neuron_backend.hpp"
#include "devices/neuron/neuron_params.hpp"
#include "devices/neuron/timing_model.hpp"

namespace dfmp2::devices::neuron {
namespace {

using linalg::Index;
using linalg::MatrixF;
using linalg::Trans;

MatrixF random_matrix(Index rows, Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  MatrixF m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = u(rng);
  return m;
}

// Where the rows are published.
constexpr const char* kShared = "shared/device/trn1_measurements.md";
constexpr const char* kTrnblasBench = "trnsci/trnblas docs/benchmarks.md (v0.4.3 rows)";
constexpr const char* kTrntensorDispatch = "trnsci/trntensor docs/design/matmul_dispatch_findings.md";

CalibrationRow row(std::string kernel, std::string shape, double published, const linalg::ModelledTime& modelled,
                   const char* source = kShared, RowRole role = RowRole::calibration) {
  CalibrationRow r;
  r.kernel = std::move(kernel);
  r.shape = std::move(shape);
  r.source = source;
  r.role = role;
  r.published_s = published;
  r.modelled = modelled;
  r.model_s = r.modelled.total;
  r.error = (r.model_s - published) / published;
  r.pass = std::abs(r.error) <= kCalibrationTolerance;
  return r;
}

// One call on the device model; its modelled cost.
linalg::ModelledTime modelled(linalg::Backend& b, const linalg::OpCall& call) { return *b.run(call).modelled; }

linalg::ModelledTime gemm_call(linalg::Backend& b, Index n, std::mt19937_64& rng) {
  const MatrixF a = random_matrix(n, n, rng), bb = random_matrix(n, n, rng);
  MatrixF c(n, n);
  return modelled(b, linalg::Gemm<float>{Trans::no, Trans::no, 1.0f, linalg::view(a), linalg::view(bb), 0.0f,
                                         linalg::view(c)});
}

linalg::ModelledTime trsm_call(linalg::Backend& b, Index m, Index n, std::mt19937_64& rng) {
  // The published library's DF-MP2 pattern: lower, transposed, from the left; a well-conditioned triangle.
  MatrixF a = random_matrix(m, m, rng);
  a.diagonal().array() += float(m);
  MatrixF x = random_matrix(m, n, rng);
  return modelled(b, linalg::Trsm<float>{linalg::Side::left, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit,
                                         1.0f, linalg::view(std::as_const(a)), linalg::view(x)});
}

linalg::ModelledTime syrk_call(linalg::Backend& b, Index m, Index k, std::mt19937_64& rng) {
  const MatrixF a = random_matrix(m, k, rng);
  MatrixF c(m, m);
  return modelled(b, linalg::Syrk<float>{linalg::Uplo::lower, Trans::no, 1.0f, linalg::view(a), 0.0f, linalg::view(c)});
}

}  // namespace

const char* row_role_name(RowRole role) { return role == RowRole::calibration ? "calibration" : "check"; }

RowErrors row_errors(const std::vector<CalibrationRow>& rows, RowRole role, bool calls_only) {
  std::vector<double> errors;
  for (const auto& r : rows)
    if (r.role == role && !(calls_only && r.step)) errors.push_back(std::abs(r.error));
  RowErrors e;
  e.rows = static_cast<int>(errors.size());
  if (errors.empty()) return e;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  e.median = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  e.largest = errors.back();
  return e;
}

std::string row_error_summary(const std::vector<CalibrationRow>& rows) {
  std::string out;
  for (const auto role : {RowRole::calibration, RowRole::check}) {
    for (const bool calls_only : {false, true}) {
      const auto e = row_errors(rows, role, calls_only);
      out += fmt::format("{} rows{}: {}, median |error| {:.1f}%, largest {:.1f}%\n", row_role_name(role),
                         calls_only ? " (whole calls)" : "", e.rows, e.median * 100, e.largest * 100);
    }
  }
  return out;
}

std::vector<CalibrationRow> run_calibration(const std::string& device, const std::string& cache_dir,
                                            const DeviceOptions& options) {
  std::mt19937_64 rng(20240611);
  std::vector<CalibrationRow> rows;
  std::string cache = cache_dir;
  const bool temporary = cache.empty();
  if (temporary) {
    static std::atomic<int> serial{0};
    cache = (std::filesystem::temp_directory_path() /
             fmt::format("dfmp2-neuron-calibration-{}-{}", ::getpid(), serial++))
                .string();
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{temporary ? cache : std::string()};

  // Warm rows: the second call of a shape in one session.
  const NeuronParams p = load_neuron_params(device, options);
  const DeviceOptions no_cache{.overrides = options.overrides, .compile_cache = {}};
  auto warm = make_neuron_backend(device, no_cache);

  // The steps of one GEMM call as trntensor timed them on trn1.2xlarge (fp32 S x S operands, warm; mean of 10):
  // both operands copied to the device (each cloned on the host first, as the profiling script does), the launch
  // submitted with its operands resident, the result copied back (unpinned and pre-pinned sweeps). The copy rows fit
  // the copy curves; the unpinned sweep's submissions up to 1024^2 fit the submission cost, and the rest of the
  // submissions (the pre-pinned sweep's, and 1536^2 and 2048^2, where the published submission grows to 0.88 and
  // 1.0 ms) are checks.
  struct StepRow {
    Index s;
    double to_device_ms, submit_ms, to_host_ms, submit_prepinned_ms, to_host_prepinned_ms;
  };
  const StepRow steps[] = {{128, 0.080, 0.680, 0.082, 0.687, 0.083},   {256, 0.105, 0.670, 0.128, 0.663, 0.124},
                           {512, 0.295, 0.672, 0.322, 0.662, 0.311},   {768, 0.703, 0.673, 0.779, 0.931, 0.748},
                           {1024, 1.502, 0.684, 0.970, 0.673, 0.924},  {1536, 3.998, 0.879, 1.859, 0.689, 1.821},
                           {2048, 7.282, 1.003, 2.960, 0.973, 3.144}};
  auto step = [&](std::string kernel, const std::string& shape, double ms, const linalg::ModelledTime& t,
                  RowRole role) {
    rows.push_back(row(std::move(kernel), shape, ms * 1e-3, t, kTrntensorDispatch, role));
    rows.back().step = true;
  };
  for (const StepRow& st : steps) {
    const double bytes = 4.0 * double(st.s) * double(st.s);
    const std::string shape = fmt::format("{0} x {0} fp32", st.s);
    linalg::ModelledTime in, out, submit;
    in.transfer = in.total = 2 * copy_seconds(p, CopyDirection::to_device, bytes);
    out.transfer = out.total = copy_seconds(p, CopyDirection::to_host, bytes);
    submit.dispatch = submit.total = p.dispatch_seconds(3);  // A, B and C
    step("copy to device (2 tensors)", shape, st.to_device_ms, in, RowRole::calibration);
    step("copy to host", shape, st.to_host_ms, out, RowRole::calibration);
    step("copy to host, pre-pinned sweep", shape, st.to_host_prepinned_ms, out, RowRole::calibration);
    step("launch submission", shape, st.submit_ms, submit, st.s <= 1024 ? RowRole::calibration : RowRole::check);
    step("launch submission, pre-pinned", shape, st.submit_prepinned_ms, submit, RowRole::check);
  }

  // First call of a session whose disk cache holds the kernel: one session compiles it into the cache, a second
  // session loads it.
  {
    const DeviceOptions with_cache{.overrides = options.overrides, .compile_cache = cache};
    auto first = make_neuron_backend(device, with_cache);
    gemm_call(*first, 1024, rng);
    auto second = make_neuron_backend(device, with_cache);
    rows.push_back(row("gemm cold, disk cache", "1024 x 1024 x 1024", 26.7e-3, gemm_call(*second, 1024, rng)));
  }
  struct SyrkRow {
    Index m, k;
    double ms;
  };
  for (const SyrkRow& s : {SyrkRow{512, 512, 2.14}, {1024, 512, 6.21}, {1024, 1024, 5.71}, {2048, 512, 23.89}}) {
    syrk_call(*warm, s.m, s.k, rng);
    rows.push_back(row("syrk", fmt::format("{} x {}", s.m, s.k), s.ms * 1e-3, syrk_call(*warm, s.m, s.k, rng)));
  }
  // Cold rows: the smallest and the largest shape, compiled (no disk cache).
  for (const SyrkRow& s : {SyrkRow{512, 512, 1600}, {2048, 512, 11400}}) {
    auto cold = make_neuron_backend(device, no_cache);
    rows.push_back(
        row("syrk cold, no cache", fmt::format("{} x {}", s.m, s.k), s.ms * 1e-3, syrk_call(*cold, s.m, s.k, rng)));
  }
  struct SpmmRow {
    Index m;
    double density;
    Index n;
    double us;
  };
  const SpmmRow spmm_rows[] = {{256, 0.001, 32, 1397},  {256, 0.001, 128, 1365},  {256, 0.01, 32, 1248},
                               {256, 0.01, 128, 1370},  {256, 0.1, 32, 1278},     {256, 0.1, 128, 1428},
                               {1024, 0.001, 32, 1732}, {1024, 0.001, 128, 2067}, {1024, 0.01, 32, 1847},
                               {1024, 0.01, 128, 2212}, {1024, 0.1, 32, 2151},    {1024, 0.1, 128, 2479}};
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (const SpmmRow& s : spmm_rows) {
    MatrixF dense = MatrixF::Zero(s.m, s.m);
    for (Index i = 0; i < dense.size(); ++i)
      if (u(rng) < s.density) dense.data()[i] = u(rng) - 0.5f;
    const auto csr = linalg::csr_from_dense(dense);
    const MatrixF b = random_matrix(s.m, s.n, rng);
    MatrixF c(s.m, s.n);
    const linalg::SpmmCsr<float> call{Trans::no, 1.0f, csr, linalg::view(b), 0.0f, linalg::view(c)};
    modelled(*warm, call);
    rows.push_back(row("spmm csr", fmt::format("{} x {}, density {}, N {}", s.m, s.m, s.density, s.n), s.us * 1e-6,
                       modelled(*warm, call)));
  }

  // Check rows: no parameter was fitted to them.
  // GEMM end to end through trnblas (the same rows shared/ lists) and through trntensor's einsum (aligned shapes:
  // no padding; two copies in, one launch, one copy out).
  for (const auto& [n, ms, source] : {std::tuple<Index, double, const char*>{512, 1.3, kShared},
                                      {1024, 2.3, kShared},
                                      {1024, 2.935, kTrntensorDispatch},
                                      {1536, 4.514, kTrntensorDispatch},
                                      {2048, 17.934, kTrntensorDispatch}}) {
    gemm_call(*warm, n, rng);
    rows.push_back(row("gemm", fmt::format("{0} x {0} x {0}", n), ms * 1e-3, gemm_call(*warm, n, rng), source,
                       RowRole::check));
  }
  // TRSM, the library's blocked solve (host panel solves, one device GEMM per panel below the first).
  for (const auto& [m, n, ms] : {std::tuple<Index, Index, double>{512, 512, 5.59},
                                 {1024, 512, 13.27},
                                 {1024, 1024, 18.72},
                                 {2048, 512, 35.82}}) {
    trsm_call(*warm, m, n, rng);
    rows.push_back(row("trsm", fmt::format("{} x {}", m, n), ms * 1e-3, trsm_call(*warm, m, n, rng), kTrnblasBench,
                       RowRole::check));
  }
  // The compile model on the TRSM's first call (every trailing update a new shape, compiled): published as a range
  // over the four shapes above, 5.8-12.8 s, taken here as the smallest and the largest shape's.
  for (const auto& [m, n, s] : {std::tuple<Index, Index, double>{512, 512, 5.8}, {2048, 512, 12.8}}) {
    auto cold = make_neuron_backend(device, no_cache);
    rows.push_back(row("trsm cold, no cache", fmt::format("{} x {}", m, n), s, trsm_call(*cold, m, n, rng),
                       kTrnblasBench, RowRole::check));
  }
  return rows;
}

}  // namespace dfmp2::devices::neuron
