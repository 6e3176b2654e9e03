#pragma once
// Backends by name. The registry is the only place that knows which backends exist; asking for one that is
// unknown, or known but not built into this binary, is an UnsupportedError, never a quiet substitute.
#include <memory>
#include <string>
#include <vector>

#include "devices/device_options.hpp"
#include "linalg/backend.hpp"

namespace dfmp2::devices {

// Names of the backends this binary can run on this machine, in the order the README lists them: those built in,
// less avx512 on a CPU without AVX-512F.
std::vector<std::string> built_backends();
// Names the project defines, built or not (for messages and suggestions).
std::vector<std::string> known_backends();
// Why a known backend is not among built_backends() (for example "needs a CPU with AVX-512F ..."); empty when it is.
std::string unavailable_reason(const std::string& name);
// options: device-model settings (parameter overrides, compile cache); CPU backends ignore them. A bad override
// is an InputError naming the parameter (the caller prefixes the input file and key).
std::unique_ptr<linalg::Backend> make_backend(const std::string& name, const DeviceOptions& options = {});
// The backend an input without `backends` runs on: the fastest CPU backend on this machine, measured at run time
// on the products a DF calculation makes (devices/calibration.hpp; kept in the user's cache folder per CPU, library
// and kernel build), not fixed by the build or guessed from vector widths. `reason` gives the figures in a line for
// the report.
struct DefaultBackend {
  std::string name;
  std::string reason;
};
const DefaultBackend& default_backend_choice();
std::string default_backend();  // default_backend_choice().name
// True for the device models (trn1, trn2): no fp64 arithmetic, so an input without `precision` runs them in fp32.
bool is_device_model(const std::string& name);

}  // namespace dfmp2::devices
