#pragma once
// The published trn1 measurements (shared/device/trn1_measurements.md) against the model: each kernel row is run
// through the real backend (random operands of the published shapes) and its modelled time read back. Used by
// bench/neuron_calibration.cpp, the device tests and `dfmp2 bench --calibration`.
#include <string>
#include <vector>

#include "linalg/backend.hpp"

namespace dfmp2::devices::neuron {

inline constexpr double kCalibrationTolerance = 0.25;  // relative error a row may have and pass

struct CalibrationRow {
  std::string kernel;         // "gemm", "gemm cold, disk cache", "syrk", "syrk cold, no cache", "spmm csr"
  std::string shape;          // as the measurement table writes it
  double published_s = 0;     // measured on trn1
  double model_s = 0;         // ModelledTime::total of the call
  double error = 0;           // (model - published) / published
  bool pass = false;          // |error| <= kCalibrationTolerance
  linalg::ModelledTime modelled;
};

// Runs every row on `device` ("trn1"; "trn2" gives its predictions against the trn1 numbers, for comparison
// only). cache_dir: folder for the persistent compile cache the cold-with-cache row needs; empty: a temporary
// folder, removed afterwards. The SYRK cold rows use no disk cache.
std::vector<CalibrationRow> run_calibration(const std::string& device, const std::string& cache_dir = {});

}  // namespace dfmp2::devices::neuron
