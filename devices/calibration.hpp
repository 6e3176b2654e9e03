#pragma once
// The default CPU backend by measured speed. A vector width does not say how fast a core executes it (Zen 4 runs
// AVX-512 on 256-bit units, and OpenBLAS's Cooperlake DGEMM beats dfmp2's own there), so each built CPU backend
// runs a short set of the products a DF-SCF and DF-MP2 make (calibration_shapes()) and the one with the shortest
// total time is the default. The figures are kept per machine in the user's cache folder
// ($XDG_CACHE_HOME/dfmp2, else ~/.cache/dfmp2; one file per key) and measured again when the key changes: the CPU
// model, every candidate's details (library version, kernel set, threads) and dfmp2's own kernels' build. A lock
// file makes processes that start together measure once and agree.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "linalg/backend.hpp"

namespace dfmp2::devices {

// One product of the calibration set.
struct CalibrationShape {
  std::string label;  // what it stands for in a DF calculation
  linalg::Op op;      // gemm or syrk
  bool trans_a = false, trans_b = false;
  linalg::Index m = 0, n = 0, k = 0;  // syrk: n x n from k
  double flops() const;
};
const std::vector<CalibrationShape>& calibration_shapes();

struct BackendRate {
  std::string backend;
  double gflops = 0;   // the set's flops over its best pass (GFLOP/s)
  double seconds = 0;  // that pass
};

struct Candidate {
  std::string name;
  std::function<std::unique_ptr<linalg::Backend>()> make;
};

// Each candidate's rate on the calibration set: one untimed pass, then the best of `passes` timed ones.
std::vector<BackendRate> measure_rates(const std::vector<Candidate>& candidates, int passes = 3);
// The fastest of the rates (the first on a tie); throws std::logic_error on none.
const BackendRate& fastest(const std::vector<BackendRate>& rates);

struct Calibration {
  std::vector<BackendRate> rates;  // every built CPU backend, in the order of built_backends()
  std::string cpu;                 // the CPU model the figures are for
  std::string key;                 // everything they are valid for (CPU, each backend's details, own kernels' build)
  std::string file;                // the cache file they were read from or written to ("" when none)
  bool cached = false;             // read from the cache (not measured by this process)
  std::string note;                // what went wrong with the cache, when something did ("" otherwise)
};
// The candidates' calibration kept in `folder` ("" for none): read from its file for this key when that file names
// every candidate, else measured (and written there). Processes calibrating in the same folder take turns, each
// waiting at most `lock_patience` seconds for the others; the cache file is read and written as a kept file
// (linalg/kept_files.hpp: no links followed, no FIFO waited on, at most what a valid file holds).
inline constexpr double kCalibrationLockPatience = 20.0;  // a calibration takes about a second
Calibration calibrate(const std::vector<Candidate>& candidates, const std::string& folder,
                      double lock_patience = kCalibrationLockPatience);
// This machine's calibration of every built CPU backend in the user's cache folder (once per process). With several
// MPI ranks the caller makes rank 0's choice every rank's (app: a rank's default is rank 0's).
const Calibration& machine_calibration();
// The rates a cache file's `text` holds for `key`: none when it is for another key or damaged (then calibrate()
// measures again). What calibrate() reads back, declared for the fuzzer (tests/fuzz/fuzz_calibration_cache.cpp).
std::vector<BackendRate> read_calibration_cache(const std::string& text, const std::string& key);
// The header every cache file starts with.
extern const std::string kCalibrationCacheHeader;

// The line the report and the default backend's reason use: "avx512 58.1, openblas 66.2, eigen 40.3 GFLOP/s ...".
std::string calibration_summary(const Calibration& c);

}  // namespace dfmp2::devices
