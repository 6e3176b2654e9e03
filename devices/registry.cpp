#include "devices/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "devices/packed/packed_backend.hpp"
#include "devices/calibration.hpp"
#include "devices/eigen/eigen_backend.hpp"
#include "devices/neuron/neuron_backend.hpp"
#include "devices/openblas/openblas_backend.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::devices {

std::vector<std::string> built_backends() {
  std::vector<std::string> out;
  for (const auto& name : known_backends()) {
    if (unavailable_reason(name).empty()) out.push_back(name);
  }
  return out;
}

std::string unavailable_reason(const std::string& name) {
  if (name == "avx512" && !avx512_available()) return "it needs a CPU with AVX-512F and FMA, and this one has not";
  if (name == "avx2" && !avx2_available()) return "it needs a CPU with AVX2 and FMA, and this one has not";
  return {};
}

std::vector<std::string> known_backends() { return {"eigen", "openblas", "avx2", "avx512", "trn1", "trn2"}; }

bool is_device_model(const std::string& name) { return name == "trn1" || name == "trn2"; }

const DefaultBackend& default_backend_choice() {
  static const DefaultBackend choice = [] {
    const Calibration& c = machine_calibration();
    const BackendRate& best = fastest(c.rates);
    return DefaultBackend{best.backend, fmt::format("the fastest measured: {}", calibration_summary(c))};
  }();
  return choice;
}

std::string default_backend() { return default_backend_choice().name; }

std::unique_ptr<linalg::Backend> make_backend(const std::string& name, const DeviceOptions& options) {
  if (name == "eigen") return make_eigen_backend();
  if (name == "openblas") return make_openblas_backend();
  if (name == "avx512" && avx512_available()) return make_avx512_backend();
  if (name == "avx2" && avx2_available()) return make_avx2_backend();
  if (name == "trn1" || name == "trn2") return make_neuron_backend(name, options);
  const auto known = known_backends();
  if (std::find(known.begin(), known.end(), name) != known.end()) {
    const std::string why = unavailable_reason(name);
    throw UnsupportedError(fmt::format("backend '{}' {} (built: {})", name,
                                       why.empty() ? std::string("is not built into this dfmp2") : "cannot run: " + why,
                                       fmt::join(built_backends(), ", ")));
  }
  throw UnsupportedError(fmt::format("unknown backend '{}' (built: {})", name, fmt::join(built_backends(), ", ")));
}

}  // namespace dfmp2::devices
