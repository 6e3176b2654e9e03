#pragma once
// The published trn1 measurements against the model, each row marked by its role:
//   calibration  a row the host-side parameters of devices/neuron/neuron_devices.yaml were fitted to
//                (shared/device/trn1_measurements.md's GEMM cold, SYRK and SpMM rows; the per-step columns of
//                trntensor's dispatch findings: copies to the device, copies back, launch submission);
//   check        a row no parameter was fitted to (TRSM, the GEMMs end to end through trnblas and trntensor).
// Kernel rows run through the real backend (random operands of the published shapes) and read its modelled time
// back; step rows evaluate the model's part for that step (a copy, a submission). The DF-MP2 pipelines are checked
// by their traces (bench/traces, bench/README.md "Device model: calibration and check rows"). Used by
// bench/neuron_calibration.cpp, the device tests and `dfmp2 bench --calibration`.
#include <string>
#include <vector>

#include "devices/device_options.hpp"
#include "linalg/backend.hpp"

namespace dfmp2::devices::neuron {

inline constexpr double kCalibrationTolerance = 0.25;  // relative error a calibration row may have and pass

enum class RowRole { calibration, check };
const char* row_role_name(RowRole role);

struct CalibrationRow {
  std::string kernel;         // "gemm", "gemm cold, disk cache", "syrk", "syrk cold, no cache", "spmm csr", "trsm",
                              // "copy to device", "copy to host", "launch submission"
  std::string shape;          // as the measurement table writes it
  std::string source;         // where the measurement is published (repository and file)
  RowRole role = RowRole::calibration;
  bool step = false;          // a step of a call (a copy, a submission) rather than a whole call
  double published_s = 0;     // measured on trn1
  double model_s = 0;         // ModelledTime::total of the call (or of the step)
  double error = 0;           // (model - published) / published
  bool pass = false;          // |error| <= kCalibrationTolerance
  linalg::ModelledTime modelled;
};

// Median and largest |error| of the rows of one role (of its whole calls only, when calls_only).
struct RowErrors {
  int rows = 0;
  double median = 0, largest = 0;
};
RowErrors row_errors(const std::vector<CalibrationRow>& rows, RowRole role, bool calls_only = false);
// Those figures for each role, all rows and whole calls only, one line each.
std::string row_error_summary(const std::vector<CalibrationRow>& rows);

// Runs every row on `device` ("trn1"; "trn2" gives its predictions against the trn1 numbers, for comparison
// only). cache_dir: folder for the persistent compile cache the cold-with-cache row needs; empty: a temporary
// folder, removed afterwards. The SYRK cold rows use no disk cache. options.overrides apply as in a run (to try a
// parameter against every row).
std::vector<CalibrationRow> run_calibration(const std::string& device, const std::string& cache_dir = {},
                                            const DeviceOptions& options = {});

}  // namespace dfmp2::devices::neuron
