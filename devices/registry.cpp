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

const DefaultBackend& default_backend_choice() {
  static const DefaultBackend choice = [] {
    const VectorWidth eigen = eigen_vector_width(), blas = openblas_vector_width();
    const bool openblas = blas.flops_per_cycle() >= eigen.flops_per_cycle();
    const std::string compared = fmt::format(
        "OpenBLAS runs its {} kernels ({}, {} double flops per cycle and unit), Eigen is compiled for {} ({})",
        openblas_kernel_set(), blas.name, blas.flops_per_cycle(), eigen.name, eigen.flops_per_cycle());
    return DefaultBackend{openblas ? "openblas" : "eigen",
                          fmt::format("chosen at run time: {}; {}", compared,
                                      openblas ? (blas.flops_per_cycle() == eigen.flops_per_cycle()
                                                      ? "a tie goes to OpenBLAS (faster SYRK, TRSM, eigh)"
                                                      : "OpenBLAS is wider")
                                               : "Eigen is wider")};
  }();
  return choice;
}

std::string default_backend() { return default_backend_choice().name; }

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
