#pragma once
// Backends by name. The registry is the only place that knows which backends exist; asking for one that is
// unknown, or known but not built into this binary, is an UnsupportedError, never a quiet substitute.
#include <memory>
#include <string>
#include <vector>

#include "devices/device_options.hpp"
#include "linalg/backend.hpp"

namespace dfmp2::devices {

// Names of the backends built into this binary, in the order the README lists them.
std::vector<std::string> built_backends();
// Names the project defines, built or not (for messages and suggestions).
std::vector<std::string> known_backends();
// options: device-model settings (parameter overrides, compile cache); CPU backends ignore them. A bad override
// is an InputError naming the parameter (the caller prefixes the input file and key).
std::unique_ptr<linalg::Backend> make_backend(const std::string& name, const DeviceOptions& options = {});
// The backend an input without `backends` runs on: the faster CPU backend for this build. A native build
// (CMake DFMP2_NATIVE, the default) compiles Eigen for this CPU's vector units, which beats Debian's OpenBLAS
// on CPUs that OpenBLAS does not recognise; a portable build leaves Eigen at the x86-64 baseline, so there
// OpenBLAS, which picks its kernels at run time, is the faster one.
std::string default_backend();
// True for the device models (trn1, trn2): no fp64 arithmetic, so an input without `precision` runs them in fp32.
bool is_device_model(const std::string& name);

}  // namespace dfmp2::devices
