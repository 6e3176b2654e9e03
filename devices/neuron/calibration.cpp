#include "devices/neuron/calibration.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>

#include "devices/neuron/neuron_backend.hpp"

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

CalibrationRow row(std::string kernel, std::string shape, double published, const linalg::ModelledTime& modelled) {
  CalibrationRow r;
  r.kernel = std::move(kernel);
  r.shape = std::move(shape);
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

linalg::ModelledTime syrk_call(linalg::Backend& b, Index m, Index k, std::mt19937_64& rng) {
  const MatrixF a = random_matrix(m, k, rng);
  MatrixF c(m, m);
  return modelled(b, linalg::Syrk<float>{linalg::Uplo::lower, Trans::no, 1.0f, linalg::view(a), 0.0f, linalg::view(c)});
}

}  // namespace

std::vector<CalibrationRow> run_calibration(const std::string& device, const std::string& cache_dir) {
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
  auto warm = make_neuron_backend(device, DeviceOptions{.overrides = {}, .compile_cache = {}});
  for (const auto& [n, ms] : {std::pair<Index, double>{512, 1.3}, {1024, 2.3}}) {
    gemm_call(*warm, n, rng);
    rows.push_back(row("gemm", fmt::format("{0} x {0} x {0}", n), ms * 1e-3, gemm_call(*warm, n, rng)));
  }
  // First call of a session whose disk cache holds the kernel: one session compiles it into the cache, a second
  // session loads it.
  {
    const DeviceOptions with_cache{.overrides = {}, .compile_cache = cache};
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
    auto cold = make_neuron_backend(device);
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
  return rows;
}

}  // namespace dfmp2::devices::neuron
