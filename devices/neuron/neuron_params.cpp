#include "devices/neuron/neuron_params.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <stdexcept>
#include <utility>

#include "devices/neuron/neuron_devices_yaml.hpp"  // generated: kNeuronDevicesYaml
#include "linalg/errors.hpp"

namespace dfmp2::devices::neuron {
namespace {

using Field = double NeuronParams::*;

// Each parameter with the range an override may take: wide enough to explore hypothetical devices (a 4x larger
// array, a slower link), narrow enough that the model stays finite and its tile loops end (a PE array of 1e300 rows
// would overflow the integer tile size; one row would emulate a 1024-cube GEMM in a billion tiles). `whole`:
// counts (rows, engines, launches) must be whole numbers.
struct ParameterSpec {
  const char* name;
  Field field;
  double min, max;
  bool whole;
};

const std::vector<ParameterSpec>& fields() {
  static const std::vector<ParameterSpec> table = {
      {"pe_clock_ghz", &NeuronParams::pe_clock_ghz, 0.1, 10, false},
      {"pe_rows", &NeuronParams::pe_rows, 8, 1024, true},
      {"moving_free_max", &NeuronParams::moving_free_max, 8, 8192, true},
      {"matmul_min_cycles", &NeuronParams::matmul_min_cycles, 1, 4096, false},
      {"fp32_cost_factor", &NeuronParams::fp32_cost_factor, 1, 64, false},
      {"vector_clock_ghz", &NeuronParams::vector_clock_ghz, 0.1, 10, false},
      {"scalar_clock_ghz", &NeuronParams::scalar_clock_ghz, 0.1, 10, false},
      {"engine_lanes", &NeuronParams::engine_lanes, 1, 1024, true},
      {"engine_min_cycles", &NeuronParams::engine_min_cycles, 0, 1e6, false},
      {"vector_two_input_factor", &NeuronParams::vector_two_input_factor, 1, 64, false},
      {"psum_vector_scalar_serial", &NeuronParams::psum_vector_scalar_serial, 0, 1, true},
      {"sbuf_partition_kib", &NeuronParams::sbuf_partition_kib, 1, 65536, false},
      {"psum_partition_kib", &NeuronParams::psum_partition_kib, 1, 65536, false},
      {"dma_engines", &NeuronParams::dma_engines, 1, 1024, true},
      {"dma_engine_gbps", &NeuronParams::dma_engine_gbps, 0.01, 1e5, false},
      {"dma_fixed_us", &NeuronParams::dma_fixed_us, 0, 1e6, false},
      {"hbm_gib", &NeuronParams::hbm_gib, 1.0 / 1024, 1e6, false},
      {"hbm_gbps", &NeuronParams::hbm_gbps, 0.01, 1e6, false},
      {"dispatch_ms", &NeuronParams::dispatch_ms, 0, 1e6, false},
      {"dispatch_tensor_ms", &NeuronParams::dispatch_tensor_ms, 0, 1e6, false},
      {"h2d_fixed_us", &NeuronParams::h2d_fixed_us, 0, 1e9, false},
      {"h2d_small_gbps", &NeuronParams::h2d_small_gbps, 0.001, 1e5, false},
      {"h2d_knee_mib", &NeuronParams::h2d_knee_mib, 0, 1e7, false},
      {"h2d_large_gbps", &NeuronParams::h2d_large_gbps, 0.001, 1e5, false},
      {"d2h_fixed_us", &NeuronParams::d2h_fixed_us, 0, 1e9, false},
      {"d2h_small_gbps", &NeuronParams::d2h_small_gbps, 0.001, 1e5, false},
      {"d2h_knee_mib", &NeuronParams::d2h_knee_mib, 0, 1e7, false},
      {"d2h_large_gbps", &NeuronParams::d2h_large_gbps, 0.001, 1e5, false},
      {"host_gflops", &NeuronParams::host_gflops, 0.001, 1e6, false},
      {"host_gflops_half_rhs", &NeuronParams::host_gflops_half_rhs, 0, 1e9, false},
      {"host_lapack_gflops", &NeuronParams::host_lapack_gflops, 0.001, 1e6, false},
      {"host_lapack_half_n", &NeuronParams::host_lapack_half_n, 0, 1e9, false},
      {"host_stream_gbps", &NeuronParams::host_stream_gbps, 0.001, 1e5, false},
      {"host_stream_memory_gbps", &NeuronParams::host_stream_memory_gbps, 0.001, 1e5, false},
      {"host_first_touch_gbps", &NeuronParams::host_first_touch_gbps, 0.001, 1e5, false},
      {"syrk_mirror_gbps", &NeuronParams::syrk_mirror_gbps, 0.001, 1e5, false},
      {"densify_memset_gbps", &NeuronParams::densify_memset_gbps, 0.001, 1e5, false},
      {"densify_ns_per_nnz", &NeuronParams::densify_ns_per_nnz, 0, 1e6, false},
      {"compile_base_s", &NeuronParams::compile_base_s, 0, 1e5, false},
      {"compile_ms_per_instruction", &NeuronParams::compile_ms_per_instruction, 0, 1e6, false},
      {"compile_unrolled_max", &NeuronParams::compile_unrolled_max, 0, 1e9, true},
      {"compile_ms_per_rolled_instruction", &NeuronParams::compile_ms_per_rolled_instruction, 0, 1e6, false},
      {"cache_load_ms", &NeuronParams::cache_load_ms, 0, 1e6, false},
      {"queue_depth", &NeuronParams::queue_depth, 1, 1024, true},
      {"batched_gemm_launches", &NeuronParams::batched_gemm_launches, 0, 1, true},
  };
  return table;
}

const ParameterSpec* find_field(const std::string& name) {
  for (const auto& f : fields())
    if (f.name == name) return &f;
  return nullptr;
}

void check_value(const std::string& device, const ParameterSpec& spec, double v) {
  const bool ok = std::isfinite(v) && v >= spec.min && v <= spec.max && (!spec.whole || v == std::floor(v));
  if (!ok) {
    throw InputError(fmt::format("device '{}': parameter '{}' = {} must be {} from {} to {}", device, spec.name, v,
                                 spec.whole ? "a whole number" : "a number", spec.min, spec.max));
  }
}

}  // namespace

const char* neuron_devices_yaml() { return kNeuronDevicesYaml; }

std::vector<std::string> neuron_devices() { return {"trn1", "trn2"}; }

std::vector<std::string> neuron_parameter_names() {
  std::vector<std::string> names;
  for (const auto& f : fields()) names.emplace_back(f.name);
  return names;
}

NeuronParams load_neuron_params(const std::string& device, const DeviceOptions& options) {
  // The embedded file is part of the program: a malformed one is a build defect (logic_error), not an input error.
  const YAML::Node root = YAML::Load(kNeuronDevicesYaml);
  const YAML::Node node = root[device];
  if (!node || !node.IsMap())
    throw UnsupportedError(fmt::format("no NeuronCore model named '{}' (known: {})", device,
                                       fmt::join(neuron_devices(), ", ")));
  NeuronParams p;
  p.device = device;
  for (const auto& entry : node) {
    const auto name = entry.first.as<std::string>();
    const ParameterSpec* f = find_field(name);
    if (!f) throw std::logic_error("neuron_devices.yaml: " + device + ": unknown parameter '" + name + "'");
    if (!entry.second["value"] || !entry.second["unit"] || !entry.second["source"])
      throw std::logic_error("neuron_devices.yaml: " + device + "." + name + " lacks value, unit or source");
    p.*(f->field) = entry.second["value"].as<double>();
  }
  for (const auto& f : fields())
    if (!node[f.name]) throw std::logic_error("neuron_devices.yaml: " + device + " lacks parameter '" + f.name + "'");

  if (const auto it = options.overrides.find(device); it != options.overrides.end()) {
    for (const auto& [name, value] : it->second) {
      const ParameterSpec* f = find_field(name);
      if (!f)
        throw InputError(fmt::format("unknown parameter '{}' for device '{}' (known: {})", name, device,
                                     fmt::join(neuron_parameter_names(), ", ")));
      check_value(device, *f, value);
      p.*(f->field) = value;
    }
  }
  return p;
}

}  // namespace dfmp2::devices::neuron
