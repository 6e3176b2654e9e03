// bench_neuron_calibration: the device model against the published trn1 measurements, row by row: role
// (calibration: a row the host-side parameters were fitted to; check: no parameter was), shape, published time,
// modelled time, error, the model's breakdown, then the median and largest |error| of each role.
// Usage: bench_neuron_calibration [device] [compile-cache-folder] [parameter=value ...]
// (parameter=value overrides an entry of devices/neuron/neuron_devices.yaml for this run, to try a value against
// every row; "" as the folder: a temporary one).
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

#include "devices/neuron/calibration.hpp"

namespace {

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }

}  // namespace

int main(int argc, char** argv) {
  namespace neuron = dfmp2::devices::neuron;
  const std::string device = argc > 1 ? argv[1] : "trn1";
  const std::string cache = argc > 2 ? argv[2] : "";
  try {
    dfmp2::devices::DeviceOptions options;
    for (int i = 3; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto eq = arg.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("expected parameter=value, got '" + arg + "'");
      options.overrides[device][arg.substr(0, eq)] = std::stod(arg.substr(eq + 1));
    }
    const auto rows = neuron::run_calibration(device, cache, options);
    fmt::print("Device model '{}' against the published trn1 measurements (times in ms; tolerance of calibration rows "
               "{:.0f}%)\n",
               device, neuron::kCalibrationTolerance * 100);
    fmt::print("{:<11} {:<32} {:<24} {:>10} {:>10} {:>7}  {:>8} {:>8} {:>7} {:>7} {:>7} {:>9} {:>3}  {}\n", "role",
               "kernel", "shape", "published", "model", "error", "dispatch", "transfer", "dma", "compute", "host",
               "compile", "lau", "source");
    int failed = 0;
    for (const auto& r : rows) {
      const auto& t = r.modelled;
      if (r.role == neuron::RowRole::calibration && !r.pass) ++failed;
      fmt::print("{:<11} {:<32} {:<24} {:>10} {:>10} {:>+6.1f}%  {:>8} {:>8} {:>7} {:>7} {:>7} {:>9} {:>3}  {}\n",
                 neuron::row_role_name(r.role), r.kernel, r.shape, ms(r.published_s), ms(r.model_s), r.error * 100,
                 ms(t.dispatch), ms(t.transfer), ms(t.dma), ms(t.compute), ms(t.host), ms(t.compile), t.launches,
                 r.source);
    }
    fmt::print("{}", neuron::row_error_summary(rows));
    fmt::print("{} calibration rows outside {:.0f}%\n", failed, neuron::kCalibrationTolerance * 100);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_neuron_calibration: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
