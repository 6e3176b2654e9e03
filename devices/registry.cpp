#include "devices/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "devices/eigen/eigen_backend.hpp"
#include "devices/neuron/neuron_backend.hpp"
#include "devices/openblas/openblas_backend.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::devices {

std::vector<std::string> built_backends() { return {"eigen", "openblas", "trn1", "trn2"}; }

std::vector<std::string> known_backends() { return {"eigen", "openblas", "trn1", "trn2"}; }

bool is_device_model(const std::string& name) { return name == "trn1" || name == "trn2"; }

std::string default_backend() {
#ifdef DFMP2_NATIVE_BUILD
  return "eigen";
#else
  return "openblas";
#endif
}

std::unique_ptr<linalg::Backend> make_backend(const std::string& name, const DeviceOptions& options) {
  if (name == "eigen") return make_eigen_backend();
  if (name == "openblas") return make_openblas_backend();
  if (name == "trn1" || name == "trn2") return make_neuron_backend(name, options);
  const auto known = known_backends();
  if (std::find(known.begin(), known.end(), name) != known.end()) {
    throw UnsupportedError(fmt::format("backend '{}' is not built into this dfmp2 (built: {})", name,
                                       fmt::join(built_backends(), ", ")));
  }
  throw UnsupportedError(fmt::format("unknown backend '{}' (built: {})", name, fmt::join(built_backends(), ", ")));
}

}  // namespace dfmp2::devices
