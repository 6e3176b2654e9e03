// bench_neuron_calibration: the published trn1 measurements (shared/device/trn1_measurements.md) against the
// trn1 device model, row by row: shape, published time, modelled time, error, the model's breakdown and PASS or
// FAIL against the 25% tolerance. Usage: bench_neuron_calibration [device] [compile-cache-folder].
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

#include "devices/neuron/calibration.hpp"

namespace {

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }

}  // namespace

int main(int argc, char** argv) {
  const std::string device = argc > 1 ? argv[1] : "trn1";
  const std::string cache = argc > 2 ? argv[2] : "";
  try {
    const auto rows = dfmp2::devices::neuron::run_calibration(device, cache);
    fmt::print("Device model '{}' against the published trn1 measurements (times in ms; tolerance {:.0f}%)\n", device,
               dfmp2::devices::neuron::kCalibrationTolerance * 100);
    fmt::print("{:<22} {:<30} {:>10} {:>10} {:>7}  {:>8} {:>8} {:>7} {:>7} {:>7} {:>9} {:>3}  {}\n", "kernel", "shape",
               "published", "model", "error", "dispatch", "transfer", "dma", "compute", "host", "compile", "lau",
               "result");
    int failed = 0;
    for (const auto& r : rows) {
      const auto& t = r.modelled;
      failed += r.pass ? 0 : 1;
      fmt::print("{:<22} {:<30} {:>10} {:>10} {:>+6.1f}%  {:>8} {:>8} {:>7} {:>7} {:>7} {:>9} {:>3}  {}\n", r.kernel,
                 r.shape, ms(r.published_s), ms(r.model_s), r.error * 100, ms(t.dispatch), ms(t.transfer), ms(t.dma),
                 ms(t.compute), ms(t.host), ms(t.compile), t.launches, r.pass ? "PASS" : "FAIL");
    }
    fmt::print("{} of {} rows within {:.0f}%\n", rows.size() - failed, rows.size(),
               dfmp2::devices::neuron::kCalibrationTolerance * 100);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_neuron_calibration: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
