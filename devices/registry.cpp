#include "devices/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "devices/avx512/avx512_backend.hpp"
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
  return {};
}

std::vector<std::string> known_backends() { return {"eigen", "openblas", "avx512", "trn1", "trn2"}; }

bool is_device_model(const std::string& name) { return name == "trn1" || name == "trn2"; }

const DefaultBackend& default_backend_choice() {
  static const DefaultBackend choice = [] {
    const VectorWidth eigen = eigen_vector_width(), blas = openblas_vector_width(), own = avx512_vector_width();
    // Candidates in the order a tie is broken: dfmp2's AVX-512 GEMM (1.4x Eigen's AVX-512 GEMM and 1.8x OpenBLAS's
    // Haswell kernels on the development machine, bench/README.md), then OpenBLAS (faster SYRK, TRSM and eigh than
    // Eigen at the same width), then Eigen.
    struct Candidate {
      const char* name;
      int flops;
    };
    const Candidate candidates[] = {{"avx512", own.flops_per_cycle()},
                                    {"openblas", blas.flops_per_cycle()},
                                    {"eigen", eigen.flops_per_cycle()}};
    const Candidate* best = &candidates[0];
    for (const Candidate& c : candidates) {
      if (c.flops > best->flops) best = &c;
    }
    const std::string compared = fmt::format(
        "dfmp2's avx512 GEMM {}, OpenBLAS runs its {} kernels ({}, {} double flops per cycle and unit), Eigen is "
        "compiled for {} ({})",
        own.doubles > 0 ? fmt::format("(AVX-512 + FMA, {})", own.flops_per_cycle()) : fmt::format("({})", own.name),
        openblas_kernel_set(), blas.name, blas.flops_per_cycle(), eigen.name, eigen.flops_per_cycle());
    int ties = 0;
    for (const Candidate& c : candidates) ties += c.flops == best->flops ? 1 : 0;
    return DefaultBackend{best->name, fmt::format("chosen at run time: {}; {}", compared,
                                                  ties > 1 ? fmt::format("{} is among the widest and first on a tie "
                                                                         "(avx512, openblas, eigen)",
                                                                         best->name)
                                                           : fmt::format("{} is the widest", best->name))};
  }();
  return choice;
}

std::string default_backend() { return default_backend_choice().name; }

std::unique_ptr<linalg::Backend> make_backend(const std::string& name, const DeviceOptions& options) {
  if (name == "eigen") return make_eigen_backend();
  if (name == "openblas") return make_openblas_backend();
  if (name == "avx512" && avx512_available()) return make_avx512_backend();
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
